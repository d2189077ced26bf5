"""``shortlist search`` (a tool search from the command line), ``shortlist toolsearch default`` (the default
policy shipped inside the package, chosen by leave-one-benchmark-out) and ``shortlist toolsearch latency`` (the
per-request time of a tool search).

``shortlist search --searcher DIR "request"`` (or ``--tools FILE``) prints the shortlist as JSON; with no
request it reads requests from stdin, one a line, and streams one JSON line per request. Both go through
:class:`shortlist_depth.ToolSearch`, the library's one path.

``shortlist toolsearch default``: for each scorer, each benchmark's queries rank its WHOLE registry the way a
tool search does (:func:`benchmarks.tool_ranking.rank_records`: BFCL's 370 functions, all 400 queries;
MetaTool's 199 tools, the 2,000 queries its main condition samples; ToolBench's 3,406 tools, its 474 G1
queries). Leave one benchmark out: every candidate kind is fitted on the other benchmarks' queries (all of
them) and judged on the held-out one's by the net reward (found x -log2 P_rand(K) - c (K - 1), c = 0.01),
with paired 95% bootstrap intervals over its queries against fixed K = 3, 5, 8 and the largest-gap rule.
The default kind is the candidate with the best mean held-out net reward over the benchmarks (each
benchmark weighs the same) among those that decide without torch (:attr:`agents.registry.PolicyKind.
torch_at_inference`: a tool search must start in a few seconds, and importing torch alone takes about two; the
cut-off and Choppy-style models are judged and shown, not eligible); it is refitted on every query of every
benchmark and written, with its provenance (command, commit, data sha256) and the scorer it serves, as a run
directory per scorer.

``shortlist toolsearch pays``: does the tool search pay? On the downstream study's BFCL test queries (split 0
of ``bfcl-bm25`` and ``bfcl-minilm``: 120 queries, 370 functions), each request ranks the registry with a
:class:`shortlist_depth.ToolSearch` built from BFCL's schemas with the condition's scorer, checked against the
condition's ranking of every test query (:func:`check_ranking`: the top 20 tool for tool, every score within
:data:`SCORE_TOL`). K comes from ``default``, the policy shipped
for the scorer; when its provenance says it was trained on BFCL (it is refitted on every query of every
benchmark, so it saw these test queries), the policy the leave-one-benchmark-out table judged on BFCL instead:
the same kind, settings and seed fitted on the other benchmarks' queries (:func:`leave_bfcl_out`, checked to give
the table's BFCL net reward); from ``recommended``, the searcher ``shortlist recommend --tools <BFCL schemas>
--log <the BFCL training queries: request and gold tool>`` saves (the command itself, in a child process,
into ``RUNS/recommend-<scorer>/``); and from the fixed limits 3, 5 and 8. End to end (the committed answers of
the local chooser, and of the simulated one as a sensitivity) and tool-definition tokens (the local chooser's own
tokenizer), K capped at the chooser's 20 prefixes, paired intervals: :mod:`experiments.report.pays_tables`; the
page: :mod:`experiments.report.pays_page`.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from itertools import zip_longest
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.options import (
    SearchArgs,
    SearcherArgs,
    ToolsearchDefaultArgs,
    ToolsearchEmbeddingsArgs,
    ToolsearchLatencyArgs,
    ToolsearchPaysArgs,
)
from experiments.pays_log import files_sha256, run_recommend

if TYPE_CHECKING:  # pandas is read by the default command only: `shortlist search` starts without it
    import numpy as np
    import pandas as pd

    from experiments.report.page import Page, Table
    from experiments.report.pays_tables import TokenCount

#: The benchmarks of the leave-one-benchmark-out choice, and how many queries each gives.
MAX_QUERIES = {"bfcl": None, "metatool": 2000, "toolbench": None}
#: The comparators every candidate is paired with (method names of ``sd.fit``).
COMPARATORS = ("fixed-3", "fixed-5", "fixed-8", "gap")
#: The title of the leave-one-benchmark-out page (results/toolsearch/default-policy/README.md).
DEFAULT_TITLE = "Default tool-search policy"


# ----------------------------------------------------------------------------------------------- search


def resolve_search(a: SearcherArgs, tools: str | None = None) -> Any:
    """The tool search of a command line, the same for ``shortlist search`` and every server: the saved searcher
    (``--searcher``), else the library's :class:`~shortlist_depth.SearchSpec` of ``--scorer`` and ``--policy`` (the
    shipped default when unset) over the tools file ``tools``, or, with no tools file, the spec itself (a server
    that gets its tools per request)."""
    from shortlist_depth.toolsearch import SearchSpec, ToolSearch

    if a.searcher:
        return ToolSearch.load(a.searcher, cache_dir=a.cache_dir)
    if tools:
        return ToolSearch.from_file(tools, a.scorer, a.policy, cache_dir=a.cache_dir)
    return SearchSpec.create(a.scorer, a.policy, cache_dir=a.cache_dir, where="--scorer/--policy")


def cmd_search(sa: SearchArgs) -> int:
    """``shortlist search``: one shortlist as JSON, or JSON lines for the requests of stdin."""
    search = resolve_search(sa, sa.tools)
    kw = {"min_k": sa.min_k, "max_k": sa.bound(), "pinned": sa.pin, "exclude": sa.exclude}
    if sa.request is not None:  # (given, even empty: an empty one is an error, not the standard input)
        print(json.dumps(search.search(sa.request, **kw).to_json(), ensure_ascii=False))
        return 0
    for lineno, line in enumerate(sys.stdin, start=1):
        text = line.rstrip("\r\n")  # (a CRLF line's \r too)
        if not text.strip():
            raise ValueError(f"stdin:{lineno}: a request with no text (one request a line)")
        print(json.dumps(search.search(text, **kw).to_json(), ensure_ascii=False), flush=True)
    return 0


# ----------------------------------------------------------------------------------------------- default


def benchmark_queries(name: str, scorer: str, data_dir: str | None, cache_dir: str | None) -> tuple[list, dict]:
    """One benchmark's queries, each its whole registry ranked by ``scorer`` (query ids ``<benchmark>:<qid>``),
    and the sha256 of the data files read."""
    from benchmarks.conditions import sample_queries
    from benchmarks.tool_ranking import RegistryRanker, rank_records

    folder, cache = (Path(data_dir) if data_dir else None), (Path(cache_dir) if cache_dir else None)
    if name == "bfcl":
        from benchmarks.bfcl import load_bfcl

        corpus = load_bfcl(data_dir=folder, cache_dir=cache)
    elif name == "metatool":
        from benchmarks.metatool import load_metatool

        corpus = load_metatool(folder)
    elif name == "toolbench":
        from benchmarks.toolbench import load_toolbench

        corpus = load_toolbench(folder, cache)
    else:
        raise ValueError(f"unknown benchmark {name!r}; expected one of {', '.join(MAX_QUERIES)}")
    records = [corpus.queries[i] for i in sample_queries(len(corpus.queries), MAX_QUERIES[name], 0)]
    ranker = RegistryRanker(corpus.tool_texts, scorer, cache)
    return rank_records(ranker, records, corpus.tool_index(), f"{name}:"), dict(corpus.inputs_sha256)


def _fit(method: str, queries: list, settings: dict[str, Any], seed: int) -> Any:
    """``sd.fit`` of a method name (``fixed-5``, ``gap``, or a kind trained towards the BoR reward)."""
    from agents.base import FixedConfig
    from agents.method import MethodSpec
    from shortlist_depth.api import fit

    spec = MethodSpec.parse(method)
    if spec.kind.name_field:
        return fit(spec.agent, queries, settings=FixedConfig(spec.k), seed=seed)
    return fit(spec.agent, queries, settings=settings.get(spec.agent), seed=seed)


def lobo_rows(
    by_bench: dict[str, list], candidates: Iterable[str], settings: dict[str, Any], seed: int
) -> pd.DataFrame:
    """Per-query rows of every candidate and comparator on each held-out benchmark, fitted on the others."""
    import pandas as pd

    from shortlist_depth.api import evaluate

    frames = []
    for held, test in by_bench.items():
        train = [q for name, qs in by_bench.items() if name != held for q in qs]
        for method in [*candidates, *COMPARATORS]:
            policy = _fit(method, train, settings, seed)
            rows = evaluate(policy, test)[["qid", "k", "found", "reward_net"]]
            group = "comparator" if method in COMPARATORS else "candidate"
            frames.append(rows.assign(held_out=held, method=policy.method, group=group, n_train=len(train)))
            print(f"  held out {held}: {policy.method} {rows['reward_net'].mean():.3f}", file=sys.stderr)
    return pd.concat(frames, ignore_index=True)


def lobo_tables(rows: pd.DataFrame, n_boot: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per held-out benchmark and method: mean net reward, found %, mean and median K; the paired differences
    of every candidate minus every comparator, with 95% bootstrap intervals over the held-out queries)."""
    import pandas as pd

    from agents.method import MethodSpec
    from experiments.report.tables import diff_interval, query_resamples

    summary, diffs = [], []
    for held, part in rows.groupby("held_out", sort=False):
        wide = part.pivot(index="method", columns="qid", values="reward_net")
        idx = query_resamples(wide.shape[1], n_boot, seed)
        for method, m in part.groupby("method", sort=False):
            torch = MethodSpec.parse(method).kind.torch_at_inference
            summary.append({"held_out": held, "method": method, "group": m["group"].iloc[0], "n_queries": len(m),
                            "torch_at_inference": torch,
                            "n_train": int(m["n_train"].iloc[0]), "mean_reward_net": m["reward_net"].mean(),
                            "found_pct": 100 * m["found"].mean(), "mean_k": m["k"].mean(),
                            "median_k": m["k"].median()})  # fmt: skip
            if m["group"].iloc[0] != "candidate":
                continue
            for comp in wide.index[wide.index.isin(COMPARATORS)]:
                d = diff_interval((wide.loc[method] - wide.loc[comp]).to_numpy(), idx)
                diffs.append({"held_out": held, "method": method, "comparator": comp, "torch_at_inference": torch,
                              **d})  # fmt: skip
    return pd.DataFrame(summary), pd.DataFrame(diffs)


