"""``shortlist toolsearch pays --tools TOOLS --log LOG``: does the tool search pay on your registry, your agent's
log and your LLM? The question ``shortlist toolsearch pays`` answers on BFCL, asked of your own data.

1. **The recommended searcher**: ``shortlist recommend --tools TOOLS --log LOG --scorer S`` (the command itself, in a
   child process, into ``RUNS/recommend-<scorer>``: :func:`run_recommend`) trains every kind
   on its training split and saves the searcher of the kind ``auto`` picks on the training requests alone.
2. **The requests judged**: its test split, never trained on nor used to pick (the recommended run's test query ids,
   checked against the digest its manifest records). Each request ranks the whole registry with that searcher, the
   tool search's own path, and K comes from that searcher (``recommended``), from the policy shipped for the scorer
   (``default``: trained on the benchmarks, never on your log; its ranking checked to be the same) and from the fixed
   limits (``--fixed``); every K capped at ``--max-k``.
3. **The chooser** (``--chooser``: the local LM, your OpenAI-compatible endpoint, or the simulated stand-in, which
   is no LLM) is asked once per (request, K) that some method shows and whose top K holds a tool the agent called:
   a top K without one is a miss whatever it would answer. Answers are cached (a rerun asks nothing) and written as
   ``choices.csv``.
4. **Per request and method**: end to end (a tool the agent called was shown and chosen; when it called several,
   any of them counts) and tool-definition tokens (the shown tools' OpenAI ``tools`` array, counted with the local
   chooser's tokenizer), with paired 95% bootstrap intervals over the requests: the tables of ``shortlist toolsearch
   pays`` (:mod:`experiments.report.pays_tables`), the page :func:`experiments.report.pays_page.write_pays_log_report`.

``--out`` never replaces the results of other inputs (another registry, log, scorer or chooser): it is refused.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from experiments.downstream_choices import DownstreamQuery
    from experiments.options import ToolsearchPaysArgs
    from experiments.report.pays_tables import TokenCount

#: What identifies a pays on your data: another value of any of these is another result, never overwritten.
IDENTITY_KEYS = ("tools_sha256", "log_sha256", "scorer", "chooser_runtime", "chooser_model")


def identity(args: ToolsearchPaysArgs, chooser: Any) -> dict[str, str]:
    """The inputs that make a pays on your data what it is (:data:`IDENTITY_KEYS`)."""
    from benchmarks.corpus import sha256_file

    return {"tools_sha256": sha256_file(args.tools), "log_sha256": sha256_file(args.log), "scorer": args.scorer,
            "chooser_runtime": chooser.runtime_id, "chooser_model": chooser.model_id}  # fmt: skip


def files_sha256(folder: Path) -> dict[str, str]:
    """sha256 of every file of ``folder`` (relative POSIX paths, sorted)."""
    from benchmarks.corpus import sha256_file

    return {p.relative_to(folder).as_posix(): sha256_file(str(p)) for p in sorted(folder.rglob("*")) if p.is_file()}


def run_recommend(
    tools: Path, log: Path, scorer: str, args: ToolsearchPaysArgs, out: Path, label: str
) -> tuple[Any, dict[str, Any]]:
    """``shortlist recommend --tools TOOLS --log LOG --scorer SCORER --seeds <args.seed> [--set ...] --out OUT``:
    the command itself, in a child process of this Python (a command never imports another), its table and notes
    shown as this command's progress. Returns its saved searcher and what the report says of it (the kind `auto`
    chose and how, the recommended run's condition record, the searcher's files and the command).

    Raises:
        ValueError: recommend failed (its last line of error, after ``label``), or saved no auto policy.
    """
    import subprocess

    from agents.auto import AutoPolicy
    from shortlist_depth.toolsearch import ToolSearch

    flags = ["--tools", str(tools), "--log", str(log), "--scorer", scorer, "--seeds", str(args.seed)]
    if args.train_frac is not None:
        flags += ["--train-frac", str(args.train_frac)]
    flags += [x for item in args.set for x in ("--set", item)]
    folders = [
        x for flag, v in (("--data-dir", args.data_dir), ("--cache-dir", args.cache_dir)) if v for x in (flag, v)
    ]
    argv = [sys.executable, "-m", "experiments.cli", "recommend", *flags, *folders, "--out", str(out), "--no-progress"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:  # its error once, in this command's one line
        print(done.stdout, end="", file=sys.stderr)
        why = (done.stderr.strip().splitlines() or ["no message"])[-1].removeprefix("shortlist: error: ")
        raise ValueError(f"{label}`shortlist recommend --tools {tools} --log {log}` failed: {why}")
    print(done.stdout + done.stderr, end="", file=sys.stderr)  # recommend's table and notes: this command's progress
    search = ToolSearch.load(out / "searcher", cache_dir=args.cache_dir)
    auto = search.policy.policy  # an AutoPolicy: the kind it chose on the log's training part, and how
    if not isinstance(auto, AutoPolicy):
        raise ValueError(f"{out / 'searcher'}: recommend saved a {search.policy.method} searcher, not its auto policy")
    condition = json.loads((out / "recommended" / "manifest.json").read_text(encoding="utf-8"))["condition"]
    info = {"method": search.policy.method, "kind_chosen": auto.chosen, "selection": auto.selection,
            "condition": condition, "searcher_files_sha256": files_sha256(out / "searcher"),
            "command": f"shortlist recommend --tools {tools.name} --log {log.name} --scorer {scorer} --seeds "
                       f"{args.seed}" + "".join(f" --set {s}" for s in args.set)}  # fmt: skip
    return search, info


def check_out_is_ours(out: Path, mine: dict[str, str]) -> None:
    """Refuse an ``--out`` holding another command's results, or a pays of other inputs (:data:`IDENTITY_KEYS`).

    Raises:
        ValueError: naming the folder and what differs.
    """
    path = out / "manifest.json"
    if not out.exists():
        return
    if not path.is_file():
        other = sorted(p.name for p in out.iterdir() if p.name != "runs")  # (runs/: an earlier try's recommend)
        if other:
            raise ValueError(f"--out {out}: holds files that are not a pays of yours ({', '.join(other[:3])}); give "
                             "another --out (it is left as it is)")  # fmt: skip
        return
    made = json.loads(path.read_text(encoding="utf-8"))
    theirs = made.get("identity")
    if not isinstance(theirs, dict):
        raise ValueError(f"--out {out}: holds another command's results ({made.get('command', 'no command')!r}); "
                         "give another --out")  # fmt: skip
    differ = [k for k in IDENTITY_KEYS if theirs.get(k) != mine[k]]
    if differ:
        what = ", ".join(f"{k} {theirs.get(k)!r} -> {mine[k]!r}" for k in differ)
        raise ValueError(f"--out {out}: holds the pays of other inputs ({what}); give another --out")


def judged_qids(recommended: Path, condition: dict[str, Any]) -> tuple[str, list[str]]:
    """The recommended run's condition name and its test query ids, in the split's order, checked against its
    manifest's digest.

    Raises:
        ValueError: the run's rows and its manifest disagree (a run edited or of another split).
    """
    import pandas as pd

    from benchmarks.split import sha_lines

    rows = pd.read_csv(recommended / "per_query.csv", dtype={"qid": str})
    qids = list(dict.fromkeys(rows["qid"]))
    if sha_lines(qids) != condition.get("test_qids_sha256") or len(qids) != condition.get("n_test"):
        raise ValueError(f"{recommended / 'per_query.csv'}: its {len(qids)} test queries are not the split its "
                         "manifest records (test_qids_sha256): rerun `shortlist recommend`")  # fmt: skip
    return str(rows["condition"].iloc[0]), qids


def ranked_requests(search: Any, texts: Sequence[str], label: str) -> tuple[list[list[tuple[str, float]]], list[int]]:
    """Each request's whole ranking by ``search`` ((tool, score), best first) and the K its tool search shows with no
    upper bound, from the one search of the whole ranking: its ``why`` (the policy's K and whether every score tied)
    through :func:`shortlist_depth.toolsearch.shown_k`, the rule :meth:`~shortlist_depth.ToolSearch.search` applies,
    with ``max_k=None``."""
    from shortlist_depth.toolsearch import shown_k

    n = len(search.tools)
    whole = search.search_many(list(texts), min_k=n, max_k=n)
    if any(len(s.names) != n for s in whole):
        raise ValueError(f"{label}: a request did not rank the whole registry of {n} tools")
    shown = [shown_k(int(s.why["policy_k"]), bool(s.why["tied"]), 1, n, n) for s in whole]  # as max_k=None shows
    return [list(zip(s.names, map(float, s.scores), strict=True)) for s in whole], shown


def read_inputs(args: ToolsearchPaysArgs) -> tuple[dict[str, Any], dict[str, Any]]:
    """Your registry (tool name -> tool) and your log's requests (query id -> record), read as recommend reads them
    (:mod:`benchmarks.toollog`)."""
    from benchmarks.toollog import read_tool_log
    from benchmarks.tools import read_tools_file

    tools = {t.name: t for t in read_tools_file(args.tools)}
    return tools, {r.qid: r for r in read_tool_log(args.log, list(tools)).records}


def log_queries(
    tools: dict[str, Any], records: dict[str, Any], recommended: Any, default: Any, qids: Sequence[str], log: str
) -> tuple[list[DownstreamQuery], dict[str, list[int]]]:
    """The test requests as the chooser sees them (:class:`~experiments.downstream_choices.DownstreamQuery`: the
    text, the registry in the recommended searcher's ranking, the ranks of the tools the agent called), each method's
    K per request (``recommended``, ``default``), once the default's ranking is checked to be the recommended one's.

    Raises:
        ValueError: a test request is not in the log any more, or the default policy's searcher ranks a request
            differently (it would show other tools).
    """
    from choosers import Tool
    from experiments.downstream_choices import DownstreamQuery

    missing = [q for q in qids if q not in records]
    if missing:
        raise ValueError(f"{log}: no request {missing[0]!r} of recommend's test split: the log changed since, or "
                         "that recommendation named requests by their line (L<line>; they are named by their text "
                         "now): give another --out")  # fmt: skip
    texts = [records[q].text for q in qids]
    rankings, rec_k = ranked_requests(recommended, texts, "recommended")
    other, def_k = ranked_requests(default, texts, "default")
    for q, a, b in zip(qids, rankings, other, strict=True):
        first = next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x[0] != y[0]), None)
        if first is not None:
            raise ValueError(f"request {q}: the default policy's tool search ranks it differently from the "
                             f"recommended one (rank {first + 1}: {b[first][0]!r}, not {a[first][0]!r})")  # fmt: skip
    queries = []
    for q, ranking in zip(qids, rankings, strict=True):
        rank = {name: i + 1 for i, (name, _) in enumerate(ranking)}
        gold = sorted(rank[t] for t in records[q].gold)
        ranked = [Tool(n, tools[n].description, tools[n].parameters, s) for n, s in ranking]
        queries.append(DownstreamQuery(q, records[q].text, ranked, gold[0], ranking[gold[0] - 1][0], tuple(gold)))
    return queries, {"recommended": rec_k, "default": def_k}


def depth_frame(condition: str, scorer: str, queries: Sequence[DownstreamQuery], ks: dict[str, list[int]],
                policies: dict[str, str], fixed: Sequence[int]) -> pd.DataFrame:  # fmt: skip
    """One row per (method, request): the policy the method names and the K it chose (before the cap)."""
    import pandas as pd

    sizes = [len(q.ranked) for q in queries]  # a limit beyond the registry shows the whole registry
    depths = {**ks, **{f"fixed-{k}": [min(k, n) for n in sizes] for k in fixed}}
    names = {**policies, **{f"fixed-{k}": f"fixed-{k}" for k in fixed}}
    return pd.concat(
        [pd.DataFrame({"condition": condition, "scorer": scorer, "method": m, "policy": names[m],
                       "qid": [q.qid for q in queries], "gold_rank": [q.gold_rank for q in queries],
                       "policy_k": k}) for m, k in depths.items()],
        ignore_index=True,
    )  # fmt: skip


def asked_depths(depths: pd.DataFrame, cap: int) -> dict[str, list[int]]:
    """Per request, the Ks some method shows (each capped at ``cap``): the only prefixes the chooser is asked."""
    shown = depths.assign(k=depths["policy_k"].clip(upper=cap))
    return {str(q): sorted({int(k) for k in g["k"]}) for q, g in shown.groupby("qid", sort=False)}


def forget(chooser: Any, choices: pd.DataFrame) -> int:
    """Remove ``choices``' answers from the chooser's cache (an endpoint that answered none of them with a tool:
    once fixed, it must be asked again); returns how many were there."""
    cache = getattr(chooser, "cache", None)
    if cache is None:
        return 0
    rows = zip(choices["runtime"], choices["model"], choices["digest"], strict=True)
    return sum(cache.drop(cache.key(str(runtime), str(model), str(digest))) for runtime, model, digest in rows)


def run_pays_log(args: ToolsearchPaysArgs, command: str, count: TokenCount, tokenizer: dict[str, str]) -> Path:
    """The command on your data (module docstring) with the token counter ``count`` (named by ``tokenizer``):
    every table, the figure, the page and the manifest, written into ``args.out`` at once (its ``runs/`` stays)."""
    from choosers import ChoiceCache, make_chooser
    from experiments.downstream_choices import choices_table
    from experiments.io import staged_folder, write_csv, write_manifest
    from experiments.report.pays_page import write_pays_log_report
    from experiments.report.pays_tables import method_table, paired_table, pays_rows, token_counter
    from shortlist_depth.toolsearch import ToolSearch

    t0 = time.perf_counter()
    out = Path(args.out)
    runs = Path(args.runs_dir) if args.runs_dir else out / "runs"
    tools, records = read_inputs(args)
    options = args.chooser_options(args.cache_dir)
    if args.chooser == "simulated":  # its model of an LLM needs the tools called; the real choosers never see them
        options["gold"] = {r.text: list(r.gold) for r in records.values()}
    chooser = make_chooser(args.chooser, cache=ChoiceCache(cache_dir=args.cache_dir), **options)  # fails fast
    with contextlib.closing(chooser) if hasattr(chooser, "close") else contextlib.nullcontext():
        mine = identity(args, chooser)
        check_out_is_ours(out, mine)
        folder = runs / f"recommend-{args.scorer}"
        search, rec = run_recommend(Path(args.tools), Path(args.log), args.scorer, args, folder, "")
        condition = rec.pop("condition")
        name, qids = judged_qids(folder / "recommended", condition)
        qids = qids[: args.limit]
        default = ToolSearch.from_file(args.tools, args.scorer, None, cache_dir=args.cache_dir)
        queries, ks = log_queries(tools, records, search, default, qids, args.log)
        policies = {"recommended": search.policy.method, "default": default.policy.method}
        depths = depth_frame(name, args.scorer, queries, ks, policies, args.fixed)
        print(f"{name}: {len(queries)} test requests of {condition.get('n_queries')} (recommend's test split); "
              f"asking {chooser.name}", file=sys.stderr)  # fmt: skip
        choices = choices_table(chooser, queries, asked_depths(depths, args.max_k), progress=True)
    statuses = {str(k): int(v) for k, v in choices["status"].value_counts().items()} if len(choices) else {}
    if len(choices) and not statuses.get("ok"):
        said = ", ".join(f"{n} {s}" for s, n in statuses.items())
        forgotten = forget(chooser, choices)  # a rerun once the endpoint is fixed asks again
        raise ValueError(f"{chooser.name}: called no listed tool on any of the {len(choices)} shortlists asked "
                         f"({said}): check --base-url and --model (these {forgotten} answers were not kept; nothing "
                         "was written to --out)")  # fmt: skip
    if statuses.get("ok", 0) < len(choices):
        print(f"shortlist: note: {chooser.name} called no listed tool on {len(choices) - statuses.get('ok', 0)} of "
              f"{len(choices)} shortlists ({', '.join(f'{n} {s}' for s, n in statuses.items())}): each a miss",
              file=sys.stderr)  # fmt: skip
    choices = choices.assign(condition=name, chooser=chooser.name)
    tokens = token_counter({name: {q.qid: q for q in queries}}, count)
    rows = pays_rows(depths, choices, tokens, args.max_k).assign(chooser=args.chooser, chooser_name=chooser.name)
    methods, paired = method_table(rows, args.n_boot, args.seed), paired_table(rows, args.n_boot, args.seed)
    about = {
        "recommended": {**rec, "n_train": condition.get("n_train"), "n_test": condition.get("n_test"),
                        "n_queries": condition.get("n_queries"), "skipped": condition.get("skipped", {}),
                        "duplicates_merged": condition.get("duplicates_merged", 0)},
        "default": {"method": default.policy.method, "trained_on": (default.policy.config.get("provenance") or {})
                    .get("trained_on", {})},
        "chooser": chooser.name, "asked": len(choices), "statuses": statuses,
        "simulated": args.chooser == "simulated",
        "cached": int(choices["cached"].sum()) if len(choices) else 0,
    }  # fmt: skip
    with staged_folder(out, merge=True, owned=("figures",)) as tmp:
        write_csv(choices, tmp / "choices.csv")
        write_pays_log_report(tmp, rows, methods, paired, about, tokenizer, command, args.max_k, name)
        write_manifest(tmp / "manifest.json", command=command, identity=mine, tokenizer=tokenizer, policies=about,
                       inputs_sha256={args.tools: mine["tools_sha256"], args.log: mine["log_sha256"]},
                       cap=args.max_k, options=asdict(args), wall_seconds=time.perf_counter() - t0)  # fmt: skip
    return out
