"""``shortlist recommend``: what depth rule should I use on my retriever? One command, one process.

On the user's data (a TREC run and qrels, a BEIR folder, an agent's tool registry and a log of its requests, or a
built-in benchmark), every registered kind that
applies is trained on the training split and scored on the test split, with the same split for all (fixed K
over the study's grid, the gap rules, the threshold, top-p, greedy K, the Choppy-style model, the cut-off, the
posterior model, tabular Q, DQN, the limits as references, and ``auto``: the kind picked on an inner validation
split of the training queries, never on test). Each kind is trained once, with one seed, on one train/test split: a
decision, not a study, so several ``--seeds`` or ``--split-seeds`` are refused before anything runs (their spread
is ``shortlist train``'s and ``compare``'s). Prints one ranked table (net reward and its paired interval
against the best, the cost-free mean reward and BoR bits, which can rank methods differently, found %, mean /
median / p90 K, whole-list %), says which policy it recommends and why (``auto``'s pick, made without seeing the
test queries) and whether that pick is also the best on test, and copies the recommended run directory to
``OUT/recommended`` ready for ``shortlist predict``. With
``--tools TOOLS --log LOG`` it also saves a searcher ready to serve (``OUT/searcher``: the registry, the scorer and
that policy; :class:`shortlist_depth.ToolSearch`). On the user's own data the console then says what was skipped,
what repeated and, for a test set under 30 queries, how wide the intervals are.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from agents.method import MethodSpec
from experiments.options import CommonArgs, LearnArgs, RecommendArgs, source_options, yours_name
from experiments.report.markdown import fmt
from experiments.report.page import MAX_TITLE, Page, Paragraph, Section, Table, block_lines, write_page


def recommend_methods(benchmark: str) -> list[MethodSpec]:
    """Every registered kind that applies to ``benchmark``: the learned ones and the peers with the BoR reward,
    fixed K on the study's grid, the limits as references."""
    from agents import registry
    from experiments.plan import FIXED_KS

    out = []
    for name, kind in registry.KINDS.items():
        if not kind.applies_to(benchmark):
            continue
        out += [MethodSpec(name, "bor", k) for k in FIXED_KS] if kind.name_field else [MethodSpec(name, "bor")]
    return out


def recommend_table(per_query: pd.DataFrame, agg: pd.DataFrame, n_boot: int = 10_000) -> pd.DataFrame:
    """Methods ranked by mean test net reward (limits last: they read labels), each with the paired difference
    from the best policy (a method that reads no labels), the cost-free mean reward, BoR bits (the aggregate
    ``log2(mean found / mean P_rand)``, ``bor_bits`` of :func:`agents.evaluation.summary_row`: it can rank methods
    otherwise than the mean reward, so both are shown; the ranking stays on the net reward) and the depth spread.
    BoR bits are NaN where no test query was found (``log2 0``: no finite value), never infinite."""
    from agents.evaluation import finite_or_nan
    from experiments.report.tables import JUDGED, JUDGED_ROW, diff_interval, unit_resamples

    a = agg.assign(_limit=agg["group"] == "limit").sort_values(["_limit", JUDGED], ascending=[True, False])
    best = a[~a["_limit"]].iloc[0]["method"]
    wide = per_query.assign(split_seed=0).pivot_table(index="method", columns=["split_seed", "qid"], values=JUDGED_ROW)
    idx = unit_resamples(wide.columns.get_level_values(0).to_numpy(), n_boot, 0)
    rows = []
    for rank, (_, r) in enumerate(a.iterrows(), start=1):
        d = diff_interval((wide.loc[r["method"]] - wide.loc[best]).to_numpy(), idx)
        spread = ("found_pct", "mean_k", "median_k", "p90_k", "whole_list_pct")
        rows.append({"rank": rank, "method": r["method"], "group": r["group"], JUDGED: r[JUDGED],
                     "diff_to_best": d["diff"], "diff_lo": d["diff_lo"], "diff_hi": d["diff_hi"],
                     "mean_reward": r["mean_reward"], "bor_bits": finite_or_nan(float(r["bor_bits"])),
                     **{c: r[c] for c in spread}})  # fmt: skip
    return pd.DataFrame(rows)