def choose(summary: pd.DataFrame) -> tuple[str, pd.Series]:
    """The candidate that decides without torch with the best mean held-out net reward (each benchmark weighing
    the same; ties: the earlier candidate), and every method's mean over the held-out benchmarks."""
    means = summary.groupby("method", sort=False)["mean_reward_net"].mean()
    eligible = (summary["group"] == "candidate") & ~summary["torch_at_inference"].astype(bool)
    candidates = summary.loc[eligible, "method"].unique()
    best = max(candidates, key=lambda m: (means[m], -list(candidates).index(m)))
    return str(best), means


def write_default_policy(
    method: str, queries: list, scorer: str, out: Path, provenance: dict[str, Any], seed: int
) -> Path:
    """Refit ``method`` on every query and save it as ``out/<scorer>`` (a run directory ``load_policy`` reads),
    recording the scorer it serves (``toolsearch``) and its provenance."""
    from agents.trained import TrainedPolicy
    from benchmarks.tool_ranking import RegistryRanker

    policy = _fit(method, queries, {}, seed)
    ranker = RegistryRanker(["probe"], scorer)  # the scorer's identity (a one-tool registry is enough)
    record = {"scorer": ranker.scorer, "identity": ranker.identity(), "observation": ranker.observation}
    config = {**policy.config, "source": "shortlist toolsearch default", "toolsearch": record, "provenance": provenance}
    saved = TrainedPolicy(policy.policy, policy.episode, policy.method, None, config)
    return saved.save(out / ranker.scorer, overwrite=True)


