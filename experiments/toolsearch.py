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
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.options import SearchArgs, ToolsearchDefaultArgs, ToolsearchLatencyArgs

if TYPE_CHECKING:  # pandas is read by the default command only: `shortlist search` starts without it
    import pandas as pd

#: The benchmarks of the leave-one-benchmark-out choice, and how many queries each gives.
MAX_QUERIES = {"bfcl": None, "metatool": 2000, "toolbench": None}
#: The comparators every candidate is paired with (method names of ``sd.fit``).
COMPARATORS = ("fixed-3", "fixed-5", "fixed-8", "gap")


# ----------------------------------------------------------------------------------------------- search


def _searcher(sa: SearchArgs) -> Any:
    from shortlist_depth.toolsearch import ToolSearch

    if sa.searcher:
        return ToolSearch.load(sa.searcher, cache_dir=sa.cache_dir)
    assert sa.tools
    return ToolSearch.from_file(sa.tools, sa.scorer, sa.policy, cache_dir=sa.cache_dir)


def cmd_search(sa: SearchArgs) -> int:
    """``shortlist search``: one shortlist as JSON, or JSON lines for the requests of stdin."""
    search = _searcher(sa)
    kw = {"min_k": sa.min_k, "max_k": sa.max_k, "pinned": sa.pin, "exclude": sa.exclude}
    if sa.request:
        print(json.dumps(search.search(sa.request, **kw).to_json(), ensure_ascii=False))
        return 0
    for lineno, line in enumerate(sys.stdin, start=1):
        text = line.rstrip("\n")
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
    write_lobo_folder(Path(ta.table), tables, ta, command, inputs)
    print(f"wrote {ta.table}/README.md, lobo.csv, lobo_diffs.csv and manifest.json")
    return 0


def write_lobo_folder(
    folder: Path, tables: dict[str, tuple[pd.DataFrame, pd.DataFrame, str, pd.Series]], ta: Any, command: str,
    inputs: dict[str, str],
) -> None:  # fmt: skip
    """The LOBO table (CSV), its README (verdict and intervals) and the manifest, written all at once."""
    import pandas as pd

    from experiments.io import staged_folder, write_csv, write_manifest

    summary = pd.concat([s.assign(scorer=k) for k, (s, _, _, _) in tables.items()], ignore_index=True)
    diffs = pd.concat([d.assign(scorer=k) for k, (_, d, _, _) in tables.items()], ignore_index=True)
    with staged_folder(folder) as tmp:
        write_csv(summary[["scorer", *summary.columns.drop("scorer")]], tmp / "lobo.csv")
        write_csv(diffs[["scorer", *diffs.columns.drop("scorer")]], tmp / "lobo_diffs.csv")
        (tmp / "README.md").write_text("\n".join(lobo_readme(tables, command)) + "\n", encoding="utf-8")
        write_manifest(tmp / "manifest.json", command=command, data_sha256=dict(sorted(inputs.items())),
                       chosen={k: v[2] for k, v in tables.items()}, options=asdict(ta))  # fmt: skip


def lobo_readme(tables: dict[str, tuple[pd.DataFrame, pd.DataFrame, str, pd.Series]], command: str) -> list[str]:
    """The README of the LOBO folder: the verdict per scorer, then each held-out benchmark's table."""
    lines = ["# The default tool-search policy: leave one benchmark out", "",
             "Each benchmark's queries rank its whole registry as a tool search does (BFCL 370 functions, all 400 "
             "queries; MetaTool 199 tools, the 2,000 queries of its main condition; ToolBench 3,406 tools, 474 G1 "
             "queries). Every candidate is fitted on the other benchmarks' queries and judged on the held-out one's: "
             "net reward = found x -log2 P_rand(K) - 0.01 (K - 1), with paired 95% bootstrap intervals over the "
             "held-out queries against fixed K = 3, 5, 8 and the largest-gap rule. The default is the candidate with "
             "the best mean held-out net reward (each benchmark weighing the same) among those that decide without "
             "torch (a tool search must start fast; the kinds that run a torch network for every depth are judged "
             "and shown, not eligible), refitted on every query of every benchmark and shipped in "
             "`shortlist_depth/default_policy/<scorer>/`.", ""]  # fmt: skip
    for scorer, (summary, diffs, chosen, means) in tables.items():
        lines += [f"## {scorer}", "", verdict_line(scorer, chosen, means, diffs), ""]
        lines += [*overview_table(summary, means), ""]
        for held, part in summary.groupby("held_out", sort=False):
            lines += [f"Held out: **{held}** ({int(part['n_queries'].iloc[0])} queries; trained on "
                      f"{int(part['n_train'].iloc[0])})", ""]  # fmt: skip
            lines += held_out_table(part, diffs[diffs["held_out"] == held])
            lines.append("")
    return [*lines, f"Command: `{command}`"]


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


def overview_table(summary: pd.DataFrame, means: pd.Series) -> list[str]:
    """Every method's net reward on each held-out benchmark and their mean, best first."""
    from experiments.report.markdown import table

    wide = summary.pivot(index="method", columns="held_out", values="mean_reward_net")[summary["held_out"].unique()]
    torch = summary.groupby("method")["torch_at_inference"].first().astype(bool)
    rows = [[m, *(f"{wide.loc[m, h]:.3f}" for h in wide.columns), f"{means[m]:.3f}",
             "torch" if torch[m] else "numpy"] for m in means.sort_values(ascending=False).index]  # fmt: skip
    return table(["method", *(f"held out {h}" for h in wide.columns), "mean", "decides with"], rows)


def held_out_table(part: pd.DataFrame, diffs: pd.DataFrame) -> list[str]:
    """One held-out benchmark's table: every method, its net reward, found %, mean / median K and its paired
    differences from the comparators."""
    from experiments.report.markdown import table

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
    from benchmarks.bfcl import load_bfcl, load_bfcl_schemas

    schemas = load_bfcl_schemas(data_dir=folder, cache_dir=cache)
    tools = [{"type": "function", "function": {"name": n, "description": d, "parameters": p}}
             for n, (d, p) in schemas.items()]  # fmt: skip
    return tools, [q.text for q in load_bfcl(data_dir=folder, cache_dir=cache).queries]


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