def table_lines(t: pd.DataFrame) -> Table:
    """The page's and the console's table of :func:`recommend_table`; a BoR bits of no finite value shows ``-``
    (:func:`bits_note` says why)."""
    rows = [[str(r["rank"]), r["method"], r["group"], f"{r['mean_reward_net']:.3f}",
             f"{r['diff_to_best']:+.3f} [{r['diff_lo']:+.3f}, {r['diff_hi']:+.3f}]", f"{r['mean_reward']:.3f}",
             fmt(r["bor_bits"]), fmt(r["found_pct"], nd=1), fmt(r["mean_k"]),
             f"{fmt(r['median_k'], nd=0)} / {fmt(r['p90_k'], nd=0)}",
             fmt(r["whole_list_pct"], nd=1)] for _, r in t.iterrows()]  # fmt: skip
    header = ["#", "method", "group", "net reward", "minus the best [95% paired]", "mean reward", "BoR bits",
              "found %", "mean K", "median / p90 K", "whole list %"]  # fmt: skip
    return Table(header, rows)


def unfound_line(t: pd.DataFrame) -> str:
    """The methods whose BoR bits have no finite value (no test query found), as a sentence; empty when none."""
    none = list(t.loc[t["bor_bits"].isna(), "method"])
    if not none:
        return ""
    return (f'BoR bits shown "-" (empty in recommend.csv): {", ".join(none)} found no test query, and log2 of a zero '
            "found rate has no finite value.")  # fmt: skip


def bits_note(t: pd.DataFrame) -> str:
    """What the page says of the BoR bits column: what it is, that it can rank methods otherwise than the mean
    reward (SPEC: report both), and the methods shown ``-`` (:func:`unfound_line`)."""
    said = ('"BoR bits" is the aggregate log2(mean found / mean P_rand) over the test queries, beside the mean '
            "reward (the mean per-query BoR reward, cost-free): the two can rank methods differently. The table and "
            "the recommendation go by the net reward.")  # fmt: skip
    return f"{said} {unfound_line(t)}".strip()


def recommend_title(condition: str) -> str:
    """The page's title: the data the rule is for (shortened to the longest title a page may have)."""
    title = f"Rule for {condition}"
    return title if len(title) <= MAX_TITLE else title[: MAX_TITLE - 3] + "..."


def verdict(t: pd.DataFrame, auto_run: Path) -> tuple[str, str]:
    """(the recommended method, the lines saying why and how it fared on test)."""
    auto = json.loads((auto_run / "agent.json").read_text())["auto"]
    spec = MethodSpec(auto["chosen"], auto["reward"]) if not MethodSpec(auto["chosen"]).kind.name_field else None
    chosen = spec.name if spec is not None else auto["chosen"]
    val = auto["validation_net_reward"]
    delivered = f"{auto['reward']}-auto"  # the policy copied to recommended/: the chosen kind refitted by `auto`
    best = t[t["group"] != "limit"].iloc[0]
    row = t.set_index("method").loc[delivered] if delivered in set(t["method"]) else None
    how = auto.get("selection", "split")
    on = "an inner validation split" if how == "split" else f"{how} (a small training set)"
    lines = [
        f"Recommended: **{chosen}**. Chosen by `auto` on {on} of the training queries (never the "
        f"test queries): validation net reward "
        + ", ".join(f"{k} {v:.3f}" for k, v in sorted(val.items(), key=lambda kv: -kv[1]))
        + f"; then refitted on every training query (`{delivered}`, the policy saved)."
    ]
    if row is not None:
        same = delivered == best["method"]
        tie = row["diff_lo"] <= 0 <= row["diff_hi"]
        lines.append(
            f"On the test split `{delivered}` ranks #{int(row['rank'])}: "
            + (
                "it is also the best there."
                if same
                else f"the best there is {best['method']} ({best['mean_reward_net']:.3f}); `{delivered}` is "
                f"{row['diff_to_best']:+.3f} [{row['diff_lo']:+.3f}, {row['diff_hi']:+.3f}] from it"
                + (" (within noise)." if tie else ".")
            )  # fmt: skip
            + f" Typical depth: median {fmt(row['median_k'], nd=0)}, 90th percentile {fmt(row['p90_k'], nd=0)}."
        )
    return chosen, " ".join(lines)


