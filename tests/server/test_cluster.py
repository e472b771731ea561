"""`edge-spec serve --cluster`: Ray Serve with 2 SmolLM2 replicas (1 thread each), on loopback.

One local Ray instance per module (2 CPUs, no dashboard, 100 MB object store). The official
openai client drives chat, streaming and Predicted-Outputs apply; /v1/apply checks affinity
(the router's choice is predicted from the replica ids, so the test is deterministic); a replica
killed in a burst of 8 requests checks that every request gets its own text or a clean error.
First, on its own Ray (so it must run before the shared one starts): two Ray nodes on this
machine (`ray.cluster_utils.Cluster`), one engine replica placed on each. The router's ranking
(key, then load, with Ray's retry backoff on) is checked without Ray. Select with
``-m cluster``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import pytest
from conftest import load_tasks

os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")
Cluster = pytest.importorskip("ray.cluster_utils").Cluster

from edge_spec.config.settings import ClusterSettings, SamplingSettings, ServerSettings  # noqa: E402
from edge_spec.engine import Engine, EngineConfig  # noqa: E402
from edge_spec.server.cluster import (  # noqa: E402
    ENGINE_DEPLOYMENT,
    NODE_HEADER,
    REPLICA_HEADER,
    build_app,
)
from edge_spec.server.routing import AffinityRouter, affinity_key, rank_by_key  # noqa: E402
from edge_spec.server.wire import ApplyRequest, ChatRequest  # noqa: E402

pytestmark = [pytest.mark.real, pytest.mark.cluster]

KEY = "sk-test-cluster"
APP = "edge-spec-test"
PROMPTS = (
    "Write a Python function that adds two numbers.",
    "Write a Python function that returns the square of a number.",
    "Name three primary colors.",
)
MAX_TOKENS = 24


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _health(base: str) -> dict:
    return httpx.get(f"{base}/health", timeout=10).json()


def _wait_ok(base: str, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        body = _health(base)
        if body["status"] == "ok":
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.2)


def replica_actors() -> dict[str, str]:
    """unique replica id -> actor name, for the engine deployment's live replicas."""
    out = {}
    for a in ray.util.list_named_actors(all_namespaces=True):
        name = a["name"] if isinstance(a, dict) else a
        if f"#{ENGINE_DEPLOYMENT}#" in name and APP in name:
            out[name.rsplit("#", 1)[1]] = name
    return out


