"""``shortlist toolsearch pays``: does the tool search pay? Its policies against fixed limits, end to end and in tokens.

On the BFCL test queries of the downstream study (split 0 of ``bfcl-bm25`` and ``bfcl-minilm``: 120 queries, the
registry's 370 functions), each request ranks the whole registry with a :class:`shortlist_depth.ToolSearch` built
from BFCL's function schemas with the condition's scorer; the command checks that this ranking equals the
condition's for every test query (:func:`check_ranking`; it stops at the first that differs). K comes from:

- ``default``: the policy shipped for the scorer (``shortlist toolsearch default``). When its provenance says it
  was trained on BFCL (it is refitted on every query of every benchmark, so it saw these test queries), the
  policy the leave-one-benchmark-out table judged on BFCL is used instead: the same kind, settings and seed
  fitted on the other benchmarks' queries (:func:`leave_bfcl_out`, checked to give the table's BFCL net reward);
- ``recommended``: what ``shortlist recommend --tools <BFCL schemas> --log <the BFCL training queries, request
  and gold tool>`` saves as its searcher (the command's own entry point, into ``RUNS/recommend-<scorer>/``);
- ``fixed-3``, ``fixed-5``, ``fixed-8``: the limits tool searches ship with.

Every K is capped at :data:`experiments.plan.MAX_K` (20): the chooser answered the prefixes up to 20 only; how
often a policy wanted more is counted (``n_capped``). Per query and method (:func:`pays_rows`): end to end = the
chooser, shown the top K, picked the gold tool (``correct`` of the committed choices at (query, K); a top K
without the gold is a miss; a top K holding the gold without an answer is an error naming the query and K), and
the tool-definition tokens = the tokens of the shown tools' OpenAI ``tools`` array as the package's OpenAI
chooser sends it (:func:`choosers.openai_api.tools_json`), counted with the local chooser's own tokenizer
(Gemma 3 270M, :func:`choosers.local.load_tokenizer`). Intervals: 95% bootstrap over the test queries, the same
resamples for every method of a condition, so each adaptive-minus-fixed difference is paired
(:func:`experiments.report.tables.query_resamples` and ``diff_interval``). The local chooser's answers
(``results/downstream/choices.csv``) are the evidence; the simulated chooser's
(``results/downstream-simulated/choices.csv``) a sensitivity, named "simulated" wherever its numbers appear.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments.options import ToolsearchPaysArgs
from experiments.plan import MAX_K

#: The split of the downstream study (its chooser answered this split's test queries).
SPLIT_SEED = 0
#: The adaptive methods, in the order the tables show them.
ADAPTIVE = ("default", "recommended")
#: The choosers whose committed answers are read: the local LM (the evidence) and the simulated one.
CHOOSERS = ("local", "simulated")
#: A token counter: the number of tokens of a text.
TokenCount = Callable[[str], int]


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
    from experiments.toolsearch import bfcl_tools

    cond = get_condition("bfcl", scorer, "", SPLIT_SEED, data_dir, cache_dir)
    corpus = load_bfcl(data_dir=Path(data_dir) if data_dir else None, cache_dir=Path(cache_dir) if cache_dir else None)
    queries = downstream_queries(cond, [q.qid for q in cond.test][:limit], data_dir, cache_dir)
    record = {q.qid: q for q in corpus.queries}
    log = [{"request": record[q.qid].text, "tools": list(record[q.qid].gold)} for q in cond.train]
    tools, _ = bfcl_tools(data_dir, cache_dir)
    return Requests(cond.name, scorer, queries, tools, log, dict(corpus.inputs_sha256))


# ----------------------------------------------------------------------------------------------- depths


def check_ranking(got: Sequence[str], expected: Sequence[str], qid: str, label: str) -> None:
    """ValueError naming the query and the first rank where the tool search's ranking ``got`` differs from the
    condition's ``expected`` (tool names, best first)."""
    for rank, (a, b) in enumerate(zip_longest(got, expected), start=1):
        if a != b:
            raise ValueError(
                f"{label}: the tool search ranks query {qid!r} differently from the condition (rank {rank}: "
                f"{a!r}, the condition's {b!r}); the tool search and the study would not show the same tools"
            )


def policy_depths(search: Any, queries: Sequence[Any], label: str) -> np.ndarray:
    """Each query's K as the policy of ``search`` (a :class:`~shortlist_depth.ToolSearch`) chooses it, before
    any cap, after :func:`check_ranking` of its whole ranking against the condition's."""
    n = len(search.tools)
    lists = search.search_many([q.text for q in queries], min_k=n, max_k=n)  # the whole ranking, K unclipped in why
    for q, shortlist in zip(queries, lists, strict=True):
        check_ranking(shortlist.names, [t.name for t in q.ranked], q.qid, label)
    return np.array([int(s.why["policy_k"]) for s in lists], dtype=np.int64)


