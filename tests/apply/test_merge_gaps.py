"""Changes between anchors whose context repeats: sure only where no other reading fits."""

from __future__ import annotations

import pytest
from mined import assert_sure_and_right, dev_task

from edge_spec.apply.merge import structural_merge
from edge_spec.apply.merge.syntax import hunk_definitions

TESTS = """import click


def test_plain(capfd):
    click.echo(text)
    out, err = capfd.readouterr()
    assert out == f"{text}\\n"


def test_styled(capfd):
    click.echo(styled)
    out, err = capfd.readouterr()
    assert out == f"{text}\\n"

    isatty = True
    stream = StringIO()
    click.echo(styled, file=stream)
    assert stream.getvalue() == f"{styled}\\n"
    isatty = False
"""

SNIPPET = """# ... existing code ...
    out, err = capfd.readouterr()
    assert out == f"{text}\\n"

    click.echo(styled, color=True)
    out, err = capfd.readouterr()
    assert out == f"{styled}\\n"
    isatty = False
"""


def test_repeated_context_nearest_an_identified_side_is_sure() -> None:
    # The leading lines end both tests; read at the first test, the change would also delete
    # the second one, whose own copy of them the snippet shows. The trailing `isatty = False`
    # stands once, so the replaced lines are those between them in the second test.
    result = structural_merge(TESTS, SNIPPET, "python")
    expected = TESTS.replace(
        """    isatty = True
    stream = StringIO()
    click.echo(styled, file=stream)
    assert stream.getvalue() == f"{styled}\\n"
""",
        """    click.echo(styled, color=True)
    out, err = capfd.readouterr()
    assert out == f"{styled}\\n"
""",
    )
    assert result.exact, result.hunks
    assert result.text == expected


OVERLOADS = """object Sources {
    fun from(
        file: Path,
        strict: Boolean = false,
    ): Source {
        val props = Properties()
        load(file, props)
        return from(props)
    }

    fun from(
        file: File,
        strict: Boolean = false,
    ): Source {
        return from(file.toPath(), strict)
    }
}
"""


def test_repeated_context_with_a_twin_past_the_change_stays_unsure() -> None:
    # Both overloads end their signatures alike and their bodies with `}`: which body the
    # snippet rewrites cannot be told from lines that stand at both.
    snippet = """// ... existing code ...
        strict: Boolean = false,
    ): Source {
        return load(file)
    }
// ... existing code ...
"""
    result = structural_merge(OVERLOADS, snippet, "kotlin")
    assert not result.exact
    assert "also occurs elsewhere" in " ".join(h.reason for h in result.hunks)


def test_rename_before_a_repeated_body_stays_unsure() -> None:
    # Renaming the first of two alike tests reads as well as deleting it and renaming the
    # second: the body shown after the new name stands at both.
    tests = """describe('res', function () {
  it('should redirect', function (done) {
    request(app).expect(302, done)
  })

  it('should encode uri1', function (done) {
    var app = express()
    request(app).expect(200, done)
  })

  it('should encode uri2', function (done) {
    var app = express()
    request(app).expect(200, done)
  })
})
"""
    snippet = """// ... existing code ...
    request(app).expect(302, done)
  })

  it('should encode uri', function (done) {
    var app = express()
    request(app).expect(200, done)
// ... existing code ...
"""
    result = structural_merge(tests, snippet, "javascript")
    assert not result.exact
    assert "also fits" in result.hunks[0].reason


READER = """class Reader {
  static factories() {
    return [a, b];
  }

  static factory = null;

  path() {
    return 1;
  }
}
"""


def test_a_deletion_after_a_changed_body_and_its_closer_is_sure() -> None:
    # `}` alone has no identity, but any `}` it could be between the changed line and `path()`
    # writes the same file: the changed line replaces the lines before it, the rest goes.
    snippet = (
        "// ... existing code ...\n  static factories() {\n    return list();\n  }\n\n"
        "  path() {\n// ... existing code ...\n"
    )
    for lang in ("javascript", ""):
        merge = structural_merge(READER, snippet, lang)
        assert merge.exact, [h.reason for h in merge.hunks]
        assert merge.text == READER.replace("[a, b]", "list()").replace(
            "  static factory = null;\n\n", ""
        )


def test_a_deletion_after_a_closer_next_to_a_marker_stays_unsure() -> None:
    # Which `}` the marker leads to decides what goes: nothing beyond it pins the closer.
    snippet = "// ... existing code ...\n  }\n\n  path() {\n// ... existing code ...\n"
    for lang in ("javascript", ""):
        assert not structural_merge(READER, snippet, lang).exact


@pytest.mark.parametrize(
    "task_id",
    [
        # A field deleted after a method whose body changed (Java).
        "moshi-aa9125b-0",
        # A method deleted after one whose body changed, tabs and spaces mixed (Swift).
        "swiftyjson-522575b-0",
    ],
)
def test_mined_deletions_after_a_changed_body(task_id: str) -> None:
    assert_sure_and_right(dev_task("code_apply_mined3.jsonl", task_id))


QUEUE = """public class Queue
{
    public void Drain()
    {
        Drain(null);
    }

    protected void Drain(Context context)
    {
        using (Lock.Take(_lock))
        {
            _pending = 0;
            _last = null;
            var prior = _state;
            _state = State.Idle;

            Notify();
            Log.Write("drained");

            if (prior != State.Idle)
            {
                _onDrain(context);
            }
        }
    }

    public void Pause()
    {
        _state = State.Paused;
    }
}
"""