def _digests(options: dict) -> dict:
    """The inputs' sha256 among a cell's source options (a run's and its qrels', a BEIR folder's files', a log's
    and its registry's), wherever the files are."""
    return {k: v for k, v in options.items() if k.endswith("_sha256") or k.startswith("sha256:")}


def check_out_is_ours(out: Path, condition: str, options: dict | None = None) -> None:
    """ValueError when ``out`` holds a recommendation made from other inputs: another condition (for a user's run,
    BEIR folder or log its name carries a hash of the input files), or other input contents under the same name (the
    sha256 digests in ``options``), so a rerun never replaces it."""
    config = out / "recommended" / "config.json"
    if out.is_dir() and not config.is_file():  # not a recommendation: only an earlier try's runs/ may be there
        other = sorted(p.name for p in out.iterdir() if p.name not in ("runs", "recommend.csv", "README.md"))
        if other or ((out / "README.md").is_file() and not (out / "recommend.csv").is_file()):
            shown = ", ".join(other[:3]) or "README.md"
            raise ValueError(f"--out {out}: holds files that are not a recommendation ({shown}): choose another --out "
                             "(nothing was overwritten)")  # fmt: skip
    if config.is_file():
        made = json.loads(config.read_text(encoding="utf-8"))
        made_for = made.get("condition")
        if made_for != condition:
            raise ValueError(
                f"{out} holds the recommendation for {made_for}, made from other inputs than {condition}: "
                "choose another --out (nothing was overwritten)"
            )
        if options is not None and _digests(made.get("options") or {}) != _digests(options):
            where = (made.get("options") or {}).get("beir_dir") or made_for
            raise ValueError(
                f"{out} holds the recommendation for {made_for} made from other input files ({where}, by their "
                "sha256): choose another --out (nothing was overwritten)"
            )


#: The fewest judged test queries a ranking can be made on (paired intervals need two), and training queries the
#: kinds that fit on an inner split of them need.
MIN_TEST, MIN_TRAIN = 2, 2


def interval_width(t: pd.DataFrame) -> float:
    """The median width of the paired 95% intervals of the table's policies (the best's, 0 by construction, and
    the limits' left out): how far apart two policies must be for the test set to tell them apart."""
    rows = t[(t["group"] != "limit") & (t["rank"] > 1)]
    return float((rows["diff_hi"] - rows["diff_lo"]).median()) if len(rows) else 0.0


def print_data_notes(cond_meta: dict, n_test: int, width: float) -> None:
    """The notes on the user's own data (:func:`benchmarks.conditions.data_notes`) on stderr, after the table."""
    from benchmarks.conditions import data_notes

    sys.stdout.flush()
    for line in data_notes(cond_meta, n_test, "test", width):
        print(f"shortlist: {line}", file=sys.stderr)


