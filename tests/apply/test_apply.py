"""Apply prompts (golden strings), output cleaning, naive merge."""

from __future__ import annotations

import json

import pytest
from conftest import BENCH

from edge_spec.apply import TEMPLATES, build_messages, clean_output, naive_merge, pick_template
from edge_spec.bench.modes import read_text
from edge_spec.errors import UserError

ORIG = "def f(x):\n    return x + 1\n"
UPD = "def f(x):\n    # ... existing code ...\n    return x + 2\n"


def test_instruct_template_golden() -> None:
    msgs, prefix, stop = build_messages(TEMPLATES["instruct"], ORIG, UPD, "bump", "python")
    assert msgs[0]["role"] == "system" and "complete updated file" in msgs[0]["content"]
    assert msgs[1]["content"] == (
        "Original file:\n```python\ndef f(x):\n    return x + 1\n```\n\nInstruction: bump\n\n"
        "Edit snippet (`... existing code ...` stands for unchanged code):\n```python\n"
        "def f(x):\n    # ... existing code ...\n    return x + 2\n```\n\n"
        "Output the complete updated file."
    )
    assert prefix == "```python\n" and stop == ("\n```",)


def test_tagged_templates_golden() -> None:
    msgs, prefix, stop = build_messages(TEMPLATES["fastapply"], ORIG, UPD, "bump")
    assert msgs == [
        {
            "role": "user",
            "content": "<instruction>bump</instruction>\n<code>def f(x):\n"
            "    return x + 1\n</code>\n<update>def f(x):\n    # ... existing code ...\n"
            "    return x + 2\n</update>",
        }
    ]
    assert prefix == "<updated-code>" and stop == ("</updated-code>",)
    msgs, prefix, stop = build_messages(TEMPLATES["aixapply"], ORIG, UPD, None)
    assert msgs[0]["content"].startswith("<source_file>\ndef f(x):")
    assert "<update_snippet>\n" in msgs[0]["content"] and prefix == "<update_file>\n"


def test_fence_grows_when_the_code_has_fences() -> None:
    msgs, prefix, stop = build_messages(TEMPLATES["instruct"], "x = '```'\n", "y\n", None)
    assert prefix.startswith("````") and stop == ("\n````",)


def test_pick_template() -> None:
    assert pick_template({"general.name": "Qwen2.5 Coder 1.5B Instruct"}).name == "instruct"
    assert pick_template({"general.name": "FastApply-1.5B-v1.0"}).name == "fastapply"
    assert pick_template({"general.name": "aiXapply-4B"}).name == "aixapply"
    assert pick_template({}, "aixapply").name == "aixapply"
    with pytest.raises(UserError):
        pick_template({}, "nope")


@pytest.mark.parametrize(
    "raw,prefix,want",
    [
        ("def f(x):\n    return x + 2", "```python\n", "def f(x):\n    return x + 2\n"),
        ("def f(x):\n", "```python\n", "def f(x):\n\n"),
        ("```python\ndef f(x):\n    return 2\n```\n", "", "def f(x):\n    return 2\n"),
        ("<updated-code>def f(x):\n    return 2\n</updated-code>", "", "def f(x):\n    return 2\n"),
        ("\ndef f(x):\n    return 2\n", "<update_file>\n", "def f(x):\n    return 2\n"),
    ],
)
def test_clean_output(raw: str, prefix: str, want: str) -> None:
    stop = ("\n```",) if prefix.startswith("```") else ()
    assert clean_output(raw, ORIG, prefix, stop) == want


def test_clean_output_newline_conventions() -> None:
    fence = ("```\n", ("\n```",))
    assert clean_output("a\nb", "x\ny", *fence) == "a\nb"  # original had no final newline
    assert clean_output("a\nb", "x\r\ny\r\n", *fence) == "a\r\nb\r\n"
    assert clean_output("a\n\nb\n", "x\n\ny\n\n", *fence) == "a\n\nb\n\n"


def test_naive_merge_examples() -> None:
    assert naive_merge(ORIG, "def f(x):\n    return x + 2\n") == "def f(x):\n    return x + 2\n"
    orig = "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n"
    upd = "# ... existing code ...\nc = 30\nd = 4\n# ... existing code ...\n"
    assert naive_merge(orig, upd) == "a = 1\nb = 2\nc = 30\nd = 4\ne = 5\n"


def test_naive_merge_on_dev_set() -> None:
    path = BENCH / "code_apply_dev.jsonl.gz"
    if not path.exists():
        pytest.skip("no benchmark data")
    tasks = [json.loads(line) for line in read_text(path).splitlines()]
    exact = sum(naive_merge(t["original"], t["update"]) == t["expected"] for t in tasks)
    print(f"\n[naive merge] exact on code_apply_dev.jsonl.gz: {exact}/{len(tasks)}")
    assert exact >= len(tasks) // 2


def test_accuracy_metrics() -> None:
    from edge_spec.bench.metrics import line_similarity, ws_equal

    assert ws_equal("a = 1\n\nb = 2\n", "a =  1\nb = 2")
    assert not ws_equal("a = 1\n", "a = 2\n")
    assert line_similarity("x\ny\n", "x\ny\n") == 1.0
    assert 0.4 < line_similarity("x\ny\nz\n", "x\nY\nz\n") < 0.9
    assert line_similarity("", "") == 1.0


def test_the_original_comes_first_so_a_resent_file_reuses_its_prefix() -> None:
    from edge_spec.apply.plan import plan_apply
    from edge_spec.runtimes.fake import FakeRuntime
    from edge_spec.runtimes.prefix import common_prefix

    rt = FakeRuntime(n_ctx=8192)
    a = plan_apply(rt, ORIG * 20, UPD, "bump to 2")
    b = plan_apply(rt, ORIG * 20, "def f(x):\n    return x * 3\n", "triple it instead")
    shared = common_prefix(a.tokens, b.tokens)
    assert shared >= len(rt.tokenize(ORIG * 20))  # the whole file, whatever the instruction