def cmd_toolsearch_default(ta: ToolsearchDefaultArgs, command: str) -> int:
    """``shortlist toolsearch default`` (module docstring)."""
    from experiments.io import git_state

    settings = ta.settings()
    code = git_state()  # the code that runs: taken before the long fits
    tables: dict[str, tuple[pd.DataFrame, pd.DataFrame, str, pd.Series]] = {}
    inputs: dict[str, str] = {}
    for scorer in ta.scorers:
        by_bench = {}
        for name in ta.benchmarks:
            by_bench[name], shas = benchmark_queries(name, scorer, ta.data_dir, ta.cache_dir)
            inputs.update(shas)
        print(f"{scorer}: leave one benchmark out ({', '.join(f'{k} {len(v)}' for k, v in by_bench.items())})",
              file=sys.stderr)  # fmt: skip
        summary, diffs = lobo_tables(lobo_rows(by_bench, ta.candidates, settings, ta.seed), ta.n_boot, ta.seed)
        chosen, means = choose(summary)
        tables[scorer] = (summary, diffs, chosen, means)
        provenance = {"command": command, **code, "data_sha256": dict(sorted(inputs.items())),
                      "chosen_by": f"leave-one-benchmark-out over {', '.join(ta.benchmarks)} (table: {ta.table})",
                      "trained_on": {k: len(v) for k, v in by_bench.items()}}  # fmt: skip
        everything = [q for qs in by_bench.values() for q in qs]
        path = write_default_policy(chosen, everything, scorer, Path(ta.out), provenance, ta.seed)
        print(f"{scorer}: default {chosen} (mean held-out net reward {means[chosen]:.3f}); wrote {path}")
    write_lobo_folder(Path(ta.table), tables, ta, command, inputs, code)
    print(f"wrote {ta.table}/README.md, lobo.csv, lobo_diffs.csv and manifest.json")
    return 0


def write_lobo_folder(
    folder: Path, tables: dict[str, tuple[pd.DataFrame, pd.DataFrame, str, pd.Series]], ta: Any, command: str,
    inputs: dict[str, str], code: dict[str, object],
) -> None:  # fmt: skip
    """The LOBO table (CSV), its README (verdict and intervals) and the manifest, written all at once. The
    manifest's git state is ``code``, taken before the fits: by now the command has rewritten the shipped
    policies, which would otherwise count its own output as a change to the code."""
    import pandas as pd

    from experiments.io import atomic_write_json, manifest, staged_folder, write_csv
    from experiments.report.page import write_page

    summary = pd.concat([s.assign(scorer=k) for k, (s, _, _, _) in tables.items()], ignore_index=True)
    diffs = pd.concat([d.assign(scorer=k) for k, (_, d, _, _) in tables.items()], ignore_index=True)
    with staged_folder(folder) as tmp:
        write_csv(summary[["scorer", *summary.columns.drop("scorer")]], tmp / "lobo.csv")
        write_csv(diffs[["scorer", *diffs.columns.drop("scorer")]], tmp / "lobo_diffs.csv")
        write_page(tmp, lobo_readme(tables, command))
        made = manifest(git=code, command=command, data_sha256=dict(sorted(inputs.items())),
                        chosen={k: v[2] for k, v in tables.items()}, options=asdict(ta))  # fmt: skip
        atomic_write_json(tmp / "manifest.json", made)


def lobo_readme(tables: dict[str, tuple[pd.DataFrame, pd.DataFrame, str, pd.Series]], command: str) -> Page:
    """The page of the LOBO folder: the verdict per scorer first, then each held-out benchmark's table."""
    from experiments.report.page import Page, Paragraph, Section

    how = ("Each benchmark's queries rank its whole registry as a tool search does (BFCL 370 functions, all 400 "
           "queries; MetaTool 199 tools, the 2,000 queries of its main condition; ToolBench 3,406 tools, 474 G1 "
           "queries). Every candidate is fitted on the other benchmarks' queries and judged on the held-out one's: "
           "net reward = found x -log2 P_rand(K) - 0.01 (K - 1), with paired 95% bootstrap intervals over the "
           "held-out queries against fixed K = 3, 5, 8 and the largest-gap rule. The default is the candidate with "
           "the best mean held-out net reward (each benchmark weighing the same) among those that decide without "
           "torch (a tool search must start fast; the kinds that run a torch network for every depth are judged "
           "and shown, not eligible), refitted on every query of every benchmark and shipped in "
           "`shortlist_depth/default_policy/<scorer>/`.")  # fmt: skip
    verdicts = [
        Paragraph(verdict_line(scorer, chosen, means, diffs)) for scorer, (_, diffs, chosen, means) in tables.items()
    ]
    sections = []
    for scorer, (summary, diffs, _, means) in tables.items():
        held = [
            Section(f"Held out: {name} ({int(part['n_queries'].iloc[0])} queries; trained on "
                    f"{int(part['n_train'].iloc[0])})", [held_out_table(part, diffs[diffs["held_out"] == name])])
            for name, part in summary.groupby("held_out", sort=False)
        ]  # fmt: skip
        sections.append(Section(scorer, [overview_table(summary, means)], held))
    sections.append(Section("How it was made", [Paragraph(how), Paragraph(f"Command: `{command}`")]))
    return Page(
        title=DEFAULT_TITLE,
        group="tool search",
        lede="Which depth policy ships inside the package for each scorer, chosen by leaving one benchmark out.",
        answer=Section("", verdicts),
        sections=sections,
    )