def test_two_nodes_one_replica_each(smollm2_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Head + one worker node, 2 logical CPUs and one `engine_slot` each: only the slot keeps
    the two replicas apart. Both must answer, each from its own node."""
    assert not ray.is_initialized(), "runs on its own Ray: keep it before the tests using `cl`"
    # ray.init resolves 127.0.0.1 to the machine's address, where a loopback-only GCS does not
    # listen ("Failed to connect to GCS at address 192.0.2.2:..."); this flag (meant for
    # macOS/Windows) makes it keep the loopback address.
    monkeypatch.setattr(ray._private.ray_constants, "ENABLE_RAY_CLUSTER", False)
    node = {
        "num_cpus": 2,
        "resources": {"engine_slot": 1},
        "node_ip_address": "127.0.0.1",
        "object_store_memory": 100 * 1024 * 1024,
    }
    nodes = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        nodes.add_node(**node)
        ray.init(address=nodes.address, log_to_driver=False)
        port = _free_port()
        # One proxy: a proxy per node would bind the same loopback port twice.
        serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": port})
        cluster = ClusterSettings(replicas=2, threads=1, num_cpus=1, app_name=APP)
        opts = {"model": str(smollm2_path), "draft": "reference", "n_ctx": 2048}
        serve.run(
            build_app(opts, cluster, ServerSettings(), resources={"engine_slot": 1}),
            name=APP,
            route_prefix="/",
        )
        base = f"http://127.0.0.1:{port}"
        assert _wait_ok(base)["replicas"]["running"] == 2
        answered = _concurrent_nodes(base, 4)
        assert set(answered.values()) == {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert len(answered) == 2, answered  # one replica per node
    finally:
        serve.shutdown()
        ray.shutdown()
        nodes.shutdown()


def _concurrent_nodes(base: str, n: int) -> dict[str, str]:
    """replica id -> node id, from `n` concurrent requests (the router spreads them by load)."""
    out: dict[str, str] = {}
    failed: list[str] = []

    def one(i: int) -> None:
        r = httpx.post(
            f"{base}/v1/completions",
            timeout=120,
            json={"prompt": f"Count to {i + 3}:", "max_tokens": MAX_TOKENS},
        )
        if r.status_code != 200:
            failed.append(r.text)
        out[r.headers[REPLICA_HEADER]] = r.headers[NODE_HEADER]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(150)
    assert not failed, failed
    return out


@pytest.fixture(scope="module")
def cl(smollm2_path: Path) -> Iterator[SimpleNamespace]:
    port = _free_port()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024 * 1024,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
    )
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        cluster = ClusterSettings(replicas=2, threads=1, num_cpus=1, app_name=APP)
        opts = {"model": str(smollm2_path), "draft": "reference", "n_ctx": 2048}
        serve.run(build_app(opts, cluster, ServerSettings(api_key=KEY)), name=APP, route_prefix="/")
        base = f"http://127.0.0.1:{port}"
        _wait_ok(base)
        client = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0, timeout=120)
        yield SimpleNamespace(base=base, client=client, headers={"Authorization": f"Bearer {KEY}"})
    finally:
        serve.shutdown()
        ray.shutdown()


@pytest.fixture(scope="module")
def expected(smollm2_path: Path) -> dict[str, str]:
    """The greedy output of each prompt from a local engine configured like a replica."""
    eng = Engine(
        str(smollm2_path), None, EngineConfig().override(n_ctx=2048, threads=1, kind="reference")
    )
    return {
        p: eng.generate(
            [{"role": "user", "content": p}], max_tokens=MAX_TOKENS, sampling=SamplingSettings()
        ).text
        for p in PROMPTS
    }


def _apply(cl: SimpleNamespace, original: str, update: str) -> httpx.Response:
    return httpx.post(
        f"{cl.base}/v1/apply",
        headers=cl.headers,
        timeout=120,
        json={"original": original, "update": update, "max_tokens": 32, "engine": "model"},
    )


def test_affinity_key() -> None:
    big = "x = 1\n" * 100
    a = ApplyRequest(original=big, update="x = 2\n")
    assert affinity_key(a) == affinity_key(ApplyRequest(original=big, update="y\n"))
    assert affinity_key(ApplyRequest(original="short", update="y")) is None
    chat = ChatRequest(messages=[{"role": "user", "content": f"Fix:\n```py\n{big}```"}])
    pred = ChatRequest(
        messages=[{"role": "user", "content": "hi"}], prediction={"type": "content", "content": big}
    )
    assert affinity_key(chat) == affinity_key(pred) == affinity_key(a)
    ids = [f"r{i}" for i in range(4)]
    homes = {rank_by_key(str(k), ids)[0] for k in range(64)}
    assert homes == set(ids)  # keys spread over the replicas
    first = rank_by_key("k", ids)[0]  # losing another replica does not move the key
    assert rank_by_key("k", [first, *[i for i in ids if i != first][1:]])[0] == first


def test_openai_chat_stream_and_prediction(cl: SimpleNamespace, expected: dict[str, str]) -> None:
    p = PROMPTS[2]
    resp = cl.client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": p}],
        temperature=0,
        max_tokens=MAX_TOKENS,
    )
    assert resp.choices[0].message.content == expected[p]
    assert resp.usage.completion_tokens <= MAX_TOKENS
    chunks = list(
        cl.client.chat.completions.create(
            model="smollm2",
            messages=[{"role": "user", "content": p}],
            temperature=0,
            max_tokens=MAX_TOKENS,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == expected[p]
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    # Predicted Outputs: the prediction drafts, the text stays the target's own.
    pred = cl.client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": p}],
        temperature=0,
        max_tokens=MAX_TOKENS,
        prediction={"type": "content", "content": expected[p]},
    )
    assert pred.choices[0].message.content == expected[p]
    assert pred.usage.completion_tokens_details.accepted_prediction_tokens > 0
    assert [m.id for m in cl.client.models.list().data] == ["smollm2-135m-instruct-q4_1"]
    bad = httpx.post(f"{cl.base}/v1/apply", json={"original": "x"}, timeout=10)
    assert bad.status_code == 401


def test_apply_affinity(cl: SimpleNamespace) -> None:
    ids = sorted(replica_actors())
    assert len(ids) == 2, ids
    tasks = load_tasks(n=12)
    home = {}
    # One file per replica, by the router's own ranking; the longest files first, since a
    # cached prefix is reused in whole n_batch chunks and a prompt just over one chunk may
    # share less than a chunk with its re-send (docs/server.md, "Same request, same answer").
    for t in sorted(tasks, key=lambda t: -len(t["original"])):
        key = affinity_key(ApplyRequest(original=t["original"], update=t["update"]))
        if key:
            home.setdefault(rank_by_key(key, ids)[0], t)
    assert len(home) == 2, "the first 12 tasks all hash to one replica"
    for rid, t in home.items():
        seen, cached = set(), []
        # The same file re-sent with other snippets (the `instruct` template puts an
        # instruction before the file, so a varied instruction would end the shared prefix).
        for tail in ("", "\n", "\n\n"):
            r = _apply(cl, t["original"], t["update"] + tail)
            assert r.status_code == 200, r.text
            seen.add(r.headers[REPLICA_HEADER])
            cached.append(r.json()["usage"]["prompt_tokens_details"]["cached_tokens"])
        assert seen == {rid}, (seen, rid)
        assert cached[1] > 50 and cached[2] > 50, cached  # the file's prefix was reused


class _ReplicaID(NamedTuple):
    unique_id: str


class _Loads(dict):
    """Stands in for Ray's replica queue-length cache: replica id -> requests on it."""


class _Router(AffinityRouter):
    replica_queue_len_cache = _Loads()  # the base class's property, without a Ray router

    def __init__(self) -> None:  # Ray's own __init__ needs a running Serve router
        self.initialize_state(mode="prefix")


def test_router_ranks_by_key_then_load() -> None:
    ids = [_ReplicaID(f"r{i}") for i in range(2)]
    reps = [SimpleNamespace(replica_id=i) for i in ids]
    key = "k" * 20
    home = next(r for r in reps if r.replica_id.unique_id == rank_by_key(key, ["r0", "r1"])[0])
    other = next(r for r in reps if r is not home)
    router, pending = (
        _Router(),
        SimpleNamespace(args=(key,), kwargs={}, routing_context=SimpleNamespace()),
    )

    def ranks(at_home: int, elsewhere: int) -> list:
        router.replica_queue_len_cache.update(
            {home.replica_id: at_home, other.replica_id: elsewhere}
        )
        return asyncio.run(router.choose_replicas(reps, pending))

    assert ranks(0, 0) == [[home], [other]]
    # Ray's base router retries a full replica set with no sleep unless this is set: the
    # queue-length probe storm that made one replica 1.8x slower than the single server.
    assert pending.routing_context.should_backoff is True
    assert ranks(1, 1) == [[home], [other]]  # both busy: wait where the KV is
    assert ranks(1, 0) == [[other], [home]]  # an idle replica beats a wait


def _chat_raw(cl: SimpleNamespace, prompt: str) -> tuple[int, dict]:
    r = httpx.post(
        f"{cl.base}/v1/chat/completions",
        headers=cl.headers,
        timeout=120,
        json={
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": MAX_TOKENS,
        },
    )
    return r.status_code, r.json()


def test_replica_killed_during_burst(cl: SimpleNamespace, expected: dict[str, str]) -> None:
    results: list[tuple[str, int, dict] | None] = [None] * 8

    def one(i: int) -> None:
        p = PROMPTS[i % len(PROMPTS)]
        status, body = _chat_raw(cl, p)
        results[i] = (p, status, body)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(8)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(1.0)
    victim = next(iter(replica_actors().values()))
    ray.kill(ray.get_actor(victim, namespace="serve"), no_restart=True)
    degraded = False
    # Past the burst too: with the engine busy end to end, the requests can all be answered
    # before the controller has noticed the loss.
    while (any(t.is_alive() for t in threads) or not degraded) and time.monotonic() - t0 < 150:
        degraded |= _health(cl.base)["status"] in ("degraded", "unavailable")
        time.sleep(0.2)
    assert not any(t.is_alive() for t in threads), "a request hung"
    # A request lost before any byte of its answer went out is retried on the other replica:
    # the burst loses none, and greedy answers are what the lost replica would have given.
    for p, status, body in results:  # type: ignore[misc]
        assert status == 200, body
        assert body["choices"][0]["message"]["content"] == expected[p]
    assert degraded, "/health never reported the lost replica"
    _wait_ok(cl.base, timeout=120)
    assert len(replica_actors()) == 2
    status, body = _chat_raw(cl, PROMPTS[0])
    assert status == 200 and body["choices"][0]["message"]["content"] == expected[PROMPTS[0]]


def test_operator_config_file_is_valid_settings() -> None:
    """The documented Serve config builds the settings the app builder will use (no Ray)."""
    yaml = pytest.importorskip("yaml")
    conf = yaml.safe_load(
        (Path(__file__).parents[2] / "examples" / "cluster" / "serve-config.yaml").read_text()
    )
    (app,) = conf["applications"]
    assert app["import_path"] == "edge_spec.server.cluster:app_builder"
    cluster = ClusterSettings(**app["args"]["cluster"])
    assert cluster.app_name == app["name"] and cluster.backlog == 1 and not cluster.resources
    ServerSettings(**app["args"]["server"])
    placed = ClusterSettings(resources={"engine_slot": 1}, max_replicas_per_node=1)
    assert dict(placed.resources) == {"engine_slot": 1}