def files_sha256(folder: Path) -> dict[str, str]:
    """sha256 of every file of ``folder`` (relative POSIX paths, sorted)."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def lobo_net_reward(lobo: Path, scorer: str, method: str) -> float:
    """The mean net reward the leave-one-benchmark-out table gives ``method`` held out on BFCL for ``scorer``."""
    table = pd.read_csv(lobo / "lobo.csv")
    row = table[(table["scorer"] == scorer) & (table["held_out"] == "bfcl") & (table["method"] == method)]
    if len(row) != 1:
        raise ValueError(f"{lobo / 'lobo.csv'}: no row of {method} held out on bfcl for scorer {scorer}")
    return float(row["mean_reward_net"].iloc[0])


def leave_bfcl_out(shipped: Any, scorer: str, lobo: Path, data_dir: str | None, cache_dir: str | None) -> tuple:
    """The policy the leave-one-benchmark-out table judged on BFCL for ``scorer``: the shipped kind, with the
    table's settings and seed, fitted on the other benchmarks' queries in the table's order; checked to give the
    table's BFCL net reward. Returns (the policy, recording the shipped one's scorer, and what was checked)."""
    from agents import registry
    from agents.trained import TrainedPolicy
    from experiments.toolsearch import _fit, benchmark_queries
    from shortlist_depth.api import evaluate

    manifest = json.loads((lobo / "manifest.json").read_text(encoding="utf-8"))
    chosen, opts = manifest.get("chosen", {}).get(scorer), manifest.get("options", {})
    if chosen != shipped.method or manifest.get("command") != shipped.config["provenance"].get("command"):
        raise ValueError(
            f"{lobo / 'manifest.json'} (chose {chosen} for {scorer}) and the shipped policy ({shipped.method}) come "
            "from different runs of `shortlist toolsearch default`: the table cannot say which policy was judged"
        )
    by_bench = {b: benchmark_queries(b, scorer, data_dir, cache_dir)[0] for b in opts["benchmarks"]}
    train = [q for b, qs in by_bench.items() if b != "bfcl" for q in qs]
    policy = _fit(chosen, train, registry.parse_settings(tuple(opts.get("set", ()))), int(opts["seed"]))
    got, want = float(evaluate(policy, by_bench["bfcl"])["reward_net"].mean()), lobo_net_reward(lobo, scorer, chosen)
    if not math.isclose(got, want, rel_tol=1e-8, abs_tol=1e-9):
        raise ValueError(
            f"{scorer}: {chosen} refitted without BFCL gives net reward {got:.10g} on BFCL, the table "
            f"{lobo / 'lobo.csv'} {want:.10g}: not the policy the table judged"
        )
    config = {**policy.config, "toolsearch": shipped.config["toolsearch"], "source": "leave BFCL out"}
    check = {"trained_on": {b: len(qs) for b, qs in by_bench.items() if b != "bfcl"}, "bfcl_net_reward": got,
             "lobo_bfcl_net_reward": want}  # fmt: skip
    return TrainedPolicy(policy.policy, policy.episode, policy.method, None, config), check


def default_policy(scorer: str, args: ToolsearchPaysArgs, runs: Path) -> tuple[Any, dict[str, Any]]:
    """The ``default`` policy evaluated for ``scorer`` (the module docstring) and what the report says of it."""
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
    """``shortlist recommend --tools --log`` on the BFCL training queries (through its entry point,
    :func:`experiments.recommend.cmd_recommend`), into ``runs/recommend-<scorer>``; its saved searcher and what
    the report says of it."""
    from experiments.io import atomic_write_text
    from experiments.options import CommonArgs, LearnArgs, RecommendArgs
    from experiments.recommend import cmd_recommend
    from shortlist_depth.toolsearch import ToolSearch

    folder = runs / f"recommend-{req.scorer}"
    tools, log = folder / "inputs" / "bfcl-tools.json", folder / "inputs" / "bfcl-train-log.jsonl"
    tools.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(tools, json.dumps(req.tools, indent=1, ensure_ascii=False) + "\n")
    atomic_write_text(log, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in req.train_log))
    out = folder / "out"
    flags = ["--tools", str(tools), "--log", str(log), "--scorer", req.scorer, "--seeds", str(args.seed)]
    flags += [x for item in args.set for x in ("--set", item)]
    command = "shortlist recommend " + " ".join([*flags, "--out", str(out), "--no-progress"])
    ra = RecommendArgs(tools=str(tools), log=str(log), scorer=req.scorer, out=str(out))
    cmd_recommend(ra, LearnArgs(seeds=(args.seed,), set=args.set),
                  CommonArgs(data_dir=args.data_dir, cache_dir=args.cache_dir, no_progress=True), command)  # fmt: skip
    search = ToolSearch.load(out / "searcher", cache_dir=args.cache_dir)
    auto = search.policy.policy  # an AutoPolicy: the kind it chose on the log's training part, and how
    condition = json.loads((out / "recommended" / "manifest.json").read_text(encoding="utf-8"))["condition"]
    info = {"method": search.policy.method, "kind_chosen": auto.chosen, "selection": auto.selection,
            "log_queries": len(req.train_log), "log_train": condition.get("n_train"),
            "log_test": condition.get("n_test"),
            "searcher_files_sha256": files_sha256(out / "searcher"),
            "command": "shortlist recommend --tools bfcl-tools.json --log bfcl-train-log.jsonl --scorer "
                       f"{req.scorer} --seeds {args.seed}" + "".join(f" --set {s}" for s in args.set)}  # fmt: skip
    return search, info


def method_depths(req: Requests, args: ToolsearchPaysArgs, runs: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One row per (method, test query) of ``req``: the policy the method names and the K it chose (before the
    cap); and what the report says of the default and the recommended policies. Both searchers' rankings are
    checked against the condition's on every query (:func:`policy_depths`)."""
    from shortlist_depth.toolsearch import ToolSearch

    default, default_info = default_policy(req.scorer, args, runs)
    search = ToolSearch.from_tools(req.tools, req.scorer, default, cache_dir=args.cache_dir)
    recommended, recommended_info = recommended_searcher(req, args, runs)
    depths = {"default": policy_depths(search, req.queries, f"{req.condition} default"),
              "recommended": policy_depths(recommended, req.queries, f"{req.condition} recommended")}  # fmt: skip
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
    return frame, {"default": default_info, "recommended": recommended_info}