def deployable(runs: list[Path], per_query: pd.DataFrame, t: pd.DataFrame, cells: list, ca: CommonArgs) -> list[str]:
    """Where a policy's test depths need what ``shortlist predict`` does not have: lines saying, for each policy of
    the table whose depths on the test queries differ when chosen from the scores alone (as ``predict`` and
    ``load_policy(...).depth`` choose them), on how many queries, and its net reward at those depths beside the
    table's. A guard: no policy reads a test query's R (its depths price the R fitted on the training queries,
    :func:`agents.base.assumed_relevant`), so it says nothing unless a policy reads another label. Empty when
    every test query has one relevant item (then nothing can differ), or when the lists carry a second scorer's
    scores (``predict`` reads one)."""
    from agents import score_depths
    from agents.trained import load_policy
    from experiments.runner import cell_condition

    c = cells[0]
    test = cell_condition(c, ca.data_dir, ca.cache_dir).test
    several = sum(q.n_relevant > 1 for q in test)
    if not several or any(q.aux_scores is not None for q in test):
        return []
    table = t.set_index("method")
    lines = []
    for run in runs:
        cfg = json.loads((run / "config.json").read_text(encoding="utf-8"))
        method = cfg["method"]
        if method not in table.index or table.loc[method, "group"] == "limit":
            continue
        policy = load_policy(run)
        k = policy.depths([q.scores for q in test], [q.n_candidates for q in test])
        evaluated = per_query[per_query["method"] == method].set_index("qid").loc[[q.qid for q in test], "k"]
        differ = int((k != evaluated.to_numpy()).sum())
        if not differ:
            continue
        net = float(score_depths(test, k, step_cost=policy.episode.step_cost)["reward_net"].mean())  # (as judged)
        lines.append(f"{method}: depths differ on {differ} of {len(test)} test queries; net reward at predict's "
                     f"depths {net:.3f} (table: {table.loc[method, 'mean_reward_net']:.3f})")  # fmt: skip
    if not lines:
        return []
    head = (f"{several} of the {len(test)} test queries have more than one relevant item, and these policies' "
            "test depths are not those `shortlist predict` (scores alone) gives: a policy read what predict does "
            "not have. As predict would cut the test queries:")  # fmt: skip
    return [head, *lines]


def yours_rows(paths: tuple[str, ...], run: str, cond: Any, cell: Any) -> tuple[pd.DataFrame, list[str]]:
    """Per-query rows of each of your truncated runs (``--yours``) on the test queries of ``cond`` (``--run``'s
    condition), method ``yours:<file stem>``, each query's K the length of its shortlist, scored and labelled as the
    runs of ``cell`` are (its condition, seed, buckets and episode's step cost: :func:`experiments.runner.run_cell`).
    Also the console's notes (the queries a file holds and the table does not score: of the training split, or
    without qrels).

    Raises:
        DataError: a file is not a run, names a query --run lacks, lacks a test query, or holds a shortlist that is
            not the top K of --run's ranking (naming the file, the query and the document).
    """
    import numpy as np

    from agents import score_depths
    from agents.evaluation import score_depths_multi
    from benchmarks.corpus import DataError
    from benchmarks.trec import rank_docs, read_run

    full = read_run(run)
    test, train = cond.test, {q.qid for q in cond.train}
    ranked = {q.qid: [d for d, _ in rank_docs(full[q.qid])] for q in test}
    frames, notes = [], []
    for path in paths:
        cut = read_run(path)
        unknown = [q for q in cut if q not in full]
        if unknown:
            raise DataError(f"{path}: query {unknown[0]!r} is not in --run {run}")
        depths = []
        for q in test:
            docs = [d for d, _ in cut.get(q.qid, [])]
            if not docs:
                raise DataError(f"{path}: no shortlist for test query {q.qid!r} (every test query needs one: a "
                                "shortlist shows at least one item)")  # fmt: skip
            top = set(ranked[q.qid][: len(docs)])
            stray = next((d for d in docs if d not in top), None)
            if stray is not None:
                raise DataError(f"{path}: query {q.qid!r}: {stray!r} is not among the top {len(docs)} of --run "
                                f"{run} (a shortlist is the top K of the run's ranking: score descending, ties by "
                                "docid)")  # fmt: skip
            depths.append(len(docs))
        score = score_depths_multi if any(q.n_relevant > 1 for q in test) else score_depths  # as agents.evaluate
        rows = score(test, np.asarray(depths, dtype=np.int64), cell.buckets or cond.buckets, cell.episode.step_cost)
        labels = {"condition": cell.condition, "method": f"yours:{yours_name(path)}", "seed": cell.seed}
        for name, value in reversed(labels.items()):  # (as experiments.runner.labelled_rows labels a run's rows)
            rows.insert(0, name, value)
        frames.append(rows)
        trained, unjudged = len(set(cut) & train), len(set(cut) - train - set(ranked))
        if trained:
            notes.append(f"--yours {path}: {trained} queries of the training split not scored (the table is the test "
                         f"split's {len(test)})")  # fmt: skip
        if unjudged:
            notes.append(f"--yours {path}: {unjudged} queries without qrels not scored")
    return pd.concat(frames, ignore_index=True), notes