def verdict_line(scorer: str, chosen: str, means: pd.Series, diffs: pd.DataFrame) -> str:
    """The verdict of one scorer: the chosen kind, its mean held-out net reward, and against each comparator on
    how many held-out benchmarks it is significantly ahead, within noise or behind."""
    mine = diffs[diffs["method"] == chosen]
    parts = []
    for comp, d in mine.groupby("comparator", sort=False):
        ahead, behind = int((d["diff_lo"] > 0).sum()), int((d["diff_hi"] < 0).sum())
        parts.append(f"{comp}: ahead on {ahead}, behind on {behind}, within noise on {len(d) - ahead - behind}")
    ranking = ", ".join(f"{m} {v:.3f}" for m, v in means.sort_values(ascending=False).items())
    torch = sorted(set(diffs.loc[diffs["torch_at_inference"].astype(bool), "method"]))
    note = (f"; {', '.join(torch)} {'decides' if len(torch) == 1 else 'decide'} with torch: judged, not eligible"
            if torch else "")  # fmt: skip
    return (f"Default for `{scorer}`: **{chosen}** (mean held-out net reward {means[chosen]:.3f}; every method: "
            f"{ranking}{note}). Against the comparators over the {mine['held_out'].nunique()} held-out benchmarks "
            f"(95% paired intervals): {'; '.join(parts)}.")  # fmt: skip


def overview_table(summary: pd.DataFrame, means: pd.Series) -> Table:
    """Every method's net reward on each held-out benchmark and their mean, best first."""
    from experiments.report.page import Table as table

    wide = summary.pivot(index="method", columns="held_out", values="mean_reward_net")[summary["held_out"].unique()]
    torch = summary.groupby("method")["torch_at_inference"].first().astype(bool)
    rows = [[m, *(f"{wide.loc[m, h]:.3f}" for h in wide.columns), f"{means[m]:.3f}",
             "torch" if torch[m] else "numpy"] for m in means.sort_values(ascending=False).index]  # fmt: skip
    return table(["method", *(f"held out {h}" for h in wide.columns), "mean", "decides with"], rows)


def held_out_table(part: pd.DataFrame, diffs: pd.DataFrame) -> Table:
    """One held-out benchmark's table: every method, its net reward, found %, mean / median K and its paired
    differences from the comparators."""
    from experiments.report.page import Table as table

    def cell(method: str, comp: str) -> str:
        d = diffs[(diffs["method"] == method) & (diffs["comparator"] == comp)]
        return "" if d.empty else f"{d['diff'].iloc[0]:+.3f} [{d['diff_lo'].iloc[0]:+.3f}, {d['diff_hi'].iloc[0]:+.3f}]"

    rows = [[r["method"], r["group"], f"{r['mean_reward_net']:.3f}", f"{r['found_pct']:.1f}", f"{r['mean_k']:.2f}",
             f"{r['median_k']:g}", *(cell(r["method"], c) for c in COMPARATORS)]
            for _, r in part.sort_values("mean_reward_net", ascending=False).iterrows()]  # fmt: skip
    header = ["method", "group", "net reward", "found %", "mean K", "median K", *(f"minus {c}" for c in COMPARATORS)]
    return table(header, rows)


# ----------------------------------------------------------------------------------------------- latency


def registry_tools(name: str, data_dir: str | None, cache_dir: str | None) -> tuple[list[dict[str, Any]], list[str]]:
    """A benchmark's registry as a tools list (registry order) and its query texts: BFCL's 370 functions as an
    OpenAI ``tools`` list; ToolBench's 3,406 tools as bare ``{name, description}`` dicts whose description is
    the tool's aggregated text (no parameters: the scorers then see that text and "Parameters:")."""
    folder, cache = (Path(data_dir) if data_dir else None), (Path(cache_dir) if cache_dir else None)
    if name == "toolbench":
        from benchmarks.toolbench import load_toolbench

        corpus = load_toolbench(folder, cache)
        bare: list[dict[str, Any]] = [
            {"name": n, "description": t} for n, t in zip(corpus.tool_names, corpus.tool_texts, strict=True)
        ]
        return bare, [q.text for q in corpus.queries]
    from benchmarks.bfcl import load_bfcl

    return bfcl_openai_tools(folder, cache), [q.text for q in load_bfcl(data_dir=folder, cache_dir=cache).queries]


def bfcl_openai_tools(folder: Path | None, cache: Path | None) -> list[dict[str, Any]]:
    """BFCL's 370 functions as an OpenAI ``tools`` list, in registry order."""
    from benchmarks.bfcl import load_bfcl_schemas

    schemas = load_bfcl_schemas(data_dir=folder, cache_dir=cache)
    return [{"type": "function", "function": {"name": n, "description": d, "parameters": p}}
            for n, (d, p) in schemas.items()]  # fmt: skip