# ----------------------------------------------------------------------------------------------- outcomes


def token_counter(queries: dict[str, dict[str, Any]], count: TokenCount) -> Callable[[str, str, int], int]:
    """``tokens(condition, qid, k)``: the tokens (``count``) of the top ``k`` tools of that query in that
    condition's ranking, as the OpenAI ``tools`` array the package's OpenAI chooser sends
    (:func:`choosers.openai_api.tools_json`); each (condition, query, K) counted once."""
    from choosers.openai_api import tools_json

    memo: dict[tuple[str, str, int], int] = {}

    def tokens(condition: str, qid: str, k: int) -> int:
        key = (condition, qid, k)
        if key not in memo:
            memo[key] = int(count(tools_json(queries[condition][qid].ranked[:k])))
        return memo[key]

    return tokens


def pays_rows(
    depths: pd.DataFrame, choices: pd.DataFrame, tokens: Callable[[str, str, int], int], cap: int = MAX_K
) -> pd.DataFrame:
    """Per (condition, method, query) of ``depths`` (:func:`method_depths`): ``k`` (the policy's K capped at
    ``cap``), ``capped`` (the policy wanted more), ``presented`` (the gold among the top K), ``e2e`` (the chooser
    picked the gold from the top K: ``correct`` of ``choices`` at (condition, query, K); a top K without the gold
    is a miss) and ``tokens`` (``tokens(condition, qid, K)``).

    Raises:
        ValueError: a top K holding the gold has no answer in ``choices`` (naming the query and K:
            :func:`experiments.report.downstream_tables.outcome_rows`).
    """
    from experiments.report.downstream_tables import outcome_rows

    d = depths.assign(k=np.minimum(depths["policy_k"], cap), capped=(depths["policy_k"] > cap).astype(int), seed=0,
                      bucket="")  # fmt: skip
    d["found"] = ((d["gold_rank"] >= 1) & (d["k"] >= d["gold_rank"])).astype(int)
    out = outcome_rows(d, choices)  # a left merge: the rows of d, in order
    for col in ("scorer", "policy", "policy_k", "capped"):
        out[col] = d[col].to_numpy()
    out["tokens"] = [tokens(c, q, int(k)) for c, q, k in zip(out["condition"], out["qid"], out["k"], strict=True)]
    cols = ["condition", "scorer", "method", "policy", "qid", "gold_rank", "policy_k", "k", "capped", "presented",
            "e2e", "tokens"]  # fmt: skip
    return out[cols]


def read_choices(path: str, conditions: Sequence[str]) -> pd.DataFrame:
    """A committed choices table (``shortlist downstream``'s ``choices.csv``), checked to hold the columns read
    and answers for every one of ``conditions``."""
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


# ----------------------------------------------------------------------------------------------- tables


