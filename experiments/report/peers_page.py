"""The page of ``shortlist compare``: which depth rule to use, learned policies beside practitioners' peers
and the limits, judged on the net reward.

:func:`compare_tables` computes every table (DataFrames in, DataFrames out, no I/O); the ``*_lines``
functions build the page's blocks from them; :func:`write_compare_report` writes the tables, the figures and
then the page (README.md, titled by :func:`compare_title`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from agents import registry
from agents.method import MethodSpec, method_group
from benchmarks.names import ConditionId
from envs.features import EXAMINED_ONLY_SETS
from experiments.figures import bucket_figure, candidate_set_size, pareto_figure
from experiments.io import atomic_write_csv
from experiments.plan import BOR_AGENTS, COMPARE_BUCKET_METHODS, RL_AGENTS, SUPERVISED_AGENTS, condition_order
from experiments.report.causes import cause_section, cause_table, rl_goal, rl_goal_bullets, run_objectives
from experiments.report.markdown import (
    bucket_table,
    ci,
    fmt,
    observation_blocks,
    reads_second_scorer,
    runner_up_cells,
    same_as_best,
    signed_ci,
)
from experiments.report.page import MAX_TITLE, Block, Bullets, Figure, Page, Paragraph, Section, Table, write_page
from experiments.report.study import HYBRID_HEADING, HYBRID_METHODS, hybrid_blocks
from experiments.report.tables import (
    GOAL_BASE_CONDITIONS,
    GOAL_FRACTION_OF_ORACLE,
    GOAL_MIN_SIGNIFICANT,
    GOAL_TWO_SCORER_CONDITIONS,
    HYBRID_PAIRS,
    JUDGED,
    aggregate_with_groups,
    best_examined_only,
    best_methods,
    best_of,
    bucket_aggregate,
    condition_meta,
    dp_table,
    examined_view,
    goal_checks,
    limits_table,
    paired_conditions,
    paired_differences,
    scorer_strength,
    split_goal,
)
from experiments.runner import untag

GROUP_ORDER: dict[str, int] = {g: i for i, g in enumerate(registry.GROUPS)}
#: The tables of the comparison folder, in the order they are computed and written (``<name>.csv``).
COMPARE_TABLES = (
    "aggregate",
    "buckets_aggregate",
    "limits",
    "dp",
    "goals",
    "paired",
    "split_goal",
    "best",
    "rl_goal",
    "causes",
)
#: The title of a comparison whose learners read a named observation set (``--observation``).
OBSERVATION_TITLES = {
    "strict": "Examined items only",
    "score": "Score-only observation",
    "hybrid": "Hybrid observation",
}
#: How :func:`compare_title` names a condition's variant (a pattern of the variant -> words).
VARIANT_WORDS: tuple[tuple[str, str], ...] = (
    (r"top\d+", "top-N"),
    (r"sub\d+|full", "sub-registries"),
    (r"multi", "multi-tool"),
    (r"hybrid", "two scorers"),
    (r"richtext", "rich tool text"),
)


def _variant_words(condition: str) -> str:
    cid = ConditionId.parse(condition)
    if cid.benchmark == "synthetic":
        return "synthetic"
    if not cid.variant:
        return "a fused ranking" if cid.scorer == "fused" else "one scorer"
    return next((words for pattern, words in VARIANT_WORDS if re.fullmatch(pattern, cid.variant)), cid.variant)


def compare_title(conditions: Sequence[str], observation: str = "auto") -> str:
    """The comparison page's title, from what it compares: ``Which rule to use`` on the goal conditions,
    ``Examined items only`` (and the like) on a named observation set, else ``Peers on`` the kinds of condition
    (``Peers on top-N and multi-tool``)."""
    if observation != "auto":
        return OBSERVATION_TITLES.get(observation, f"Observation set {observation}")
    if set(conditions) <= {*GOAL_BASE_CONDITIONS, *GOAL_TWO_SCORER_CONDITIONS}:
        return "Which rule to use"
    kinds = list(dict.fromkeys(_variant_words(c) for c in conditions))
    title = "Peers on " + (f"{', '.join(kinds[:-1])} and {kinds[-1]}" if len(kinds) > 1 else kinds[0])
    return title if len(title) <= MAX_TITLE else f"Peers on {len(conditions)} conditions"


def compare_tables(
    per_query: pd.DataFrame,
    summary: pd.DataFrame,
    buckets: pd.DataFrame,
    runs: Sequence[Path],
    observation: str = "auto",
) -> dict[str, pd.DataFrame]:
    """Every table of the comparison (:data:`COMPARE_TABLES`), from the combined frames and the runs (their
    method names untagged on a named ``observation`` set, as the frames' are: :func:`experiments.runner.untag`)."""
    agg = aggregate_with_groups(summary, per_query)
    limits = limits_table(per_query)
    paired = paired_differences(per_query)
    objectives = untag(run_objectives(runs), observation)
    return {
        "aggregate": agg,
        "buckets_aggregate": bucket_aggregate(buckets),
        "limits": limits,
        "dp": dp_table(runs, summary),
        "goals": goal_checks(agg, limits),
        "paired": paired,
        "split_goal": split_goal(agg, paired, limits),
        "best": best_methods(per_query, agg),
        "rl_goal": rl_goal(agg, paired, objectives),
        "causes": cause_table(per_query, objectives),
    }


def write_compare_report(
    out: Path,
    per_query: pd.DataFrame,
    summary: pd.DataFrame,
    buckets: pd.DataFrame,
    runs: Sequence[Path],
    *,
    command: str,
    seeds: Sequence[int],
    observation: str = "auto",
) -> list[str]:
    """The comparison's tables (:func:`compare_tables`, and ``hybrid.csv`` when the learners read a second
    scorer and a two-scorer pair ran), figures and page (README.md) into ``out``; returns the conditions
    reported, in report order. ``observation`` is the observation set the learners read (on a named set the
    tables carry the learners' plain names and the page says which set)."""
    t = compare_tables(per_query, summary, buckets, runs, observation)
    for name in COMPARE_TABLES:
        atomic_write_csv(t[name], out / f"{name}.csv")
    examined = None
    if observation in EXAMINED_ONLY_SETS:
        examined = best_examined_only(per_query, t["aggregate"], observation)
        atomic_write_csv(examined, out / "examined.csv")
    hp = paired_conditions(per_query, HYBRID_PAIRS, HYBRID_METHODS) if reads_second_scorer(observation) else None
    if hp is not None and len(hp):
        atomic_write_csv(hp, out / "hybrid.csv")
    conds = condition_order(t["aggregate"]["condition"].unique())
    paretos = {cond: _figures(out, cond, per_query, summary, buckets, t["aggregate"]) for cond in conds}
    two_scorers = Section(HYBRID_HEADING)
    if hp is not None and len(hp):
        body, verdict = hybrid_blocks(hp, scorer_strength(per_query), condition_meta(runs[0].parent) if runs else {})
        two_scorers = Section(HYBRID_HEADING, [*body, verdict])
    page = Page(
        title=compare_title(conds, observation),
        group="comparison",
        lede="Learned policies beside practitioners' rules and the limits, judged on the net reward.",
        answer=Section(
            "",
            [
                *(examined_lines(examined, t["aggregate"], observation) if examined is not None else []),
                *answer_lines(t["best"], t["split_goal"], t["paired"], every=examined is not None),
                *rl_goal_bullets(t["rl_goal"], t["causes"]),
            ],
        ),
        sections=(
            provenance_lines(command, seeds, t["aggregate"], observation),
            split_goal_lines(t["split_goal"]),
            cause_section(t["causes"]),
            summary_lines(conds, t["aggregate"], t["goals"], t["limits"]),
            two_scorers,
            methods_lines(t["aggregate"]),
            *(condition_lines(cond, t, paretos[cond]) for cond in conds),
            wall_time_lines(runs),
        ),
    )
    write_page(out, page)
    return conds


def _figures(
    out: Path, cond: str, per_query: pd.DataFrame, summary: pd.DataFrame, buckets: pd.DataFrame, agg: pd.DataFrame
) -> pd.DataFrame:
    """The Pareto and bucket figures of one condition (PNG + CSV); returns the Pareto table."""
    try:
        n: int | None = candidate_set_size(per_query, cond)
    except ValueError:
        n = None  # mixed N or several relevant items: no iso-BoR lines
    pareto = pareto_figure(summary, cond, out / "figures" / f"pareto_{cond}.png", n=n)
    present = set(agg.loc[agg["condition"] == cond, "method"])
    methods = [m for m in COMPARE_BUCKET_METHODS if m in present]
    bucket_figure(buckets, cond, methods, out / "figures" / f"buckets_{cond}.png")
    return pareto


def _verdict(lo: float, hi: float, first: str, second: str) -> str:
    if lo > 0:
        return f"{first} is ahead"
    return f"{second} is ahead" if hi < 0 else "no clear difference"


def _names(methods: Sequence[str]) -> str:
    """Method names in report order (group, then name), as code, joined by commas; ``none`` when empty."""

    def key(m: str) -> tuple:
        natural = [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", m)]  # fixed-3 before fixed-10
        return GROUP_ORDER[method_group(m.partition("@")[0])], natural

    ordered = sorted(set(methods), key=key)
    return ", ".join(f"`{m}`" for m in ordered) or "none"


def examined_lines(examined: pd.DataFrame, agg: pd.DataFrame, observation: str) -> list[Block]:
    """The first screen of a comparison on an examined-items-only set: per condition, the best method that chose
    its depths from the examined items only (:func:`experiments.report.tables.best_examined_only`), beside the
    best of every method, and which methods read beyond the depth they show (named, from the registry)."""
    shown = agg[agg["group"] != "limit"]["method"].unique()
    view = {m: examined_view(m, observation) for m in shown}
    inside = [m for m in shown if view[m] is not None]
    stepwise = [m for m in inside if view[m] == "stepwise"]
    lead = Paragraph(
        "**Answer.** Per condition, the method with the highest mean test net reward among those that read no "
        "labels and whose depth reads nothing of the items below the depth it shows (`examined.csv`): on the "
        f"`{observation}` set, the learners that decide depth by depth "
        f"({_names(stepwise)}) and the rules that read no score "
        f"({_names([m for m in inside if view[m] == 'none'])}). The other methods read scores beyond the depth "
        f"they show, whatever the set: {_names([m for m in shown if view[m] is None])}."
    )
    if examined.empty:
        return [lead, Paragraph("No method of this comparison chose its depths from the examined items only.")]
    rows = [
        [
            r["condition"],
            f"**{r['method']}** ({r['group']}{same_as_best(r, '; ')})",
            ci(r, JUDGED, 3),
            f"{fmt(r['median_k'], nd=0)} / {fmt(r['p90_k'], nd=0)}",
            *runner_up_cells(r, "runner_up_diff"),
            r["best"],
            "-" if r["method"] == r["best"] else signed_ci(r),
        ]
        for _, r in examined.iterrows()
    ]
    header = ["condition", "use", "net reward [95%]", "median / p90 K", "examined-only runner-up",
              "use - runner-up [95% paired]", "best of every method", "use - best [95% paired]"]  # fmt: skip
    same = examined["method"] == examined["best"]
    behind = int(((examined["diff_hi"] < 0) & ~same).sum())
    ahead = int((examined["runner_up_diff_lo"] > 0).sum())
    return [
        lead,
        Table(header, rows),
        Bullets(
            [
                f"The best examined-only method is significantly ahead of the examined-only runner-up on {ahead} of "
                f"{len(examined)} conditions.",
                f"It is significantly behind the best of every method on {behind} of {len(examined)} conditions, "
                f"within noise of it on {len(examined) - behind - int(same.sum())}, and is that method itself on "
                f"{int(same.sum())}.",
                *rl_against_supervised(examined, stepwise),
            ]
        ),
    ]


def rl_against_supervised(examined: pd.DataFrame, stepwise: list[str]) -> list[str]:
    """The bullet that sets the examined-only RL agents beside the examined-only supervised models
    (``examined.csv``'s ``rl_*`` columns), or none when a condition lacks either side."""
    both = examined[examined["supervised"].map(lambda m: isinstance(m, str))]
    if both.empty:
        return []
    n = len(both)
    behind = int((both["rl_vs_supervised_diff_hi"] < 0).sum())
    ahead = int((both["rl_vs_supervised_diff_lo"] > 0).sum())
    lagging = [m for cell in both["rl_behind"] for m in (cell.split(";") if isinstance(cell, str) and cell else [])]
    agents = [m for m in stepwise if m in RL_AGENTS]
    sup = [m for m in stepwise if m in SUPERVISED_AGENTS]
    return [
        f"RL against supervised learning, both examined-only (the RL agents {_names(agents)} against the "
        f"supervised {_names(sup)}; `examined.csv`, `rl_*` columns): the best examined-only RL agent is within "
        f"noise of the best examined-only supervised model or ahead on {n - behind} of {n} conditions "
        f"(significantly ahead on {ahead}, behind on {behind}). Significantly behind that model, per RL agent: "
        + ", ".join(f"{m} {lagging.count(m)} of {n}" for m in agents)
        + "."
    ]


def answer_lines(best: pd.DataFrame, sg: pd.DataFrame, paired: pd.DataFrame, every: bool = False) -> list[Block]:
    """The first screen: the method to use per condition, and the verdicts, all computed from the tables (``every``:
    it follows the examined-items-only answer, so it is introduced as the best of every method)."""
    rows = [
        [
            r["condition"],
            f"**{r['best']}** ({r['group']}{same_as_best(r, '; ')})",
            ci(r, JUDGED, 3),
            f"{fmt(r['median_k'], nd=0)} / {fmt(r['p90_k'], nd=0)}",
            *runner_up_cells(r),
        ]
        for _, r in best.iterrows()
    ]
    header = ["condition", "use", "net reward [95%]", "median / p90 K", "runner-up", "best - runner-up [95% paired]"]
    return [
        Paragraph(
            ("**Every method.** " if every else "**Answer.** ")
            + "Per condition, the method with the highest mean test net reward among those that read no "
            "labels (net reward: found x -log2 P_rand(K) minus the condition's cost per extra shown tool; chosen on "
            "the test split), its typical depth and how far it is from the runner-up, the best method that differs from it "
            "on some test query of some run (`best.csv`):"
        ),
        Table(header, rows),
        Bullets(verdict_lines(sg, paired)),
    ]


def goal_verdict(ran: int, goal: int, met: bool, missed: bool) -> str:
    """A goal over ``goal`` conditions, of which ``ran`` ran: ``met`` / ``missed`` say whether the conditions that
    ran already decide it either way (what the others would show cannot change it); else, with every condition
    run, met or not; else not judged on this comparison."""
    if met:
        return "met)."
    if missed or ran >= goal:
        return "NOT met)."
    return f"not judged here: {ran} of its {goal} conditions ran)."


def verdict_lines(sg: pd.DataFrame, paired: pd.DataFrame) -> list[str]:
    """One computed sentence each: learned policies against the peers (two scorers, one scorer), and RL against
    the supervised learned models."""
    out = []
    two = sg[sg["two_scorer_goal"]] if len(sg) else sg
    one = sg[sg["base"]] if len(sg) else sg
    if len(two):
        out.append(
            f"Two scorers: the best learned policy is significantly ahead of every peer on {int(two['ahead'].sum())} "
            f"of {len(two)} conditions and significantly behind on {int(two['behind'].sum())} (goal: ahead on "
            f">= {GOAL_MIN_SIGNIFICANT} of {len(GOAL_TWO_SCORER_CONDITIONS)}; "
            + goal_verdict(len(two), len(GOAL_TWO_SCORER_CONDITIONS), int(two["ahead"].sum()) >= GOAL_MIN_SIGNIFICANT,
                           int(two["ahead"].sum()) + len(GOAL_TWO_SCORER_CONDITIONS) - len(two) < GOAL_MIN_SIGNIFICANT)
        )  # fmt: skip
    if len(one):
        behind = int(one["behind"].sum())
        out.append(
            f"One scorer: the best learned policy is significantly behind the best peer on {behind} of {len(one)} "
            f"conditions and ahead on {int(one['ahead'].sum())} (goal: never behind; "
            + goal_verdict(
                len(one), len(GOAL_BASE_CONDITIONS), behind == 0 and len(one) >= len(GOAL_BASE_CONDITIONS), behind > 0
            )  # fmt: skip
        )
    for sup in SUPERVISED_AGENTS:
        rl = paired[(paired["peer"] == sup) & paired["agent"].isin(RL_AGENTS)] if len(paired) else paired
        if len(rl):
            ahead, behind = int((rl["diff_lo"] > 0).sum()), int((rl["diff_hi"] < 0).sum())
            out.append(
                f"RL against {sup} (supervised, no bootstrapping): RL is significantly ahead in {ahead} of {len(rl)} "
                f"(condition, RL agent) pairs, behind in {behind}, with no clear difference in {len(rl) - ahead - behind}."
            )
    return out


def provenance_lines(command: str, seeds: Sequence[int], agg: pd.DataFrame, observation: str) -> Section:
    stoch = sorted({m for m in agg["method"] if MethodSpec.parse(m).kind.stochastic})
    how = (
        "Generated by `shortlist compare` from its run directories (not committed: the command remakes them; "
        "`runs.csv` lists each with its config hash and the sha256 of its tables); do not edit by hand. Every "
        "number is on the test split; methods fitted on data saw only the training split. Every method is "
        "judged on one objective, the **net reward**, and every fitted or trained method is fitted to it "
        "(learners with gamma = 1 and the condition's step cost; each run's config records its objective); "
        "the cost-free mean reward (found x -log2 P_rand(K)) is the second column. Stochastic methods ("
        + ", ".join(stoch)
        + f") ran with seeds {', '.join(map(str, seeds))}; deterministic ones once (seed {seeds[0]}); every "
        "method ran on each train/test split of its condition. Brackets: 95% percentile bootstrap interval "
        "over test queries (2,000 resamples stratified by split, the same for every method of a condition); "
        "differences are paired over the same test units (10,000 resamples). The spreads over seeds and over "
        'splits are in aggregate.csv (`*_seed_min`/`*_seed_max`, `*_split_min`/`*_split_max`). "BoR bits" '
        "is the aggregate log2(mean found / mean P_rand): it can rank methods differently."
    )
    return Section(
        "How these numbers were made",
        [Paragraph(how), Paragraph(f"Command: `{command}`"), *observation_blocks(observation)],
    )


def split_goal_lines(sg: pd.DataFrame) -> Section:
    """The goal over repeated splits (:func:`experiments.report.tables.split_goal`), table and verdicts."""
    if sg.empty:
        return Section("Goal over repeated splits")
    rows = [
        [
            r["condition"],
            r["best_agent"],
            f"{r[JUDGED]:.3f}",
            f"{r['best_peer']} {r[f'best_peer_{JUDGED}']:.3f}",
            signed_ci(r),
            "ahead" if r["ahead"] else ("behind" if r["behind"] else "-"),
            f"{100 * r['frac_oracle']:.1f}" if not math.isnan(r["frac_oracle"]) else "-",
        ]
        for _, r in sg.iterrows()
    ]
    two = sg[sg["second_scorer"]]
    header = ["condition", "best learned policy", "net reward", "best peer", "difference [95% paired]",
              "significantly", "% of oracle"]  # fmt: skip
    goal = (
        "Stated before running, reported either way, on the net reward: on the two-scorer conditions "
        f"({', '.join(GOAL_TWO_SCORER_CONDITIONS)}) the best learned policy (the BoR agent with the largest "
        "mean test net reward; choosing it on test favours it slightly) is significantly ahead of every peer "
        "(paired bootstrap over the test units of all splits, interval above 0 against the best peer) on at "
        f"least {GOAL_MIN_SIGNIFICANT} of {len(GOAL_TWO_SCORER_CONDITIONS)}; on the single-scorer ones "
        f"({', '.join(GOAL_BASE_CONDITIONS)}) it is never significantly behind (at least every peer minus its "
        "interval). `split_goal.csv` holds these numbers."
    )
    verdicts = [
        f"At least every peer's net reward (point estimates): {int(sg['at_least_every_peer'].sum())} of {len(sg)} "
        f"conditions; significantly ahead on {int(sg['ahead'].sum())}, significantly behind on "
        f"{int(sg['behind'].sum())}.",
        (
            f"At least {GOAL_FRACTION_OF_ORACLE:.0%} of the oracle with a second scorer: "
            f"{int(two['oracle_fraction_met'].astype(bool).sum())} of {len(two)} conditions."
            if len(two)
            else "No condition with a second scorer ran."
        ),
        "Under shift (scorer, benchmark, query): see `shortlist shift` (results/shift).",
    ]
    return Section("Goal over repeated splits", [Paragraph(goal), Table(header, rows), Bullets(verdicts)])


def summary_lines(conds: Sequence[str], agg: pd.DataFrame, goals: pd.DataFrame, limits: pd.DataFrame) -> Section:
    """Per (condition, BoR agent): the stated per-agent goal checks (:func:`goal_checks`)."""
    rows, met, total = [], [0, 0, 0], 0
    for cond in conds:
        a = agg[agg["condition"] == cond].set_index("method")
        peers = a[a["group"] == "peer"]
        for agent in (m for m in BOR_AGENTS if m in a.index):
            g = goals[(goals["condition"] == cond) & (goals["agent"] == agent)]
            lim = limits[(limits["condition"] == cond) & (limits["method"] == agent)].iloc[0]
            ok = [bool(v) for v in g["passed"]]
            met = [m + o for m, o in zip(met, ok, strict=True)]
            total += 1
            bp = best_of(peers[JUDGED])
            rows.append(
                [cond, agent, ci(a.loc[agent], JUDGED, 3), f"{bp} {peers.loc[bp, JUDGED]:.3f}",
                 "yes" if ok[0] else "no", f"{100 * lim['frac_dp']:.1f}", "yes" if ok[1] else "no",
                 f"{100 * lim['frac_oracle']:.1f}", "yes" if ok[2] else "no"]
            )  # fmt: skip
    header = ["condition", "agent", "net reward", "best peer (net reward)", ">= every peer", "% of bor-dp",
              ">= 90% of bor-dp", "% of oracle", "no peer dominates"]  # fmt: skip
    return Section(
        "Per agent",
        [
            Paragraph(
                "Each BoR agent's net reward beside the best peer's, as a fraction of bor-dp (the DP optimum of the "
                "tabular model estimated on train: a reference, not a bound) and of the oracle, and whether a peer "
                "reaches both a higher found % and a lower mean K (`goals.csv`, `limits.csv`)."
            ),
            Table(header, rows),
            Paragraph(
                f"Over {total} (condition, BoR agent) pairs: at least every peer's net reward in {met[0]}, within "
                f"10% of bor-dp in {met[1]}, undominated by every peer in {met[2]}."
            ),
        ],
    )


def _describe(method: str) -> str:
    spec = MethodSpec.parse(method)
    if spec.kind.name_field:  # fixed K: the description of its value
        return f"{spec.kind.description} ({spec.kind.name_field} = {spec.k})"
    text = spec.kind.description
    return f"{text}; trained with the {spec.reward.upper()} reward" if spec.kind.uses_reward else text


def methods_lines(agg: pd.DataFrame) -> Section:
    ordered = sorted(agg["method"].unique(), key=lambda x: (GROUP_ORDER[method_group(x)], x))
    dp = (
        "bor-dp is the best stationary STOP/CONTINUE rule on the tabular agent's discretised state in the model "
        "estimated from the training split (exact dynamic programming on the net reward): optimal only inside "
        "that model, not a bound. The `-insample` limits fit a peer's family on the test queries themselves: "
        "the ceiling of that family, showing how much room its scores leave. The oracle stops at the gold rank "
        "where that pays: the ceiling of every policy's net reward (not of BoR bits, where a shallow fixed K can "
        "score higher)."
    )
    cutoff = (
        "Why the cut-off keeps its form: it predicts P(found by k) separately at each depth and forces monotonicity "
        "afterwards, which leaves it miscalibrated at the decisive depths 1-3; the listwise posterior (one softmax "
        "over where the gold sits, fitted by maximum likelihood) is the fix, and the cut-off stays beside it as the "
        "per-depth baseline it is measured against. `shortlist recommend` and `auto` choose between them on a "
        "validation split of the training queries."
    )
    return Section(
        "Methods",
        [Bullets([f"`{m}` ({method_group(m)}): {_describe(m)}" for m in ordered]), Paragraph(dp), Paragraph(cutoff)],
    )


def condition_lines(cond: str, t: dict[str, pd.DataFrame], pareto: pd.DataFrame) -> Section:
    """One condition's section: every method, each BoR agent against the peers, the limits, figures."""
    a = t["aggregate"][t["aggregate"]["condition"] == cond].copy()
    a = a.assign(_o=a["group"].map(GROUP_ORDER)).sort_values(["_o", JUDGED], ascending=[True, False])
    front = pareto[pareto["pareto"] & (pareto["kind"] != "iso_bor")].sort_values("mean_k")["method"].tolist()
    return Section(
        cond,
        [
            method_table_lines(a, t["limits"][t["limits"]["condition"] == cond].set_index("method")),
            *agent_lines(cond, a.set_index("method"), t["paired"]),
            *limit_lines(cond, a.set_index("method"), t["limits"], t["dp"]),
            *goal_check_lines(t["goals"][t["goals"]["condition"] == cond]),
            Figure(f"figures/pareto_{cond}.png", f"{cond} Pareto"),
            Paragraph("Pareto front (label-reading limits excluded), by increasing mean K: " + ", ".join(front) + "."),
            *bucket_table(t["buckets_aggregate"], cond, list(a["method"]), int(a["n_splits"].max())),
            Figure(f"figures/buckets_{cond}.png", f"{cond} buckets"),
        ],
    )


def method_table_lines(a: pd.DataFrame, lim: pd.DataFrame) -> Table:
    rows = []
    for _, r in a.iterrows():
        m = r["method"]
        frac = {k: lim.loc[m, f"frac_{k}"] * 100 if m in lim.index else math.nan for k in ("dp", "oracle")}
        rows.append(
            [m, r["group"], f"{int(r['n_seeds'])} x {int(r['n_splits'])}", ci(r, "found_pct", 1), ci(r, "mean_k"),
             f"{fmt(r['median_k'], nd=0)} / {fmt(r['p90_k'], nd=1)}", fmt(r["whole_list_pct"], nd=1),
             fmt(r.get("break_even_pct", math.nan), nd=1), ci(r, "bor_bits"), ci(r, JUDGED, 3),
             fmt(r["mean_reward"], nd=3), fmt(frac["dp"], nd=1), fmt(frac["oracle"], nd=1)]
        )  # fmt: skip
    header = ["method", "group", "seeds x splits", "found %", "mean K", "median / p90 K", "whole list %",
              "at break-even %", "BoR bits", "net reward", "mean reward (cost-free)", "% of bor-dp", "% of oracle"]  # fmt: skip
    return Table(header, rows)


def agent_lines(cond: str, idx: pd.DataFrame, paired: pd.DataFrame) -> list[Block]:
    """Per BoR agent: the peers as good or better, the paired difference with the best peer, dominance."""
    peers, fixed = idx[idx["group"] == "peer"], idx[idx["group"] == "baseline"]
    lead = Paragraph('**Where each BoR agent wins and where it does not** (point estimates of the net reward; '
                     '"within noise" means the peer\'s value lies inside the agent\'s query-bootstrap interval):')  # fmt: skip
    items: list[str] = []
    for agent in (m for m in BOR_AGENTS if m in idx.index):
        me = idx.loc[agent]
        lo, hi = me[f"{JUDGED}_lo"], me[f"{JUDGED}_hi"]

        def noise(v: float, lo: float = lo, hi: float = hi) -> str:
            return " (within noise)" if lo < hi and lo <= v <= hi else ""

        better = peers[peers[JUDGED] >= me[JUDGED]].sort_values(JUDGED, ascending=False)
        text = f"{agent}: {fmt(me[JUDGED], lo, hi, 3)} net reward ({me['found_pct']:.1f}% found at mean K {me['mean_k']:.2f}). "
        text += (
            "It beats every peer. "
            if better.empty
            else "Peers as good or better: "
            + ", ".join(f"{m} {r[JUDGED]:.3f}{noise(r[JUDGED])}" for m, r in better.iterrows())
            + ". "
        )
        pr = paired[(paired["condition"] == cond) & (paired["agent"] == agent)].set_index("peer")
        if len(pr) and len(peers):
            bp = best_of(peers[JUDGED])
            r = pr.loc[bp]
            text += f"Minus the best peer, {bp}: {signed_ci(r)} ({_verdict(r['diff_lo'], r['diff_hi'], agent, bp)}). "
        fb = fixed[fixed[JUDGED] >= me[JUDGED]]
        if len(fb):
            text += "Fixed K at least as good (chosen on test, a hindsight reference): " + ", ".join(fb.index) + ". "
        dom = peers[(peers["found_pct"] > me["found_pct"] + 1e-9) & (peers["mean_k"] < me["mean_k"] - 1e-9)]
        text += (
            "No peer has both a higher found % and a lower mean K."
            if dom.empty
            else ("Peers with a higher found % at a lower mean K: " + ", ".join(dom.index) + ".")
        )
        items.append(text)
    blocks: list[Block] = [lead, Bullets(items)]
    for sup in SUPERVISED_AGENTS:
        rl = paired[(paired["condition"] == cond) & (paired["peer"] == sup) & paired["agent"].isin(RL_AGENTS)]
        if len(rl):
            parts = [f"{r['agent']} minus {sup} = {signed_ci(r)} ({_verdict(r['diff_lo'], r['diff_hi'], 'RL', sup)})"
                     for _, r in rl.iterrows()]  # fmt: skip
            blocks.append(Paragraph(f"**RL against {sup}:** " + "; ".join(parts) + "."))
    return blocks


def limit_lines(cond: str, idx: pd.DataFrame, limits: pd.DataFrame, dp: pd.DataFrame) -> list[Block]:
    lim = limits[limits["condition"] == cond].set_index("method")
    parts = [
        f"{agent} reaches {ci(lim.loc[agent], 'frac_dp', 1, 100)}% of bor-dp's net reward and "
        f"{ci(lim.loc[agent], 'frac_oracle', 1, 100)}% of the oracle's"
        for agent in (*BOR_AGENTS, "f1-dqn")
        if agent in lim.index
    ]
    ceilings = [m for m in idx.index if m.endswith("-insample")]
    for m in ceilings:
        fam = m.removesuffix("-insample")
        fitted = f"bor-{fam}"
        if fitted in idx.index:
            parts.append(f"{m} (the {fam} family's ceiling) earns {idx.loc[m, JUDGED]:.3f} against the train-fitted "
                         f"{fitted}'s {idx.loc[fitted, JUDGED]:.3f}")  # fmt: skip
    blocks: list[Block] = [Paragraph("**Gap to the limits:** " + "; ".join(parts) + ".")]
    d = dp[dp["condition"] == cond] if len(dp) else dp
    if len(d):
        rows = [[r["method"], r["objective"], f"{r['model_value_train']:.3f}", f"{r['realised_value_train']:.3f}",
                 f"{r['mean_reward_net_test']:.3f}", int(r["states_seen"])] for _, r in d.iterrows()]  # fmt: skip
        header = ["DP policy", "objective", "value in its model (train)", "realised on train", "net reward (test)",
                  "states seen"]  # fmt: skip
        blocks += [
            Table(header, rows),
            Paragraph(
                "The model value is optimal in the certainty-equivalent model of the tabular state; the realised "
                "training value is lower where pooled states are not Markov (see `agents/oracle.py`)."
            ),
        ]
    return blocks


def goal_check_lines(g: pd.DataFrame) -> list[Block]:
    if g.empty:
        return []
    items = []
    for _, r in g.iterrows():
        det = f" ({r['detail']})" if isinstance(r["detail"], str) and r["detail"] else ""
        items.append(f"{r['agent']}: {r['check']}: {'met' if r['passed'] else 'NOT met'}{det}")
    return [Paragraph("**Goal check** (stated before running):"), Bullets(items)]


def wall_time_lines(runs: Sequence[Path]) -> Section:
    """Per method, the wall time summed over its run directories (from their manifests)."""
    wall = []
    for run in runs:
        man = json.loads((run / "manifest.json").read_text())
        cfg = json.loads((run / "config.json").read_text())
        wall.append({"method": cfg["method"], "seconds": float(man.get("wall_seconds", math.nan))})
    if not wall:
        return Section("Wall time")
    w = pd.DataFrame(wall).groupby("method")["seconds"].agg(["count", "sum"]).sort_values("sum", ascending=False)
    rows = [[m, int(r["count"]), f"{r['sum']:.1f}"] for m, r in w.iterrows()]
    rows.append(["total", int(w["count"].sum()), f"{w['sum'].sum():.1f}"])
    return Section(
        "Wall time",
        [
            Paragraph(
                "Per method, summed over its run directories (from their manifests; resumed cells keep the time of "
                "the run that made them):"
            ),
            Table(["method", "runs", "seconds"], rows),
        ],
    )