def read_yours(ra: RecommendArgs, cell: Any, ca: CommonArgs) -> tuple[pd.DataFrame | None, list[str]]:
    """The per-query rows of ``--yours`` (:func:`yours_rows`, on the test split of the condition of ``cell``, one
    of the table's cells) and the console's notes; (None, []) without ``--yours``. Called before anything is
    trained: the files need only ``--run``, its qrels and the split, so a file that is not a run, lacks a test query
    or is not the top K of the run is refused in seconds with ``--out`` as it was (it was minutes later, after every
    kind had trained, leaving their run folders and no page)."""
    from experiments.runner import cell_condition

    if not ra.yours:
        return None, []
    assert ra.run is not None  # (--yours goes with --run: RecommendArgs)
    return yours_rows(ra.yours, ra.run, cell_condition(cell, ca.data_dir, ca.cache_dir), cell)


def with_yours(per_query: pd.DataFrame, agg: pd.DataFrame, mine: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The table's per-query rows and aggregate with the rows of ``--yours`` (``mine``: :func:`read_yours`)."""
    from agents.evaluation import summarise
    from experiments.report.tables import aggregate

    agg = pd.concat([agg, aggregate(summarise(mine), mine).assign(group="yours")[agg.columns]], ignore_index=True)
    return pd.concat([per_query, mine], ignore_index=True), agg


def yours_line(paths: tuple[str, ...], t: pd.DataFrame) -> str:
    """What the page says of the ``yours:`` rows: whose they are, how they were judged, where they rank."""
    rows = t[t["group"] == "yours"]
    ranks = "; ".join(
        f"`{r['method']}` ranks #{int(r['rank'])}, {r['diff_to_best']:+.3f} [{r['diff_lo']:+.3f}, {r['diff_hi']:+.3f}] "
        "from the best"
        for _, r in rows.iterrows()
    )
    files = ", ".join(f"`{p}`" for p in paths)
    return (f"Rows `yours:<name>` are your shortlists ({files}: each query's K is the length of its shortlist), "
            "judged on the same test queries with the same net reward as every kind; they were not trained here. "
            f"{ranks}.")  # fmt: skip


def save_searcher(ra: RecommendArgs, recommended: Path, out: Path, ca: CommonArgs) -> Path:
    """``--tools/--log``: the recommended policy with the registry and its scorer, saved as a searcher that
    ``shortlist search --searcher OUT/searcher`` and ``ToolSearch.load`` serve."""
    from shortlist_depth.toolsearch import ToolSearch

    assert ra.tools
    scorer = f"{ra.scorer}-hybrid" if ra.variant == "hybrid" else ra.scorer
    search = ToolSearch.from_file(ra.tools, scorer, recommended, cache_dir=ca.cache_dir)
    saved = search.save(out / "searcher", overwrite=True)
    if ra.publish is not None:  # the served folder, replaced at once (servers.reload picks it up)
        from experiments.options import check_publish

        check_publish(ra.publish, ra.out)  # (again: a folder filled since the command started)
        search.save(ra.publish, overwrite=True)
    return saved


def cmd_recommend(ra: RecommendArgs, la: LearnArgs, ca: CommonArgs, command: str) -> int:
    """``shortlist recommend`` (module docstring)."""
    from experiments.io import atomic_write_csv, staged_folder
    from experiments.pipeline import check_split, fixed_within_lists, inputs_label, run_with
    from experiments.plan import PLANS, base_plan, cells_for
    from experiments.report.tables import aggregate_with_groups
    from experiments.runner import collect_runs

    if len(la.seeds) > 1:  # a decision, not a study: one seed (never a silent first of several)
        raise ValueError(f"recommend trains each kind once, with one seed: give one --seeds value, not "
                         f"{' '.join(map(str, la.seeds))} (a spread over seeds: shortlist train or "
                         "compare)")  # fmt: skip
    if la.split_seeds is not None and len(la.split_seeds) > 1:  # (its table is of one test split)
        raise ValueError(f"recommend ranks on one train/test split: give one --split-seeds value, not "
                         f"{' '.join(map(str, la.split_seeds))}")  # fmt: skip
    options = source_options(ra)
    cid = ra.condition_id
    plan = PLANS.get(cid.name) or base_plan(cid)
    every = recommend_methods(cid.benchmark)
    cells = cells_for([plan], la.seeds, {plan.name: every}, learning=la.learning(), options=options)
    cells = fixed_within_lists(plan, every, cells, ca, refuse=False)  # (the grid's Ks above your lists' size: said)
    out = Path(ra.out)
    check_out_is_ours(out, cells[0].condition, dict(options))  # these inputs' name and contents
    inputs = inputs_label(ra, cid.name)
    check_split(cells[0], ca, inputs, "recommend", MIN_TRAIN, MIN_TEST)  # (to rank: paired intervals need 2 tests)
    mine, notes = read_yours(ra, cells[0], ca)  # (checked before training: its errors leave --out as it was)
    runs = run_with(cells, out, ca, command)
    per_query, summary, _ = collect_runs(runs)
    agg = aggregate_with_groups(summary, per_query)
    auto_run = next(r for r in runs if json.loads((r / "config.json").read_text())["agent"] == "auto")
    if mine is not None:  # your own depth rule's shortlists, judged beside every kind on the same test queries
        per_query, agg = with_yours(per_query, agg, mine)
    t = recommend_table(per_query, agg)
    condition = cells[0].condition  # (a user's data: its name carries the hash of its inputs)
    chosen, why = verdict(t, auto_run)
    caveat = deployable(runs, per_query, t, cells, ca)
    atomic_write_csv(t, out / "recommend.csv")
    recommended = out / "recommended"
    with staged_folder(recommended) as tmp:  # complete before the earlier recommendation of these inputs goes
        shutil.copytree(auto_run, tmp, dirs_exist_ok=True)
    searcher = save_searcher(ra, recommended, out, ca) if ra.source == "log" else None
    serve = (f"The searcher to serve (the registry, its scorer and this policy): `{searcher}` (`shortlist search "
             f"--searcher {searcher} 'request'`, `ToolSearch.load('{searcher}')`)." if searcher else "")  # fmt: skip
    page = Page(
        title=recommend_title(condition),
        group="comparison",
        lede="Which depth rule to use on this data: every kind that applies, trained on the training split and "
        "ranked on the test split.",
        answer=Section("", [Paragraph(why), table_lines(t), Paragraph(bits_note(t)),
                            *([Paragraph(yours_line(ra.yours, t))] if ra.yours else []),
                            *([Paragraph(caveat[0] + " " + "; ".join(caveat[1:]) + ".")] if caveat else [])]),
        sections=(
            Section("", [
                Paragraph(f"The recommended policy's run directory: `{recommended}` (`shortlist predict --run-dir "
                          f"{recommended} --run YOUR.run`)."),
                *([Paragraph(serve)] if serve else []),
                Paragraph(f"Command: `{command}`"),
            ]),
        ),
    )  # fmt: skip
    write_page(out, page)
    print("\n".join(block_lines(table_lines(t))))
    print(why.replace("**", ""))
    unfound = unfound_line(t)  # (the console's table shows "-" too)
    for line in [*caveat, *notes, *([unfound] if unfound else [])]:
        print(f"shortlist: note: {line}", file=sys.stderr)
    print(f"wrote {out}/README.md, recommend.csv and the recommended run directory {recommended}")
    if searcher is not None:
        print(f'wrote the searcher {searcher}: shortlist search --searcher {searcher} "your request"')
    if ra.publish is not None:
        print(f"published it into {ra.publish} (a server started with --searcher {ra.publish} --reload serves it)")
    if ra.source in ("run", "beir", "log"):  # the user's own data: what was skipped, how small the test set is
        cond = json.loads((auto_run / "manifest.json").read_text(encoding="utf-8"))["condition"]
        print_data_notes(cond, int(cond.get("n_test", 0)), interval_width(t))
    return 0