def cmd_toolsearch_latency(la: ToolsearchLatencyArgs) -> int:
    """``shortlist toolsearch latency``: per-request time of ``ToolSearch.search`` on a benchmark's registry (BFCL's
    370 tools, or ToolBench's 3,406), one request at a time (after ``--warmup`` requests): p50 and p99 of the whole
    call, of the scorer alone and of the rest (ranking, the policy and its estimate, the shortlist), in wall time
    and in CPU time (the process's, all threads: on a busy machine the wall time also counts the wait for a core)."""
    import time

    import numpy as np

    from shortlist_depth.toolsearch import ToolSearch

    tools, texts = registry_tools(la.registry, la.data_dir, la.cache_dir)
    texts = (texts * (1 + la.requests // len(texts)))[: la.warmup + la.requests]
    columns = ["scorer", "policy", "tools", "requests", "build s", "p50 ms", "p99 ms", "CPU p50 ms", "CPU p99 ms",
               "scorer p50 ms", "rest p50 ms", "rest p99 ms"]  # fmt: skip
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for scorer in la.scorers:
        t0 = time.perf_counter()
        search = ToolSearch.from_tools(tools, scorer, la.policy, cache_dir=la.cache_dir)
        search.ranker.embed_threads = la.torch_threads
        build = time.perf_counter() - t0
        timed = []  # (whole call, its CPU time, the scorer alone) per request, seconds
        for i, text in enumerate(texts):
            t0 = time.perf_counter()
            search.ranker.scores([text])
            t1, c1 = time.perf_counter(), time.process_time()
            search.search(text)
            if i >= la.warmup:
                timed.append((time.perf_counter() - t1, time.process_time() - c1, t1 - t0))
        whole, cpu, scored = (1e3 * np.asarray(col) for col in zip(*timed, strict=True))
        rest = np.maximum(whole - scored, 0.0)
        cells = [np.percentile(whole, 50), np.percentile(whole, 99), np.percentile(cpu, 50), np.percentile(cpu, 99),
                 np.percentile(scored, 50), np.percentile(rest, 50), np.percentile(rest, 99)]  # fmt: skip
        head = f"| {search.scorer} | {search.policy.method} | {len(tools)} | {len(timed)} | {build:.2f} | "
        print(head + " | ".join(f"{c:.2f}" for c in cells) + " |")
    return 0


def benchmark_texts(name: str, data_dir: str | None, cache_dir: str | None) -> dict[str, list[str]]:
    """A benchmark's tool texts (registry order) and query texts, by set name (``<name> tools``, ``<name> queries``)."""
    folder, cache = (Path(data_dir) if data_dir else None), (Path(cache_dir) if cache_dir else None)
    if name == "bfcl":
        from benchmarks.bfcl import load_bfcl

        corpus = load_bfcl(data_dir=folder, cache_dir=cache)
    elif name == "metatool":
        from benchmarks.metatool import load_metatool

        corpus = load_metatool(folder)
    else:
        from benchmarks.toolbench import load_toolbench

        corpus = load_toolbench(folder, cache)
    return {f"{name} tools": list(corpus.tool_texts), f"{name} queries": [q.text for q in corpus.queries]}


def cmd_toolsearch_embeddings(ea: ToolsearchEmbeddingsArgs) -> int:
    """``shortlist toolsearch embeddings``: :class:`benchmarks.sbert.BertMeanEncoder` against sentence-transformers'
    ``encode`` on every tool text and query of the benchmarks (same batches, same threads); 1 when any differs."""
    import time

    import numpy as np
    import torch

    from benchmarks.sbert import BertMeanEncoder
    from benchmarks.scorers import _load_model, resolve_model

    torch.set_num_threads(ea.torch_threads)
    path = resolve_model(ea.model)
    light, st = BertMeanEncoder(path), _load_model(path, ea.model, "sentence-transformers")
    print(f"model {ea.model} ({path}), batch size {ea.batch_size}, {ea.torch_threads} torch thread(s)")
    print("| texts | n | bit-identical | max abs difference | sentence-transformers CPU s | plain torch CPU s |")
    print("|---|---|---|---|---|---|")
    differ = 0
    for bench in ea.benchmarks:
        for name, texts in benchmark_texts(bench, ea.data_dir, ea.cache_dir).items():
            c0 = time.process_time()
            reference = np.asarray(st.encode(texts, batch_size=ea.batch_size, normalize_embeddings=True,
                                             show_progress_bar=False), dtype=np.float32)  # fmt: skip
            c1 = time.process_time()
            got = light.encode(texts, batch_size=ea.batch_size)
            c2 = time.process_time()
            same = got.shape == reference.shape and bool(np.array_equal(got, reference))
            gap = float(np.abs(got - reference).max()) if got.shape == reference.shape else float("inf")
            differ += not same
            print(f"| {name} | {len(texts)} | {'yes' if same else 'NO'} | {gap:.3g} | {c1 - c0:.1f} | {c2 - c1:.1f} |",
                  flush=True)  # fmt: skip
    return 1 if differ else 0


# ----------------------------------------------------------------------------------------------- pays
#
# ``shortlist toolsearch pays``: does the tool search pay? Its policies against fixed limits on BFCL, end to end
# and in tool-definition tokens (:func:`cmd_toolsearch_pays`; the tables: experiments/report/pays_tables.py).

#: The split of the downstream study (its chooser answered this split's test queries).
SPLIT_SEED = 0


@dataclass(frozen=True)
class Requests:
    """The BFCL test queries of one scorer's condition, as the chooser saw them and as a tool search gets them.

    Attributes:
        condition: the condition's name (``bfcl-bm25``, ``bfcl-minilm``).
        scorer: its scorer.
        queries: each test query's text, its tools in the condition's ranking and its gold tool's rank.
        tools: the registry as an OpenAI ``tools`` list (registry order; BFCL's own schemas).
        train_log: the training queries as log lines ``{"request", "tools": [gold]}``.
        inputs_sha256: the BFCL data files read.
    """

    condition: str
    scorer: str
    queries: list[Any]
    tools: list[dict[str, Any]]
    train_log: list[dict[str, Any]]
    inputs_sha256: dict[str, str]


def bfcl_requests(scorer: str, data_dir: str | None, cache_dir: str | None, limit: int | None = None) -> Requests:
    """The downstream split's test queries of ``bfcl-<scorer>`` (the first ``limit`` only when given) and its
    training queries as a log."""
    from benchmarks.bfcl import load_bfcl
    from experiments.downstream_choices import downstream_queries
    from experiments.runner import get_condition

    cond = get_condition("bfcl", scorer, "", SPLIT_SEED, data_dir, cache_dir)
    folder, cache = (Path(data_dir) if data_dir else None), (Path(cache_dir) if cache_dir else None)
    corpus = load_bfcl(data_dir=folder, cache_dir=cache)
    queries = downstream_queries(cond, [q.qid for q in cond.test][:limit], data_dir, cache_dir)
    record = {q.qid: q for q in corpus.queries}
    log = [{"request": record[q.qid].text, "tools": list(record[q.qid].gold)} for q in cond.train]
    return Requests(cond.name, scorer, queries, bfcl_openai_tools(folder, cache), log, dict(corpus.inputs_sha256))


# ----------------------------------------------------------------------------------------------- depths


#: A tool search's score and the condition's closer than this are the same score: float32 noise of an embedding
#: computed with another number of threads (MiniLM on BFCL: at most 2.1e-7 apart, measured).
SCORE_TOL = 1e-5


def check_ranking(
    got: Sequence[tuple[str, float]], expected: Sequence[tuple[str, float]], qid: str, label: str, exact: int
) -> int | None:
    """Compare the tool search's ranking of one query with the condition's (``(tool name, score)``, best first).

    The first ``exact`` ranks (the prefixes every shortlist is cut from: each K is capped there) must hold the same
    tools, and at every rank the two scores must agree within :data:`SCORE_TOL`, so that beyond ``exact`` two tools
    can change places only where their scores tie within that noise.

    Returns:
        The first rank (beyond ``exact``) where the two rankings hold different tools; None when they are equal.

    Raises:
        ValueError: naming the query and the rank that differs.
    """
    first = None
    for rank, (a, b) in enumerate(zip_longest(got, expected), start=1):
        if a is None or b is None:
            raise ValueError(
                f"{label}: query {qid!r}: the tool search ranks {len(got)} tools, the condition {len(expected)}"
            )
        if a[0] != b[0] and rank <= exact:
            raise ValueError(
                f"{label}: the tool search ranks query {qid!r} differently from the condition (rank {rank}: "
                f"{a[0]!r}, the condition's {b[0]!r}); the tool search and the study would not show the same tools"
            )
        if abs(a[1] - b[1]) > SCORE_TOL:
            raise ValueError(
                f"{label}: the tool search scores query {qid!r} differently from the condition (rank {rank}: "
                f"{a[0]!r} {a[1]:.9g}, the condition's {b[0]!r} {b[1]:.9g}; more than {SCORE_TOL:g} apart)"
            )
        first = first or (rank if a[0] != b[0] else None)
    return first


def policy_depths(search: Any, queries: Sequence[Any], label: str) -> tuple[np.ndarray, dict[str, Any]]:
    """Each query's K as the policy of ``search`` (a :class:`~shortlist_depth.ToolSearch`) chooses it, before
    any cap, after :func:`check_ranking` of its whole ranking against the condition's; and what the check found
    (the queries whose rankings differ beyond the cap, at which rank; the largest score difference)."""
    import numpy as np

    from experiments.plan import MAX_K

    n = len(search.tools)
    lists = search.search_many([q.text for q in queries], min_k=n, max_k=n)  # the whole ranking, K unclipped in why
    differ, gap = {}, 0.0
    for q, shortlist in zip(queries, lists, strict=True):
        expected = [(t.name, float(t.score)) for t in q.ranked]
        rank = check_ranking(list(zip(shortlist.names, shortlist.scores, strict=True)), expected, q.qid, label, MAX_K)
        if rank is not None:
            differ[q.qid] = rank
        gap = max(gap, max(abs(a - b) for a, (_, b) in zip(shortlist.scores, expected, strict=True)))
    check = {"queries": len(queries), "top_identical": MAX_K, "differ_beyond_top": differ, "max_abs_score_diff": gap}
    return np.array([int(s.why["policy_k"]) for s in lists], dtype=np.int64), check


def lobo_net_reward(lobo: Path, scorer: str, method: str) -> float:
    """The mean net reward the leave-one-benchmark-out table gives ``method`` held out on BFCL for ``scorer``."""
    import pandas as pd

    table = pd.read_csv(lobo / "lobo.csv")
    row = table[(table["scorer"] == scorer) & (table["held_out"] == "bfcl") & (table["method"] == method)]
    if len(row) != 1:
        raise ValueError(f"{lobo / 'lobo.csv'}: no row of {method} held out on bfcl for scorer {scorer}")
    return float(row["mean_reward_net"].iloc[0])


def leave_bfcl_out(
    shipped: Any, scorer: str, lobo: Path, data_dir: str | None, cache_dir: str | None
) -> tuple[Any, dict[str, Any]]:
    """The policy the leave-one-benchmark-out table judged on BFCL for ``scorer``: the shipped kind, with the
    table's settings and seed, fitted on the other benchmarks' queries in the table's order; checked to give the
    table's BFCL net reward. Returns (the policy, recording the shipped one's scorer, and what was checked)."""
    from agents import registry
    from agents.trained import TrainedPolicy
    from shortlist_depth.api import evaluate

    manifest = json.loads((lobo / "manifest.json").read_text(encoding="utf-8"))
    chosen, opts = manifest.get("chosen", {}).get(scorer), manifest.get("options", {})
    if chosen != shipped.method or manifest.get("command") != shipped.config["provenance"].get("command"):
        raise ValueError(
            f"{lobo / 'manifest.json'} (chose {chosen} for {scorer}) and the shipped policy ({shipped.method}) come "
            "from different runs of `shortlist toolsearch default`: the table cannot say which policy was judged"
        )
    loaded = {b: benchmark_queries(b, scorer, data_dir, cache_dir) for b in opts["benchmarks"]}
    by_bench = {b: qs for b, (qs, _) in loaded.items()}
    train = [q for b, qs in by_bench.items() if b != "bfcl" for q in qs]
    policy = _fit(chosen, train, registry.parse_settings(tuple(opts.get("set", ()))), int(opts["seed"]))
    got, want = float(evaluate(policy, by_bench["bfcl"])["reward_net"].mean()), lobo_net_reward(lobo, scorer, chosen)
    if not math.isclose(got, want, rel_tol=1e-8, abs_tol=1e-9):
        raise ValueError(
            f"{scorer}: {chosen} refitted without BFCL gives net reward {got:.10g} on BFCL, the table "
            f"{lobo / 'lobo.csv'} {want:.10g}: not the policy the table judged"
        )
    config = {**policy.config, "toolsearch": shipped.config["toolsearch"], "source": "leave BFCL out"}
    shas = {k: v for _, read in loaded.values() for k, v in read.items()}
    check = {"trained_on": {b: len(qs) for b, qs in by_bench.items() if b != "bfcl"}, "bfcl_net_reward": got,
             "lobo_bfcl_net_reward": want, "data_sha256": dict(sorted(shas.items()))}  # fmt: skip
    return TrainedPolicy(policy.policy, policy.episode, policy.method, None, config), check


def default_policy(scorer: str, args: ToolsearchPaysArgs, runs: Path) -> tuple[Any, dict[str, Any]]:
    """The ``default`` policy evaluated for ``scorer`` (the module docstring: the shipped one, or the leave-BFCL-out
    one when the shipped one was trained on BFCL) and what the report says of it."""
    from agents.trained import load_policy
    from shortlist_depth.toolsearch import default_policy_path

    path = default_policy_path(scorer)
    shipped = load_policy(path)
    trained_on = (shipped.config.get("provenance") or {}).get("trained_on")
    if not isinstance(trained_on, dict) or not trained_on:
        raise ValueError(f"{path / 'config.json'}: no provenance.trained_on: cannot tell whether it saw BFCL's tests")
    info: dict[str, Any] = {"shipped": f"shortlist_depth/default_policy/{path.name}", "method": shipped.method,
                            "shipped_trained_on": trained_on, "shipped_files_sha256": files_sha256(path)}  # fmt: skip
    if "bfcl" not in trained_on:
        return shipped, {**info, "evaluated": "shipped"}
    policy, check = leave_bfcl_out(shipped, scorer, Path(args.lobo), args.data_dir, args.cache_dir)
    saved = policy.save(runs / f"default-leave-bfcl-out-{scorer}", overwrite=True)
    return policy, {**info, "evaluated": "leave-bfcl-out", **check, "evaluated_files_sha256": files_sha256(saved)}


def recommended_searcher(req: Requests, args: ToolsearchPaysArgs, runs: Path) -> tuple[Any, dict[str, Any]]:
    """``shortlist recommend --tools --log`` on the BFCL training queries (:func:`run_recommend`, their schemas and
    log written first into ``runs/recommend-<scorer>/inputs``); its saved searcher and what the report says of it."""
    from experiments.io import atomic_write_text

    folder = runs / f"recommend-{req.scorer}"
    tools, log = folder / "inputs" / "bfcl-tools.json", folder / "inputs" / "bfcl-train-log.jsonl"
    tools.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(tools, json.dumps(req.tools, indent=1, ensure_ascii=False) + "\n")
    atomic_write_text(log, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in req.train_log))
    search, info = run_recommend(tools, log, req.scorer, args, folder / "out", f"{req.condition}: ")
    condition = info.pop("condition")
    info.update(log_queries=len(req.train_log), log_train=condition.get("n_train"), log_test=condition.get("n_test"))
    return search, info


def method_depths(req: Requests, args: ToolsearchPaysArgs, runs: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One row per (method, test query) of ``req``: the policy the method names and the K it chose (before the
    cap); and what the report says of the default and the recommended policies and of the ranking check (both
    searchers' rankings are checked against the condition's on every query: :func:`policy_depths`)."""
    import numpy as np
    import pandas as pd

    from shortlist_depth.toolsearch import ToolSearch

    default, default_info = default_policy(req.scorer, args, runs)
    search = ToolSearch.from_tools(req.tools, req.scorer, default, cache_dir=args.cache_dir)
    recommended, recommended_info = recommended_searcher(req, args, runs)
    depths, ranking = {}, {}
    for method, searcher in (("default", search), ("recommended", recommended)):
        depths[method], ranking[method] = policy_depths(searcher, req.queries, f"{req.condition} {method}")
    policies = {"default": default.method, "recommended": recommended.policy.method}
    for k in args.fixed:
        depths[f"fixed-{k}"] = np.full(len(req.queries), k, dtype=np.int64)
        policies[f"fixed-{k}"] = f"fixed-{k}"
    frame = pd.concat(
        [pd.DataFrame({"condition": req.condition, "scorer": req.scorer, "method": m, "policy": policies[m],
                       "qid": [q.qid for q in req.queries], "gold_rank": [q.gold_rank for q in req.queries],
                       "policy_k": ks}) for m, ks in depths.items()],
        ignore_index=True,
    )  # fmt: skip
    return frame, {"default": default_info, "recommended": recommended_info, "ranking": ranking["default"]}


def read_choices(path: str, conditions: Sequence[str]) -> pd.DataFrame:
    """A committed choices table (``shortlist downstream``'s ``choices.csv``), checked to hold the columns read
    and answers for every one of ``conditions``."""
    import pandas as pd

    table = pd.read_csv(path, dtype={"qid": str})
    missing = [c for c in ("condition", "qid", "k", "correct", "chooser") if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: not a choices table of `shortlist downstream` (no column {', '.join(missing)})")
    absent = [c for c in conditions if c not in set(table["condition"])]
    if absent:
        raise ValueError(f"{path}: no answers for {', '.join(absent)}")
    if table["chooser"].nunique() != 1:
        raise ValueError(f"{path}: answers of several choosers ({', '.join(map(str, table['chooser'].unique()))})")
    return table


# ----------------------------------------------------------------------------------------------- command


def cmd_toolsearch_pays(args: ToolsearchPaysArgs, command: str) -> int:
    """``shortlist toolsearch pays`` (module docstring; with ``--tools/--log``: :mod:`experiments.pays_log`): always
    with the local chooser's own tokenizer."""
    from choosers.local import load_tokenizer

    print("loading the local chooser's tokenizer (Gemma 3 270M)", file=sys.stderr)
    counter = load_tokenizer(cache_dir=args.cache_dir)  # ChooserError (a ValueError) with the reason: no fallback
    if args.log:
        from experiments.pays_log import run_pays_log

        out = run_pays_log(args, command, counter, counter.identity)
        extra = " choices.csv,"
    else:
        out, extra = run_pays(args, command, counter, counter.identity), ""
    print(f"wrote {out}/README.md, methods.csv, paired.csv, per_query.csv,{extra} figures/pays.png and manifest.json")
    return 0


def run_pays(args: ToolsearchPaysArgs, command: str, count: TokenCount, tokenizer: dict[str, str]) -> Path:
    """The command with the token counter ``count`` (named by ``tokenizer``): every table, the figure, the page
    and the manifest, written into ``args.out`` at once (files there that this command does not write, such as
    ``default-policy/``, stay)."""
    import pandas as pd

    from experiments.io import staged_folder, write_manifest
    from experiments.plan import MAX_K
    from experiments.report.pays_page import write_pays_report
    from experiments.report.pays_tables import method_table, paired_table, pays_rows, token_counter

    t0 = time.perf_counter()
    out = Path(args.out)
    runs = Path(args.runs_dir) if args.runs_dir else out / "runs"
    conditions = [f"bfcl-{s}" for s in args.scorers]
    choices = {"local": read_choices(args.choices, conditions), "simulated": read_choices(args.simulated_choices,
                                                                                          conditions)}  # fmt: skip
    frames, about, queries, inputs = [], {}, {}, {}
    for scorer in args.scorers:
        req = bfcl_requests(scorer, args.data_dir, args.cache_dir, args.limit)
        print(
            f"{req.condition}: {len(req.queries)} test queries, {len(req.train_log)} training queries", file=sys.stderr
        )
        depths, about[req.condition] = method_depths(req, args, runs)
        frames.append(depths)
        queries[req.condition] = {q.qid: q for q in req.queries}
        inputs.update({**req.inputs_sha256, **about[req.condition]["default"].get("data_sha256", {})})
    tokens = token_counter(queries, count)
    depths = pd.concat(frames, ignore_index=True)
    rows = pd.concat(
        [pays_rows(depths, ch, tokens).assign(chooser=kind, chooser_name=str(ch["chooser"].iloc[0]))
         for kind, ch in choices.items()], ignore_index=True,
    )  # fmt: skip
    methods, paired = method_table(rows, args.n_boot, args.seed), paired_table(rows, args.n_boot, args.seed)
    for path in (args.choices, args.simulated_choices, Path(args.lobo) / "lobo.csv", Path(args.lobo) / "manifest.json"):
        if Path(path).is_file():
            inputs[str(path)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    with staged_folder(out, merge=True, owned=("figures",)) as tmp:
        write_pays_report(tmp, rows, methods, paired, about, tokenizer, command, MAX_K)
        write_manifest(tmp / "manifest.json", command=command, inputs_sha256=dict(sorted(inputs.items())),
                       tokenizer=tokenizer, policies=about, cap=MAX_K, split_seed=SPLIT_SEED, options=asdict(args),
                       wall_seconds=time.perf_counter() - t0)  # fmt: skip
    return out
