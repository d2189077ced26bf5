"""``shortlist bench --sections toolsearch load``: how fast the tool search is, and the servers under load.

**toolsearch** (one process, one request at a time, after a warm-up): per-request p50 / p99 of
``ToolSearch.search`` on three registries, BFCL's 370 functions (its 400 queries), ToolBench's full 3,406 tools
(its 474 G1 queries; each tool's text as the tool's description: :func:`experiments.toolsearch.registry_tools`)
and a 10,000-tool registry generated from ToolBench's tool texts (:func:`generated_registry`, seeded), with BM25
and MiniLM: the whole call, the scorer's part, and the policy alone (its ``depths`` on the request's ranked
list); the time to prepare each registry (BM25's index, MiniLM's embeddings: cached on disk after the first
run); BM25 at 10,000 tools by the package's index against rank-bm25's ``get_scores`` (the same scores);
start-up of a fresh process from a saved searcher (load and first search, best of the repeats) for each scorer.

**load** (separate processes on 127.0.0.1: the fake upstream, the server, this process as the clients):
``clients`` concurrent clients for ``duration`` seconds, each sending its next request when the last is answered.

- ``serve openai``: chat requests with BFCL's 370 tools and a BFCL query each, with a unique ``x-request-id``;
  the same load straight to the fake upstream first (it reads the body but does not parse it, so it costs the
  same either way) gives the baseline; the latency the proxy adds is the difference of the percentiles, reported
  beside the proxy's own time per request (p50 / p99 of its ``server-timing: shortlist;dur=<ms>`` header: the
  difference also holds the queueing of clients, upstream and proxy on shared cores). Every
  request must be answered once: each id answered 200 and received by the upstream exactly once, with
  ``x-shortlist-k``, or with ``x-shortlist-fallback: tied scores`` exactly when its query's text scores every tool
  alike (:func:`tied_bodies`; 5 of BFCL's 400 queries under BM25: the proxy sends those with every tool).
- ``serve mcp`` over streamable HTTP in front of a fake MCP upstream with the same 370 tools: each client (an SDK
  ``Client``) alternates ``search_tools`` (a BFCL query) and a forwarded call of an upstream tool whose echo must
  carry the call's own id.

Both report throughput, latency percentiles and the server's resident memory sampled once a second (first,
last, peak and the slope over the run: flat memory means a slope near 0; sampled more often in runs under 20 s).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from experiments.report.page import Paragraph, Section, Table
from servers import FALLBACK_TIED, RECORD_LOG, SERVER_TIMING

SCORERS = ("bm25", "minilm")
GENERATED_TOOLS = 10_000


# ----------------------------------------------------------------------------- registries


def generated_registry(texts: list[str], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` tools made from real tool texts, deterministically: tool ``i`` is named ``tool_<i>`` and described
    by the first half of the words of one text and the second half of another's (both drawn with ``seed``),
    so BM25 sees real vocabulary and real lengths."""
    rng = np.random.default_rng(seed)
    words = [t.split() for t in texts]
    out = []
    for i in range(n):
        a, b = words[int(rng.integers(len(words)))], words[int(rng.integers(len(words)))]
        text = " ".join(a[: len(a) // 2] + b[len(b) // 2 :]) or "tool"
        out.append({"name": f"tool_{i}", "description": text, "parameters": {}})
    return out


def policy_for(scorer: str, data_dir: str | None, cache_dir: str | None) -> Any:
    """The policy shipped for ``scorer``, else (none shipped yet) a posterior fitted on BFCL's whole-registry
    lists of that scorer; None means the shipped one."""
    from shortlist_depth.toolsearch import default_policy_path

    try:
        default_policy_path(scorer)
        return None
    except ValueError:
        from experiments.toolsearch import benchmark_queries
        from shortlist_depth.api import fit

        queries, _ = benchmark_queries("bfcl", scorer, data_dir, cache_dir)
        return fit("posterior", queries, seed=0)


# ----------------------------------------------------------------------------- per request


def time_requests(search: Any, texts: list[str], warmup: int) -> dict[str, float]:
    """p50 / p99 (ms) of the whole search, the scorer's part and the policy alone, one request at a time."""
    from benchmarks.tool_ranking import rank_candidates

    whole, scorer, policy = [], [], []
    everything = np.arange(len(search.tools), dtype=np.int64)
    episode = search.policy.episode  # as the searcher runs it (its own observation set)
    for i, text in enumerate(texts):
        t0 = time.perf_counter()
        search.search(text)
        t1 = time.perf_counter()
        primary, aux = search.ranker.scores([text])
        t2 = time.perf_counter()
        ranked, _ = rank_candidates(primary[0], None if aux is None else aux[0], everything, [], "q")
        t3 = time.perf_counter()
        search.policy.policy.depths([ranked], episode)
        t4 = time.perf_counter()
        if i >= warmup:
            whole.append(t1 - t0)
            scorer.append(t2 - t1)
            policy.append(t4 - t3)
    out: dict[str, float] = {}
    for name, xs in (("search", whole), ("scorer", scorer), ("policy", policy)):
        out[f"{name}_p50"], out[f"{name}_p99"] = percentiles(xs)
    return out


def bench_registries(ba: Any, registries: dict[str, tuple[list, list[str]]]) -> list[list[str]]:
    """Rows of the per-request table: every registry x scorer."""
    from shortlist_depth.toolsearch import ToolSearch

    rows = []
    for scorer in SCORERS:
        policy = policy_for(scorer, ba.data_dir, ba.cache_dir)
        for name, (tools, texts) in registries.items():
            t0 = time.perf_counter()
            search = ToolSearch.from_tools(tools, scorer, policy, cache_dir=ba.cache_dir)
            build = time.perf_counter() - t0
            n = ba.toolsearch_requests
            stats = time_requests(search, (texts * (1 + (n + 20) // len(texts)))[: n + 20], 20)
            rows.append([name, str(len(tools)), scorer, search.policy.method, f"{build:.1f}",
                         *(f"{stats[k]:.2f}" for k in ("search_p50", "search_p99", "scorer_p50", "policy_p50",
                                                         "policy_p99"))])  # fmt: skip
            print(f"toolsearch {name} {scorer}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in stats.items()), flush=True)
    return rows


def bm25_libraries(tools: list[dict[str, Any]], texts: list[str], requests: int) -> list[list[str]]:
    """BM25 at the size of ``tools``: the package's index against rank-bm25's ``get_scores`` (equal scores)."""
    from benchmarks.scorers import BM25Index, tokenise

    index = BM25Index([f"{t['description']} Parameters:" for t in tools])  # the tool text of a parameterless tool
    rows = []
    ways = {"rank_bm25.BM25Okapi.get_scores": lambda q: index.bm25.get_scores(tokenise(q)),
            "BM25Index.scores (the package's, what serves)": index.scores}  # fmt: skip
    for label, fn in ways.items():
        xs = []
        for text in texts[:requests]:
            t0 = time.perf_counter()
            fn(text)
            xs.append(time.perf_counter() - t0)
        p50, p99 = percentiles(xs)
        rows.append([label, str(len(tools)), str(len(xs)), f"{p50:.2f}", f"{p99:.2f}"])
    assert np.array_equal(index.scores(texts[0]), index.bm25.get_scores(tokenise(texts[0])))
    return rows


def mcp_of(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An OpenAI ``tools`` list as MCP tools (name, description, inputSchema) for the MCP servers measured: BFCL writes
    ``"type": "dict"``; an MCP tool's inputSchema is a JSON schema of ``"type": "object"``."""
    return [{"name": f["name"], "description": f["description"], "inputSchema": {**f["parameters"], "type": "object"}}
            for f in (t["function"] for t in tools)]  # fmt: skip


def fastmcp_rows(tools: list[dict[str, Any]], texts: list[str], requests: int) -> list[list[str]] | None:
    """``search_tools`` inside a FastMCP server of ``tools`` (OpenAI-shaped), through FastMCP's in-memory client, one
    request at a time after 20 warm-up ones: FastMCP's own ``BM25SearchTransform(max_results=5)`` against
    :class:`servers.fastmcp_search.ShortlistSearchTransform` (the library's defaults); None, said, without the
    ``fastmcp`` extra."""
    try:
        import anyio
        from fastmcp import Client
        from fastmcp.server.transforms.search import BM25SearchTransform

        from servers.fakes import fake_fastmcp_server
        from servers.fastmcp_search import ShortlistSearchTransform
    except ImportError as e:
        print(f"toolsearch: FastMCP rows skipped: {e} (the fastmcp extra)", flush=True)
        return None
    catalog = mcp_of(tools)
    asked = (texts * (1 + (requests + 20) // len(texts)))[: requests + 20]

    async def measure(transform: Any) -> tuple[list[float], list[int]]:
        times, shown = [], []
        async with Client(fake_fastmcp_server(catalog, transform)) as client:
            for i, text in enumerate(asked):
                t0 = time.perf_counter()
                result = await client.call_tool("search_tools", {"query": text})
                if i >= 20:
                    times.append(time.perf_counter() - t0)
                    shown.append(len((result.structured_content or {}).get("result") or []))
        return times, shown

    rows = []
    transforms = {"BM25SearchTransform(max_results=5) (FastMCP's)": BM25SearchTransform(max_results=5),
                  "ShortlistSearchTransform() (bm25, the shipped policy)": ShortlistSearchTransform()}  # fmt: skip
    for label, transform in transforms.items():
        times, shown = anyio.run(measure, transform)
        p50, p99 = percentiles(times)
        k = np.array(shown)
        rows.append([label, str(len(catalog)), str(len(times)), f"{p50:.2f}", f"{p99:.2f}", f"{k.mean():.2f}",
                     f"{np.median(k):.0f} / {np.percentile(k, 90):.0f}"])  # fmt: skip
        print(f"toolsearch FastMCP {label}: p50 {p50:.2f} ms, p99 {p99:.2f} ms, mean tools {k.mean():.2f}", flush=True)
    return rows


def fastmcp_section(rows: list[list[str]] | None) -> list[Paragraph | Table]:
    """The FastMCP table of the toolsearch section (:func:`fastmcp_rows`), none without the extra."""
    if rows is None:
        return []
    head = ["search transform", "tools", "requests", "p50 ms", "p99 ms", "mean tools", "median / p90 tools"]
    return [Paragraph("Inside a FastMCP server of BFCL's tools (`servers.fastmcp_search`): a `search_tools` call "
                      "through FastMCP's in-memory client, end to end, after 20 warm-up calls, and the tools it "
                      "returns (speed and depth only: no quality is judged here):"), Table(head, rows)]  # fmt: skip


def startup(searcher_dir: Path, query: str, repeats: int) -> float:
    """Wall seconds of a fresh process that loads a saved searcher and answers one request (best of repeats)."""
    code = f"from shortlist_depth import ToolSearch\nToolSearch.load({str(searcher_dir)!r}).search({query!r})"
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        best = min(best, time.perf_counter() - t0)
    return best


def bench_toolsearch(ba: Any) -> tuple[list[list[str]], Section]:
    """The toolsearch section (module docstring): its target rows and its section."""
    from experiments.report.markdown import judged
    from experiments.toolsearch import registry_tools
    from shortlist_depth.toolsearch import ToolSearch

    bfcl, bfcl_q = registry_tools("bfcl", ba.data_dir, ba.cache_dir)
    tb, tb_q = registry_tools("toolbench", ba.data_dir, ba.cache_dir)
    gen = generated_registry([t["description"] for t in tb], GENERATED_TOOLS, ba.seed)
    registries = {"BFCL": (bfcl, bfcl_q), "ToolBench (full)": (tb, tb_q), "generated": (gen, tb_q)}
    rows = bench_registries(ba, registries)
    libs = bm25_libraries(gen, tb_q, min(ba.toolsearch_requests, 100))
    inside = fastmcp_rows(bfcl, bfcl_q, ba.toolsearch_requests)
    starts = []
    with tempfile.TemporaryDirectory() as tmp:
        for scorer in SCORERS:
            policy = policy_for(scorer, ba.data_dir, ba.cache_dir)
            saved = ToolSearch.from_tools(bfcl, scorer, policy, cache_dir=ba.cache_dir).save(Path(tmp) / scorer)
            starts.append([scorer, f"{startup(saved, bfcl_q[0], ba.repeats):.2f}"])
    head = ["registry", "tools", "scorer", "policy", "prepare s", "p50 ms", "p99 ms", "scorer p50 ms",
            "policy p50 ms", "policy p99 ms"]  # fmt: skip
    section = Section("Tool search: per request (one at a time, after 20 warm-up requests)", [
        Paragraph(f"{ba.toolsearch_requests} requests per row (the registry's queries, cycled; the generated registry "
                  "gets ToolBench's). `prepare`: building the searcher (BM25's index; MiniLM's tool embeddings, read "
                  "from the disk cache when they were computed before). Targets: BM25 p50 <= 5 ms at 3,406 tools, "
                  "MiniLM p50 <= 15 ms, the policy <= 1 ms."),
        Table(head, rows),
        Paragraph("BM25 on the generated registry: the package's inverted index against rank-bm25 (bit-identical "
                  "scores):"),
        Table(["implementation", "tools", "requests", "p50 ms", "p99 ms"], libs),
        *fastmcp_section(inside),
        Paragraph(f"Start-up from a saved searcher (BFCL's 370 tools): a fresh `python -c` that loads it and answers "
                  f"one request, best of {ba.repeats}; target <= 3 s:"),
        Table(["scorer", "seconds"], starts),
    ])  # fmt: skip
    return judged(toolsearch_checks(rows, starts)), section


def toolsearch_checks(rows: list[list[str]], starts: list[list[str]]) -> list[tuple[str, str, bool | None]]:
    """The tool search's targets against the rows of :func:`bench_registries` and the start-up times."""
    by = {(r[0], r[2]): r for r in rows}
    checks: list[tuple[str, str, bool | None]] = []
    bm25 = by.get(("ToolBench (full)", "bm25"))
    if bm25 is not None:
        checks.append(("tool search, BM25 p50 <= 5 ms at 3,406 tools", f"{bm25[5]} ms", float(bm25[5]) <= 5.0))
    for r in rows:
        if r[2] == "minilm" and r[0] == "BFCL":
            checks.append(("tool search, MiniLM p50 <= 15 ms (BFCL, 370 tools)", f"{r[5]} ms", float(r[5]) <= 15.0))
    worst = max(rows, key=lambda r: float(r[8]))
    checks.append(("policy overhead p50 <= 1 ms (every registry and scorer)", f"max {worst[8]} ms ({worst[0]}, "
                   f"{worst[2]})", float(worst[8]) <= 1.0))  # fmt: skip
    for scorer, secs in starts:
        checks.append((f"start-up from a saved searcher <= 3 s ({scorer})", f"{secs} s", float(secs) <= 3.0))
    return checks


# ----------------------------------------------------------------------------- load


@contextmanager
def running(cmd: list[str], log: Path) -> Iterator[subprocess.Popen]:
    """A background process (output to ``log``), ended when the block ends."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Memory:
    """The resident memory (MiB) of a process, sampled every ``every`` seconds in a thread, and the CPU seconds
    it used in the block."""

    def __init__(self, pid: int, every: float = 1.0) -> None:
        self.pid = pid
        self.every = every
        self.cpu = 0.0
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        t0 = time.monotonic()
        while not self._stop.wait(self.every):
            try:
                status = Path(f"/proc/{self.pid}/status").read_text()
            except OSError:
                return
            kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
            self.samples.append((time.monotonic() - t0, kb / 1024))

    def __enter__(self) -> Memory:
        self.cpu = -cpu_seconds(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu += cpu_seconds(self.pid)
        self._stop.set()
        self._thread.join()

    def summary(self) -> str:
        """first / last / peak MiB and the slope (MiB per minute) of a least-squares line."""
        if len(self.samples) < 3:
            return "too few samples"
        t, m = np.array(self.samples).T
        slope = float(np.polyfit(t, m, 1)[0]) * 60
        return f"{m[0]:.0f} -> {m[-1]:.0f} MiB (peak {m.max():.0f}; slope {slope:+.1f} MiB/min)"


def percentiles(xs: list[float]) -> tuple[float, float]:
    """p50 and p99 in ms of latencies in seconds."""
    return float(1e3 * np.percentile(xs, 50)), float(1e3 * np.percentile(xs, 99))


class Sent(NamedTuple):
    """One request of a load run: its id, the status (0: a transport error), the latency in seconds, the proxy's
    ``x-shortlist-k`` (or the transport error's name), the proxy's own ms (its ``server-timing``; None when absent),
    its ``x-shortlist-fallback`` and the index of the body sent (None when not known)."""

    rid: str
    status: int
    seconds: float
    k: str | None
    own: float | None = None
    fallback: str | None = None
    body: int | None = None


def tied_bodies(searcher: Path, queries: list[str]) -> frozenset[int]:
    """The indices of ``queries`` whose text scores every tool of the saved ``searcher`` alike: the proxy sends them
    with every tool (``x-shortlist-fallback``: :data:`servers.FALLBACK_TIED`), with no ``x-shortlist-k``."""
    from shortlist_depth.toolsearch import ToolSearch

    found = ToolSearch.load(searcher).search_many(queries)
    return frozenset(i for i, s in enumerate(found) if s.why["tied"])


def openai_bodies(tools: list[dict[str, Any]], queries: list[str]) -> list[bytes]:
    """One chat body per query, the tools list serialised once and spliced in."""
    tools_json = json.dumps(tools).encode()
    return [b'{"model":"m","messages":' + json.dumps([{"role": "user", "content": q}]).encode() + b',"tools":'
            + tools_json + b"}" for q in queries]  # fmt: skip


async def openai_load(
    url: str, bodies: list[bytes], clients: int, seconds: float, tag: str, call: str | None = None
) -> list[Sent]:
    """``clients`` concurrent senders for ``seconds``: one :class:`Sent` row per request. With ``call``, the fake
    upstream answers each with a call of that tool (``x-fake-call``)."""
    import anyio
    import httpx

    rows: list[Sent] = []
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def sender(client: httpx.AsyncClient, w: int) -> None:
        i = 0
        while time.monotonic() < deadline:
            rid = f"{tag}-{w}-{i}"
            j = (w * 7919 + i) % len(bodies)
            body = bodies[j]
            headers = {"content-type": "application/json", "x-request-id": rid, "authorization": "Bearer sk-bench",
                       **({"x-fake-call": call} if call else {})}  # fmt: skip
            t0 = time.perf_counter()
            try:
                r = await client.post(url, content=body, headers=headers)
                own = proxy_ms(r.headers.get("server-timing"))
                rows.append(Sent(rid, r.status_code, time.perf_counter() - t0, r.headers.get("x-shortlist-k"), own,
                                 r.headers.get("x-shortlist-fallback"), j))  # fmt: skip
            except httpx.TransportError as e:  # counted as a failed request (status 0), the run goes on
                rows.append(Sent(rid, 0, time.perf_counter() - t0, type(e).__name__, None, None, j))
            i += 1

    async with httpx.AsyncClient(timeout=120, limits=limits) as client, anyio.create_task_group() as tg:
        for w in range(clients):
            tg.start_soon(sender, client, w)
    return rows


def proxy_ms(header: str | None) -> float | None:
    """The proxy's own time in ms from a ``server-timing`` header (its ``shortlist;dur=<ms>`` entry), else None."""
    for entry in (header or "").split(","):
        name, _, params = entry.strip().partition(";")
        if name == SERVER_TIMING and params.startswith("dur="):
            return float(params[4:])
    return None


def own_times(rows: list[tuple]) -> tuple[float, float] | None:
    """p50 and p99 in ms of the proxy's own time over the rows that carry it (None when none does)."""
    own = [r[4] for r in rows if len(r) > 4 and r[4] is not None]
    return (float(np.percentile(own, 50)), float(np.percentile(own, 99))) if own else None


def received_ids(upstream: str) -> dict[str, int]:
    """The fake upstream's count of each ``x-request-id``."""
    import httpx

    return dict(httpx.get(f"{upstream}/fake/received", timeout=60).json()["ids"])


def check_once(rows: Sequence[Sent], ids: dict[str, int], proxied: bool, tied: frozenset[int] = frozenset()) -> str:
    """'every request answered once' or what went wrong (lost, duplicated, not 200, no K). Through the proxy
    (``proxied``) a request is answered with ``x-shortlist-k``, or, exactly when its body is one of ``tied``
    (:func:`tied_bodies`), with every tool and ``x-shortlist-fallback: tied scores``; a fallback of any other kind, or
    for another body, is a failure named by its reason."""
    sent = [r.rid for r in rows]

    def fault(r: Sent) -> str | None:  # what is wrong with one answer, None when nothing is
        if r.status != 200:
            return str(r.status or r.k)  # the status, or the transport error's name
        if not proxied:
            return None
        if r.body in tied:
            return (
                None
                if r.fallback == FALLBACK_TIED and r.k is None
                else f"{r.fallback or 'shortlisted'} for a tied text"
            )
        return None if r.fallback is None and str(r.k).isdigit() else (r.fallback or "200 without x-shortlist-k")

    faults = [f for f in map(fault, rows) if f is not None]
    lost = [i for i in sent if ids.get(i, 0) == 0]
    dup = [i for i, n in ids.items() if n > 1]
    extra = set(ids) - set(sent)
    if faults or lost or dup or extra or len(set(sent)) != len(sent):
        how = f" ({', '.join(f'{k} x{n}' for k, n in Counter(faults).items())})" if faults else ""
        return f"NOT: {len(faults)} failed{how}, {len(lost)} lost, {len(dup)} duplicated, {len(extra)} unknown"
    whole = sum(r.fallback == FALLBACK_TIED for r in rows)
    meant = (
        f"; {whole:,} of them, the texts that score every tool alike, sent with every tool ({FALLBACK_TIED})"
        if whole
        else ""
    )
    return f"all {len(sent):,} answered 200 and received upstream exactly once{meant}"


def bench_load_openai(ba: Any, tools: list[dict[str, Any]], queries: list[str], searcher: Path, tmp: Path) -> list:
    """The openai rows of the load table, at ``ba.clients`` clients and at 1: straight to the fake upstream, then
    through the proxy (its memory and CPU seconds per request measured). Each server takes a free port (``--port
    0``) and is reached at the URL it announces."""
    import anyio

    from servers.listen import wait_announced

    bodies = openai_bodies(tools, queries)
    tied = tied_bodies(searcher, queries)
    fake = [sys.executable, "-m", "servers.fakes", "openai", "--port", "0", "--no-parse"]
    out = []
    with running(fake, tmp / "fake.log") as up:
        upstream = wait_announced(tmp / "fake.log", up).removesuffix("/v1")
        proxy = [sys.executable, "-m", "experiments.cli", "serve", "openai", "--searcher", str(searcher),
                 "--upstream", f"{upstream}/v1", "--port", "0"]  # fmt: skip
        with running(proxy, tmp / "proxy.log") as px:
            chat = f"{wait_announced(tmp / 'proxy.log', px)}/chat/completions"
            anyio.run(openai_load, chat, bodies, 1, 1.0, "warm")  # the request's tools prepared once
            for clients, seconds in ((ba.clients, ba.duration), (1, ba.duration / 3)):
                tag = f"d{clients}"
                direct = anyio.run(openai_load, f"{upstream}/v1/chat/completions", bodies, clients, seconds, tag)
                ids = {k: v for k, v in received_ids(upstream).items() if k.startswith(f"{tag}-")}
                out.append((f"{clients} client(s): straight to the fake upstream", direct, seconds,
                            check_once(direct, ids, False), "-", "-"))  # fmt: skip
                out.append(proxied(px, chat, bodies, clients, seconds, upstream, "`serve openai`", tied))
        out.append(bench_recording(ba, bodies, proxy, upstream, tools[0]["function"]["name"], tmp, tied))
    return out


def proxied(
    px: subprocess.Popen, chat: str, bodies: list[bytes], clients: int, seconds: float, upstream: str, what: str,
    tied: frozenset[int], call: str | None = None,
) -> tuple:  # fmt: skip
    """A row through the proxy process ``px`` (``what``, the proxy as the row names it): ``clients`` clients for
    ``seconds`` (the fake answering each with a call of ``call``, if given), every request checked answered once
    (``tied``: the bodies sent with every tool, :func:`check_once`), the proxy's memory and CPU seconds per request
    measured."""
    import anyio

    tag = f"{'r' if call else 'p'}{clients}"
    with Memory(px.pid, min(1.0, seconds / 20)) as mem:
        rows = anyio.run(openai_load, chat, bodies, clients, seconds, tag, call)
    ids = {k: v for k, v in received_ids(upstream).items() if k.startswith(f"{tag}-")}
    cpu = f"{1e3 * mem.cpu / max(len(rows), 1):.1f}"
    check = check_once(rows, ids, True, tied)
    return f"{clients} client(s): through {what} (bm25)", rows, seconds, check, mem.summary(), cpu


def bench_recording(
    ba: Any, bodies: list[bytes], proxy: list[str], upstream: str, tool: str, tmp: Path, tied: frozenset[int]
) -> tuple:
    """The row of ``serve openai --record`` at ``ba.clients`` clients, each answer calling ``tool``: every shortlisted
    answer's call read and written, one line each, checked against the log once the proxy has stopped (an answer
    sent with every tool, ``tied``, is not recorded: the policy did not choose its list)."""
    import anyio

    from servers.listen import wait_announced

    folder = tmp / "recorded"
    with running([*proxy, "--record", str(folder)], tmp / "proxy-rec.log") as px:
        chat = f"{wait_announced(tmp / 'proxy-rec.log', px)}/chat/completions"
        anyio.run(openai_load, chat, bodies, 1, 1.0, "warm-rec")  # (no call: nothing written)
        what, rows, seconds, check, memory, cpu = proxied(px, chat, bodies, ba.clients, ba.duration, upstream,
                                                          "`serve openai --record`", tied, tool)  # fmt: skip
    written = len((folder / RECORD_LOG).read_text(encoding="utf-8").splitlines())
    answered = sum(1 for r in rows if r.status == 200 and r.fallback is None)
    if written != answered:
        check = f"NOT: {written:,} lines recorded for {answered:,} shortlisted answers, each calling a tool ({check})"
    else:
        n_whole = sum(r.fallback == FALLBACK_TIED for r in rows)
        whole = f", none for the {n_whole:,} sent with every tool" if n_whole else ""
        check += f"; each shortlisted answer's call recorded once ({written:,} lines{whole})"
    return what, rows, seconds, check, memory, cpu


async def mcp_load(url: str, queries: list[str], tool: str, clients: int, seconds: float) -> dict[str, list]:
    """``clients`` SDK clients for ``seconds``, each alternating ``search_tools`` and a forwarded call of ``tool``
    carrying its own id: latencies of each kind and the failures (an error, an empty answer, a wrong echo)."""
    import anyio
    from mcp import Client

    out: dict[str, list] = {"search": [], "call": [], "failed": []}
    deadline = time.monotonic() + seconds

    async def client_loop(w: int) -> None:
        async with Client(url) as c:
            i = 0
            while time.monotonic() < deadline:
                rid = f"{w}-{i}"
                t0 = time.perf_counter()
                if i % 2 == 0:
                    r = await c.call_tool("search_tools", {"query": queries[(w * 7919 + i) % len(queries)]})
                    ok = not r.is_error and bool(r.structured_content and r.structured_content["tools"])
                    kind = "search"
                else:
                    r = await c.call_tool(tool, {"id": rid})
                    text = getattr(r.content[0], "text", "{}") if r.content else "{}"
                    ok = not r.is_error and json.loads(text).get("arguments") == {"id": rid}
                    kind = "call"
                out[kind if ok else "failed"].append(time.perf_counter() - t0)
                i += 1

    sdk = logging.getLogger("client")  # the SDK client warns on each call of a tool tools/list did not show
    level = sdk.level
    sdk.setLevel(logging.ERROR)
    try:
        async with anyio.create_task_group() as tg:
            for w in range(clients):
                tg.start_soon(client_loop, w)
    finally:
        sdk.setLevel(level)
    return out


def bench_load_mcp(ba: Any, tools: list[dict[str, Any]], queries: list[str], searcher: Path, tmp: Path) -> list:
    """The mcp rows of the load table: ``serve mcp`` over streamable HTTP in front of the fake MCP upstream."""
    import anyio

    from servers.listen import wait_announced

    mcp_tools = mcp_of(tools)
    (tmp / "tools.json").write_text(json.dumps(mcp_tools), encoding="utf-8")
    upstream = f"{sys.executable} -m servers.fakes mcp --tools {tmp / 'tools.json'}"
    cmd = [sys.executable, "-m", "experiments.cli", "serve", "mcp", "--searcher", str(searcher), "--transport", "http",
           "--port", "0", "--upstream-command", upstream]  # fmt: skip
    with running(cmd, tmp / "mcp.log") as server:
        url = wait_announced(tmp / "mcp.log", server)
        anyio.run(mcp_load, url, queries, mcp_tools[0]["name"], 1, 1.0)
        with Memory(server.pid, min(1.0, ba.duration / 20)) as mem:
            got = anyio.run(mcp_load, url, queries, mcp_tools[0]["name"], ba.clients, ba.duration)
    n = len(got["search"]) + len(got["call"]) + len(got["failed"])
    failed = len(got["failed"])
    check = f"all {n:,} answered, each echo its own call's" if not failed else f"NOT: {failed} failed"
    cpu = f"{1e3 * mem.cpu / max(n, 1):.1f}"
    what = f"{ba.clients} clients: `serve mcp` (http)"
    return [(f"{what}, search_tools", got["search"], ba.duration, check, mem.summary(), cpu),
            (f"{what}, forwarded tools/call", got["call"], ba.duration, check, "", "")]  # fmt: skip


def bench_load(ba: Any) -> tuple[list[list[str]], Section]:
    """The load section (module docstring): its target rows and its section."""
    from experiments.report.markdown import judged
    from experiments.toolsearch import registry_tools
    from shortlist_depth.toolsearch import ToolSearch

    tools, queries = registry_tools("bfcl", ba.data_dir, ba.cache_dir)
    with tempfile.TemporaryDirectory() as tmp:
        policy = policy_for("bm25", ba.data_dir, ba.cache_dir)
        searcher = ToolSearch.from_tools(tools, "bm25", policy, cache_dir=ba.cache_dir).save(Path(tmp) / "searcher")
        runs = bench_load_openai(ba, tools, queries, searcher, Path(tmp))
        runs += bench_load_mcp(ba, tools, queries, searcher, Path(tmp))
    rows, own = [], []
    for what, got, seconds, check, memory, cpu in runs:
        timed = bool(got) and isinstance(got[0], tuple)
        lat = [r[2] for r in got] if timed else list(got)
        p50, p99 = percentiles(lat) if lat else (float("nan"), float("nan"))
        own.append(own_times(got) if timed else None)
        own_cell = "-" if own[-1] is None else f"{own[-1][0]:.2f} / {own[-1][1]:.2f}"
        rows.append([what, f"{len(lat):,}", f"{len(lat) / seconds:,.0f}", f"{p50:.1f}", f"{p99:.1f}", own_cell, check,
                     memory, cpu])  # fmt: skip
        print(f"load {what}: {len(lat)} requests, p50 {p50:.1f} ms, p99 {p99:.1f} ms, proxy's own {own_cell} ms; "
              f"{check}; {memory}", flush=True)  # fmt: skip
    added = [[f"{float(rows[i + 1][j]) - float(rows[i][j]):+.1f}" for j in (3, 4)] for i in (0, 2)]
    mine = [own[i] or (float("nan"), float("nan")) for i in (1, 3)]  # the proxy's own time, by its header
    head = ["what", "requests", "per second", "p50 ms", "p99 ms", "proxy's own p50 / p99 ms (server-timing)",
            "answered", "server memory", "server CPU ms/request"]  # fmt: skip
    section = Section(
        f"Servers under load: {ba.clients} concurrent clients for {ba.duration:g} s, BFCL's 370 tools per request", [
            Paragraph("Separate processes on 127.0.0.1 (fake upstream, server, clients) sharing this machine's cores; "
                      "each client sends its next request when the last is answered (one client: no queueing, the "
                      "latency of one request). Memory: the server's resident set over the run. CPU: the server "
                      "process's user + system seconds over the run, per request."),
            Table(head, rows),
            Paragraph(f"Latency `serve openai` adds (through the proxy minus straight to the upstream, at the same "
                      f"load; goal: p99 <= 20 ms with BM25): {ba.clients} clients p50 **{added[0][0]} ms**, p99 "
                      f"**{added[0][1]} ms**; one client p50 **{added[1][0]} ms**, p99 **{added[1][1]} ms**. The "
                      f"difference holds the queueing of clients, upstream and proxy on shared cores; the proxy's "
                      f"own time per request (its `server-timing` header: from the whole body in hand to the "
                      f"upstream call, plus its work on the answer): {ba.clients} clients p50 **{mine[0][0]:.2f} "
                      f"ms**, p99 **{mine[0][1]:.2f} ms**; one client p50 **{mine[1][0]:.2f} ms**, p99 "
                      f"**{mine[1][1]:.2f} ms**. The `--record` row is the proxy recording each answer's tool call "
                      f"(every answer calls one), at {ba.clients} clients: its cost is the difference with the "
                      f"`serve openai` row at {ba.clients} clients, without `--record`."),
        ])  # fmt: skip
    answered = bool(rows) and not any(r[6].startswith("NOT") for r in rows)
    checks: list[tuple[str, str, bool | None]] = [
        (f"serve openai, p99 added <= 20 ms with BM25 ({ba.clients} clients)", f"{added[0][1]} ms",
         float(added[0][1]) <= 20.0),
        ("serve openai, p99 added <= 20 ms with BM25 (one client)", f"{added[1][1]} ms", float(added[1][1]) <= 20.0),
        (f"serve openai, the proxy's own p99 (server-timing) <= 20 ms with BM25 ({ba.clients} clients)",
         f"{mine[0][1]:.2f} ms", mine[0][1] <= 20.0),
        ("every request answered once (serve openai and serve mcp)", "; ".join(r[6] for r in rows), answered),
    ]  # fmt: skip
    return judged(checks), section