def test_a_new_method_holding_its_neighbours_statements_stays_unsure() -> None:
    # The new method after `Drain()` has the statements of the `Drain(Context)` shown after it,
    # taken out of the `using` block: inserted beside it, or the old one renamed and reworked?
    snippet = """// ... existing code ...
    public void Drain()
    {
        OnDrained(null);
    }

    protected void DrainLocked(Context context)
    {
        _pending = 0;
        _last = null;
        var prior = _state;
        _state = State.Idle;
        if (prior != State.Idle)
        {
            _onDrain(context);
        }
    }

    // ... existing code ...
"""
    result = structural_merge(QUEUE, snippet, "csharp")
    assert not result.exact
    other = snippet.replace("_pending = 0;\n        _last = null;", "Flush();").replace(
        "var prior = _state;\n        _state = State.Idle;\n", ""
    )
    assert structural_merge(QUEUE, other, "csharp").exact


SOCKETS = """static int nonblock(int fd) {
    if (fcntl(fd) == -1) {
        return ERR;
    }
    return OK;
}

static int nodelay(int fd) {
    if (setsockopt(fd) == -1) {
        return ERR;
    }
    return OK;
}

int connect_to(ctx *c, const char *addr) {
    int s;
    int blocking = (c->flags & BLOCK);
    struct sockaddr_in sa;

    if ((s = make_socket(c)) == ERR)
        return ERR;
    if (connect(s, &sa, sizeof(sa)) == -1) {
        close(s);
        return ERR;
    }
    c->fd = s;
    return OK;
}
"""

# The new function is the old one's copy for another socket family.
UNIX = (
    SOCKETS[SOCKETS.index("int connect_to") :]
    .replace("connect_to", "connect_unix")
    .replace("*addr", "*path")
    .replace("sockaddr_in", "sockaddr_un")
)
SOCKETS_SNIPPET = (
    "// ... existing code ...\n    return OK;\n}\n\n"
    "int connect_tcp(ctx *c, const char *addr) {\n    int s;\n"
    "    int blocking = (c->flags & BLOCK);\n    struct sockaddr_in sa;\n"
    "// ... existing code ...\n    c->fd = s;\n    return OK;\n}\n\n" + UNIX
)


def test_a_new_function_copied_from_an_old_body_does_not_bound_the_hunks_before() -> None:
    # The appended function repeats the old one's body; were its lines taken as context there,
    # the rename before it would have to fit above the old function and land in the wrong one.
    result = structural_merge(SOCKETS, SOCKETS_SNIPPET, "c")
    assert result.text == SOCKETS.replace("connect_to", "connect_tcp") + "\n" + UNIX
    task = dev_task("code_apply_mined.jsonl", "hiredis-0ccb2c8-0")
    merge = structural_merge(task["original"], task["update"], task["language"], task["path"])
    assert merge.text == task["expected"]


EVENT = """public class Event
{
    /// <summary>
    /// Make an event.
    /// </summary>
    /// <param name="level">The level.</param>
    /// <param name="text">The text.</param>
    public Event(Level level, string text)
        : this(level, text, null)
    {
    }

    public void Remove(string name)
    {
        _items.Remove(name);
    }

    internal Event Copy()
    {
        return new Event(_level, _text);
    }
}
"""
FROM_PARTS = """    /// <summary>
    /// Make an event from its parts.
    /// </summary>
    /// <param name="level">The level.</param>
    /// <param name="text">The text.</param>
    [Pure]
    public static Event FromParts(Level level, string text)
    {
        return new Event(level, text);
    }

"""


def test_a_member_hunk_between_two_methods_parses_into_its_whole_definition() -> None:
    # The hunk opens on the tail of one method and stops inside the next: the method between
    # is a whole definition all the same, its doc comment with it.
    lines = ["        _items.Remove(name);", "    }", ""] + FROM_PARTS.splitlines()
    lines += ["    internal Event Copy()", "    {"]
    items = [d for d in hunk_definitions("csharp", lines) or () if d.kind != "comment"]
    assert [(d.kind, d.name, d.complete) for d in items] == [
        ("other", "", False),
        ("function", "FromParts", True),
        ("other", "", False),
    ]
    assert items[1].end == 3 + len(FROM_PARTS.splitlines()) - 2


def test_a_new_method_whose_doc_repeats_another_goes_where_it_is_shown() -> None:
    # Its `<param>` lines are those of the constructor's doc: no context for the new method.
    snippet = (
        "// ... existing code ...\n        _items.Remove(name);\n    }\n\n"
        + FROM_PARTS
        + "    internal Event Copy()\n    {\n// ... existing code ...\n"
    )
    result = structural_merge(EVENT, snippet, "csharp")
    assert result.exact, [h.reason for h in result.hunks]
    assert result.text == EVENT.replace("    internal Event", FROM_PARTS + "    internal Event")


@pytest.mark.parametrize("blank", [True, False])
def test_a_hunk_that_stops_inside_its_function_keeps_it_open(blank: bool) -> None:
    # The open bracket at the end is the function's own statement, not a sibling's header:
    # cutting the hunk before it would make a whole function of its first lines.
    lines = [
        "",
        "def test_install():",
        '    text = ""',
        "    if path.is_file():",
        "        text = path.read_text()",
        *([""] if blank else []),
        "    result = subprocess.run(",
        "        [",
        '            "bash",',
    ]
    items = hunk_definitions("python", lines) or ()
    assert not any(d.kind == "function" and d.complete for d in items)