def method_table(rows: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """Per (chooser, condition, method): mean K (capped and the policy's own), how many Ks were capped, presented
    %, end-to-end % and tool tokens per request, each mean with its 95% bootstrap interval over the queries (the
    same resamples for every method of a (chooser, condition))."""
    from experiments.report.tables import diff_interval, query_resamples

    out = []
    for (chooser, cond), g in rows.groupby(["chooser", "condition"], sort=False):
        idx = query_resamples(g["qid"].nunique(), n_boot, seed)
        for method, m in g.groupby("method", sort=False):
            m = m.sort_values("qid")
            if len(m) != idx.shape[1]:
                raise ValueError(f"{cond} {method}: {len(m)} queries, the condition has {idx.shape[1]}")
            e = diff_interval(100.0 * m["e2e"].to_numpy(dtype=np.float64), idx)
            t = diff_interval(m["tokens"].to_numpy(dtype=np.float64), idx)
            out.append({"chooser": chooser, "condition": cond, "method": method, "policy": m["policy"].iloc[0],
                        "n_queries": len(m), "mean_k": m["k"].mean(), "mean_policy_k": m["policy_k"].mean(),
                        "n_capped": int(m["capped"].sum()), "presented_pct": 100.0 * m["presented"].mean(),
                        "e2e_pct": e["diff"], "e2e_pct_lo": e["diff_lo"], "e2e_pct_hi": e["diff_hi"],
                        "tokens": t["diff"], "tokens_lo": t["diff_lo"], "tokens_hi": t["diff_hi"]})  # fmt: skip
    return pd.DataFrame(out)


def verdict(lo: float, hi: float) -> str:
    """``higher`` / ``lower`` when a paired 95% interval excludes 0, else ``within noise``."""
    return "higher" if lo > 0 else "lower" if hi < 0 else "within noise"


def paired_table(rows: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """Per (chooser, condition, adaptive method, fixed limit): end-to-end % and tool tokens per request of the
    adaptive method minus the limit's, paired over the queries, with 95% bootstrap intervals and verdicts."""
    from experiments.report.tables import diff_interval, query_resamples

    out = []
    for (chooser, cond), g in rows.groupby(["chooser", "condition"], sort=False):
        e2e = g.pivot(index="qid", columns="method", values="e2e").astype(np.float64)
        tok = g.pivot(index="qid", columns="method", values="tokens").astype(np.float64)
        if e2e.isna().to_numpy().any():
            raise ValueError(f"{cond}: every method must be scored on the same queries")
        idx = query_resamples(len(e2e), n_boot, seed)
        methods = list(dict.fromkeys(g["method"]))
        for a in (m for m in methods if m in ADAPTIVE):
            for f in (m for m in methods if m not in ADAPTIVE):
                e = diff_interval(100.0 * (e2e[a] - e2e[f]).to_numpy(), idx)
                t = diff_interval((tok[a] - tok[f]).to_numpy(), idx)
                out.append({"chooser": chooser, "condition": cond, "method": a, "fixed": f, "n_queries": len(e2e),
                            "e2e_diff": e["diff"], "e2e_diff_lo": e["diff_lo"], "e2e_diff_hi": e["diff_hi"],
                            "e2e_verdict": verdict(e["diff_lo"], e["diff_hi"]), "tokens_diff": t["diff"],
                            "tokens_diff_lo": t["diff_lo"], "tokens_diff_hi": t["diff_hi"],
                            "tokens_verdict": verdict(t["diff_lo"], t["diff_hi"])})  # fmt: skip
    return pd.DataFrame(out)


# ----------------------------------------------------------------------------------------------- command


def cmd_toolsearch_pays(args: ToolsearchPaysArgs, command: str) -> int:
    """``shortlist toolsearch pays`` (module docstring): always with the local chooser's own tokenizer."""
    from choosers.local import load_tokenizer

    print("loading the local chooser's tokenizer (Gemma 3 270M)", file=sys.stderr)
    counter = load_tokenizer(cache_dir=args.cache_dir)  # ChooserError (a ValueError) with the reason: no fallback
    out = run_pays(args, command, counter, counter.identity)
    print(f"wrote {out}/README.md, methods.csv, paired.csv, per_query.csv, figures/pays.png and manifest.json")
    return 0


def run_pays(args: ToolsearchPaysArgs, command: str, count: TokenCount, tokenizer: dict[str, str]) -> Path:
    """The command with the token counter ``count`` (named by ``tokenizer``): every table, the figure, the page
    and the manifest, written into ``args.out`` at once (files there that this command does not write, such as
    ``default-policy/``, stay)."""
    from experiments.io import staged_folder, write_manifest
    from experiments.report.pays_page import write_pays_report

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
        inputs.update(req.inputs_sha256)
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
