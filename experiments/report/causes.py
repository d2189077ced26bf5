"""Why RL trails the supervised models, per condition: information, optimisation and objective, each measured.

Three causes can keep an RL agent (:data:`experiments.plan.RL_AGENTS`) below the supervised learned models
(:data:`experiments.plan.SUPERVISED_AGENTS`); :func:`cause_table` measures each on the test units of a
comparison, with the paired bootstrap of :func:`experiments.report.tables.paired_differences` (per test unit
the mean over seeds; resampled over units, stratified by split):

- **information**: the same RL kind on the ``listwise`` observation (the listwise posterior's per-item view of
  the top ranks, :mod:`envs.features`) minus on the summary features (:data:`INFORMATION_PAIRS`);
- **optimisation**: fitted Q-iteration on every transition of the training queries minus the online DQN at
  equal gradient steps, and the policy-gradient learner (PPO) minus the DQN (:data:`OPTIMISATION_PAIRS`);
- **fine-tuning** (beside the three causes): the residual DQN, RL that starts from the posterior model's own
  Q-values (:mod:`agents.residual`), minus that posterior model (:data:`FINE_TUNING_PAIRS`): what RL on the rewards
  adds to the supervised model it starts from;
- **objective**: whether every RL cell of the condition trained on the judged net reward, gamma 1 and the
  condition's step cost, as its run config records (a check, not a difference);
- **tabular Q's own state** (:data:`TABULAR_AGENT`, :data:`TABULAR_OPTIMUM`): ``bor-dp``, the best stationary rule on tabular Q's
  discretised state by exact dynamic programming in the model estimated from the training queries
  (:mod:`agents.oracle`), minus the best supervised model (``tabular state``: what that state leaves, with the
  learning taken out), and tabular Q minus ``bor-dp`` (``tabular learning``: what the learning leaves on that
  state). :func:`tabular_sentence` says which of the two keeps tabular Q behind. ``bor-dp`` is a reference, not a
  bound: optimal inside the estimated model, where pooled states are treated as Markov.

Beside them the remaining **gap**: the best RL agent minus the best supervised model (each chosen by its mean
test net reward). :func:`cause_sentence` says in one sentence which measured cause explains a gap that remains.
DataFrames in, DataFrames and lines out; nothing is written here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from agents.base import judged_objective
from benchmarks.names import ConditionId
from experiments.plan import (
    FROM_SUPERVISED_AGENTS,
    GOAL_MAX_RL_BEHIND,
    GOAL_MIN_RL_WITHIN_NOISE,
    GOAL_RL_AGENTS,
    INFORMATION_LABEL,
    INFORMATION_PROBE,
    RL_AGENTS,
    SUPERVISED_AGENTS,
    base_plan,
    condition_order,
)
from experiments.report.markdown import signed_ci
from experiments.report.page import Block, Bullets, Paragraph, Section, Table
from experiments.report.tables import (
    GOAL_BASE_CONDITIONS,
    GOAL_TWO_SCORER_CONDITIONS,
    JUDGED,
    JUDGED_ROW,
    _unit_wide,
    best_of,
    diff_interval,
    unit_resamples,
)

#: (RL agent on the listwise observation, the same agent on the summary features).
INFORMATION_PAIRS: tuple[tuple[str, str], ...] = ((INFORMATION_LABEL, INFORMATION_PROBE.name),)
#: (learner, online DQN): fitted Q on the full data at the DQN's gradient steps, and PPO.
OPTIMISATION_PAIRS: tuple[tuple[str, str], ...] = (("bor-fqi", "bor-dqn"), ("bor-ppo", "bor-dqn"))
#: (RL agent that starts from a supervised model, that model): the residual DQN and the posterior it starts from.
FINE_TUNING_PAIRS: tuple[tuple[str, str], ...] = (("bor-residual", "bor-posterior"),)
#: The tabular agent, and the DP optimum of its own discretised state (the reference of its two rows).
TABULAR_AGENT, TABULAR_OPTIMUM = "bor-tabular", "bor-dp"
#: The heading of :func:`cause_section`.
CAUSES_HEADING = "Why RL trails the supervised models: information, optimisation, objective"
#: The columns of :func:`cause_table`.
CAUSE_COLUMNS = ("condition", "cause", "first", "second", "n_units", "diff", "diff_lo", "diff_hi", "detail")


def kept_prior(run: Path, cfg: dict) -> bool | None:
    """Whether a run of an agent that starts from a supervised model (:data:`FROM_SUPERVISED_AGENTS`) kept its
    untrained start (:func:`agents.residual.kept_start`, from its saved agent and recorded settings); None for any
    other run."""
    from agents.residual import kept_start

    if cfg["method"] not in FROM_SUPERVISED_AGENTS:
        return None
    return kept_start(Path(run) / "agent.zip", cfg.get("settings") or {})


def run_objectives(runs: Sequence[Path]) -> pd.DataFrame:
    """One row per run directory: its condition, method, the objective its config records (``target``,
    ``reward``, ``step_cost``, ``gamma``), the judged objective of its condition's plan (``judged_*``) and, for an
    agent that starts from a supervised model, whether it kept that start (``kept_prior``, :func:`kept_prior`)."""
    rows = []
    for run in runs:
        cfg = json.loads((Path(run) / "config.json").read_text(encoding="utf-8"))
        recorded = cfg.get("objective") or {}
        judged = asdict(judged_objective(base_plan(ConditionId.parse(cfg["condition"])).episode))
        label = cfg["method"] + ("" if cfg["episode"].get("observation", "auto") == "auto" else
                                 f"@{cfg['episode']['observation']}")  # fmt: skip
        rows.append({"condition": cfg["condition"], "method": label, "run": Path(run).name,
                     **{k: recorded.get(k) for k in judged}, **{f"judged_{k}": v for k, v in judged.items()},
                     "kept_prior": kept_prior(Path(run), cfg)})  # fmt: skip
    return pd.DataFrame(rows)


def _rl(method: str) -> bool:
    """Whether ``method`` (with or without an ``@<observation>`` tag) is one of the RL agents."""
    return method.partition("@")[0] in RL_AGENTS


def objective_rows(objectives: pd.DataFrame) -> list[dict]:
    """Per condition: how many RL runs record the judged objective (net BoR reward, gamma 1, the plan's c)."""
    rows: list[dict] = []
    if objectives.empty:
        return rows
    rl = objectives[objectives["method"].map(_rl)]
    for cond, g in rl.groupby("condition", sort=False):
        ok = (g["target"] == g["judged_target"]) & (g["reward"] == g["judged_reward"]) & (g["gamma"] == 1.0)
        ok &= np.isclose(g["step_cost"].astype(float), g["judged_step_cost"].astype(float), rtol=0, atol=1e-12)
        bad = sorted(g.loc[~ok, "run"])
        c = float(g["judged_step_cost"].iloc[0])
        detail = f"{int(ok.sum())} of {len(g)} RL runs: net BoR reward, gamma 1, c = {c:g}"
        rows.append({"condition": cond, "cause": "objective", "first": "every RL run", "second": "judged objective",
                     "n_units": len(g), "diff": float(len(bad)), "diff_lo": np.nan, "diff_hi": np.nan,
                     "detail": detail + (f"; not: {', '.join(bad[:3])}" if bad else "")})  # fmt: skip
    return rows


def _pair(
    cond: str, cause: str, by: pd.DataFrame, idx: np.ndarray, first: str, second: str, detail: str = ""
) -> dict | None:
    if first not in by.index or second not in by.index:
        return None
    d = (by.loc[first] - by.loc[second]).to_numpy(dtype=np.float64)
    return {"condition": cond, "cause": cause, "first": first, "second": second, "n_units": d.size,
            **diff_interval(d, idx), "detail": detail}  # fmt: skip


#: The detail of a ``tabular state`` row (:func:`cause_table`).
TABULAR_STATE_DETAIL = "the DP optimum of tabular Q's state on the training queries"


def _kept(objectives: pd.DataFrame, cond: str, method: str) -> str:
    """ "kept its untrained start in k of n runs" for ``method``'s runs on ``cond`` (empty without the record)."""
    if objectives.empty or "kept_prior" not in objectives:
        return ""
    runs = objectives[(objectives["condition"] == cond) & (objectives["method"] == method)]["kept_prior"].dropna()
    return f"kept its untrained start in {int(runs.astype(bool).sum())} of {len(runs)} runs" if len(runs) else ""


def cause_table(per_query: pd.DataFrame, objectives: pd.DataFrame, seed: int = 0, n_boot: int = 10_000) -> pd.DataFrame:
    """Per condition (in plan order): the remaining ``gap`` (best RL agent minus best supervised model), the
    ``information``, ``optimisation`` and ``fine-tuning`` differences with paired 95% intervals, and the ``objective`` check
    (``diff`` = the number of RL runs that do not record the judged objective). Pairs whose methods did not run
    on a condition are left out (module docstring)."""
    rows = objective_rows(objectives)
    for cond in condition_order(per_query["condition"].unique()):
        by = _unit_wide(per_query[per_query["condition"] == cond], JUDGED_ROW, "method")
        idx = unit_resamples(by.columns.get_level_values(0).to_numpy(), n_boot, seed)
        means = by.mean(axis=1)
        rl = [m for m in by.index if _rl(m)]
        sup = [m for m in SUPERVISED_AGENTS if m in by.index]
        best_sup = best_of(means, sup) if sup else None
        if rl and best_sup:
            gap = _pair(cond, "gap", by, idx, best_of(means, rl), best_sup)
            rows.append(gap) if gap else None
        for cause, pairs in (
            ("information", INFORMATION_PAIRS),
            ("optimisation", OPTIMISATION_PAIRS),
            ("fine-tuning", FINE_TUNING_PAIRS),
        ):
            rows += [r for a, b in pairs if (r := _pair(cond, cause, by, idx, a, b, _kept(objectives, cond, a)))]
        if best_sup and {TABULAR_AGENT, TABULAR_OPTIMUM} <= set(by.index):
            rows += [r for r in (_pair(cond, "tabular state", by, idx, TABULAR_OPTIMUM, best_sup, TABULAR_STATE_DETAIL),
                                 _pair(cond, "tabular learning", by, idx, TABULAR_AGENT, TABULAR_OPTIMUM)) if r]  # fmt: skip
    out = pd.DataFrame(rows, columns=list(CAUSE_COLUMNS))
    order = {c: i for i, c in enumerate(condition_order(out["condition"].unique()))} if len(out) else {}
    kinds = {"gap": 0, "information": 1, "optimisation": 2, "fine-tuning": 3, "objective": 4, "tabular state": 5,
             "tabular learning": 6}  # fmt: skip
    return (
        out.assign(_c=out["condition"].map(order), _k=out["cause"].map(kinds))
        .sort_values(["_c", "_k"], kind="stable")
        .drop(columns=["_c", "_k"])
        .reset_index(drop=True)
    )


def cause_sentence(rows: pd.DataFrame) -> str:
    """One sentence for one condition's rows of :func:`cause_table`: whether a gap to the supervised models
    remains and, if so, which measured cause explains it. The gap is the best RL agent's, so a cause explains
    part of it only when that agent carries the cause's fix: it is the first agent of a significantly positive
    information or optimisation pair (fitted Q or PPO over the online DQN; fitted Q on the listwise view over
    fitted Q on the summary features), or that agent on another observation set (fitted Q on the listwise view
    carries fitted Q's fix too). Other significant gains, of agents below the best one, are said as that. A gap
    held by an agent that starts from a supervised model (the residual DQN) is its fine-tuning's, which the three
    causes, about agents that learn on their own, do not address. A failed objective check explains a gap
    outright."""
    gap = rows[rows["cause"] == "gap"]
    if gap.empty:
        return "No RL agent or no supervised model ran here, so no gap is measured."
    g = gap.iloc[0]
    best = str(g["first"])
    head = f"best RL agent {best} minus best supervised model {g['second']}: {signed_ci(g)}"
    if g["diff_hi"] >= 0:
        return f"No significant gap remains ({head})."
    if len(rows[(rows["cause"] == "objective") & (rows["diff"] > 0)]):
        return f"A gap remains ({head}); it is explained by the objective: some RL runs did not train on the judged net reward."
    measured = rows[rows["cause"].isin(["information", "optimisation"])]
    gains = measured[measured["diff_lo"] > 0]
    in_best = gains["first"].isin({best, best.partition("@")[0]})
    carried, below = gains[in_best], gains[~in_best]

    def pairs(frame: pd.DataFrame, sep: str) -> str:  # "a minus b +x [lo, hi]<sep>c minus b ..."
        return sep.join(f"{r['first']} minus {r['second']} {signed_ci(r)}" for _, r in frame.iterrows())

    def said(frame: pd.DataFrame) -> str:  # "optimisation (a minus b ...; c minus b ...) and information (...)"
        return " and ".join(f"{cause} ({pairs(group, '; ')})" for cause, group in frame.groupby("cause", sort=False))

    others = f"; other RL agents, below it, gain significantly from {said(below)}" if len(below) else ""
    if len(carried):
        verb = "explain" if len(carried) > 1 else "explains"
        return (f"A gap remains ({head}); {said(carried)} {verb} part of it, in the best RL agent itself, and none "
                f"of the three measured causes closes it{others}.")  # fmt: skip
    if best in FROM_SUPERVISED_AGENTS:
        start = FROM_SUPERVISED_AGENTS[best]
        row = " (its fine-tuning row says what RL added to it)" if (rows["cause"] == "fine-tuning").any() else ""
        return (f"A gap remains ({head}), held by an agent that starts from {start}{row}, which none of the three "
                f"causes, about agents that learn on their own, addresses{others}.")  # fmt: skip
    if len(below):
        return f"A gap remains ({head}) that none of the three measured causes explains in the best RL agent{others}."
    tried = pairs(measured, ", ")
    checked = (rows["cause"] == "objective").any()  # the objective rows exist only where RL runs were read
    reasons = [f"{tried} (none significantly positive)"] if tried else []
    reasons += ["every RL run trained on the judged objective"] if checked else []
    return f"A gap remains ({head}) that none of the three measured causes explains" + (
        f": {' and '.join(reasons)}." if reasons else "."
    )


def tabular_sentence(rows: pd.DataFrame) -> str:
    """One sentence for one condition's rows of :func:`cause_table` on tabular Q (empty without its two rows):
    whether the best rule on its discretised state (``bor-dp``) is itself significantly behind the best supervised
    model, in which case better learning on that state does not close the gap in the estimated model, and where
    tabular Q stands against that rule."""
    state = rows[rows["cause"] == "tabular state"]
    learning = rows[rows["cause"] == "tabular learning"]
    if state.empty or learning.empty:
        return ""
    s, le = state.iloc[0], learning.iloc[0]
    head = (f"{s['first']} (the DP optimum of {le['first']}'s discretised state on the training queries) minus "
            f"{s['second']}: {signed_ci(s)}; {le['first']} minus {s['first']}: {signed_ci(le)}")  # fmt: skip
    if s["diff_hi"] < 0:
        learned = ("and tabular Q is also significantly below that rule" if le["diff_hi"] < 0 else
                   "and tabular Q is within noise of that rule or above it")  # fmt: skip
        return (f"Tabular Q's state keeps it behind ({head}): the best rule on that state is itself significantly "
                f"behind, {learned}.")  # fmt: skip
    if le["diff_hi"] < 0:
        return (
            f"Tabular Q's learning keeps it below what its state allows ({head}): that state's best rule is "
            "within noise of the supervised model or ahead, and tabular Q is significantly below it."
        )
    return f"Neither its state nor its learning is significantly short here ({head})."


def cause_section(causes: pd.DataFrame) -> Section:
    """The page's section: one table of the measured causes per condition, then its sentence (empty, so left
    out, without causes)."""
    if causes.empty:
        return Section(CAUSES_HEADING)
    what = Paragraph(
        "Per condition, each cause measured as a difference of mean test net reward, paired over the same test "
        "units (10,000 resamples stratified by split; `causes.csv`): **gap**, the best RL agent minus the best "
        f"supervised model; **information**, {INFORMATION_LABEL} (the posterior's per-item view of the top 20 "
        f"ranks) minus {INFORMATION_PROBE.name} (the summary features); **optimisation**, fitted Q on "
        "every training transition (`fqi`, no exploration, the DQN's gradient steps) and PPO, each minus the "
        "online DQN; **fine-tuning** (beside the three causes), the residual DQN (RL that starts from the posterior "
        "model's own Q-values, `agents/residual.py`) minus the posterior model: what RL on the rewards adds to the "
        "supervised model it starts from (and in how many runs its hold-out kept the untrained start, the "
        "posterior itself); **objective**, whether every RL run's config records the judged objective (net BoR "
        "reward, gamma 1, the condition's step cost); **tabular state**, bor-dp (the best stationary rule on "
        "tabular Q's discretised state, by exact dynamic programming in the model estimated from the training "
        "queries: a reference, not a bound) minus the best supervised model, and **tabular learning**, tabular Q "
        "minus bor-dp: whether tabular Q's state or its learning keeps it behind."
    )
    subsections = []
    for cond in condition_order(causes["condition"].unique()):
        rows = causes[causes["condition"] == cond]
        cells = [
            [r["cause"], f"{r['first']} minus {r['second']}" if r["cause"] != "objective" else r["first"],
             r["detail"] if r["cause"] == "objective" else signed_ci(r) + (f" ({r['detail']})" if r["detail"] else "")]
            for _, r in rows.iterrows()
        ]  # fmt: skip
        table = Table(["cause", "comparison", "difference [95% paired]"], cells)
        tabular = tabular_sentence(rows)
        subsections.append(Section(cond, [table, Paragraph(cause_sentence(rows)),
                                          *([Paragraph(tabular)] if tabular else [])]))  # fmt: skip
    return Section(CAUSES_HEADING, [what], subsections)


def rl_goal(agg: pd.DataFrame, paired: pd.DataFrame, objectives: pd.DataFrame | None = None) -> pd.DataFrame:
    """The goal of issue 39 per condition and RL agent, from :func:`experiments.report.tables.aggregate` and
    :func:`~experiments.report.tables.paired_differences`: each RL agent minus the condition's best supervised
    model (largest mean test net reward), with the paired interval; ``best_rl`` marks the condition's best RL
    agent, ``counted`` the agents of :data:`experiments.plan.GOAL_RL_AGENTS`, ``goal_condition`` the 10 base and
    two-scorer conditions. ``behind`` / ``within_noise``: the interval lies below 0 / does not. With the runs'
    ``objectives`` (:func:`run_objectives`), an agent that starts from a supervised model also gets ``runs`` and
    ``kept_start``: how many of its runs on the condition kept that untrained start (NaN for the others)."""
    rows = []
    goal_conds = set(GOAL_BASE_CONDITIONS) | set(GOAL_TWO_SCORER_CONDITIONS)
    for cond in condition_order(agg["condition"].unique()):
        a = agg[agg["condition"] == cond].set_index("method")
        sup = [m for m in SUPERVISED_AGENTS if m in a.index]
        rl = [m for m in RL_AGENTS if m in a.index]
        if not sup or not rl:
            continue
        best_sup, best_rl = best_of(a[JUDGED], sup), best_of(a[JUDGED], rl)
        for agent in rl:
            pr = paired[(paired["condition"] == cond) & (paired["agent"] == agent) & (paired["peer"] == best_sup)]
            lo, hi = (float(pr["diff_lo"].iloc[0]), float(pr["diff_hi"].iloc[0])) if len(pr) else (np.nan, np.nan)
            rows.append({"condition": cond, "goal_condition": cond in goal_conds, "agent": agent,
                         "counted": agent in GOAL_RL_AGENTS, "best_rl": agent == best_rl, "supervised": best_sup,
                         JUDGED: float(a.loc[agent, JUDGED]), f"supervised_{JUDGED}": float(a.loc[best_sup, JUDGED]),
                         "diff": float(pr["diff"].iloc[0]) if len(pr) else np.nan, "diff_lo": lo, "diff_hi": hi,
                         "behind": bool(hi < 0), "within_noise": bool(hi >= 0), **_kept_counts(objectives, cond, agent)})  # fmt: skip
    return pd.DataFrame(rows)


def _kept_counts(objectives: pd.DataFrame | None, cond: str, method: str) -> dict[str, float]:
    """``runs`` and ``kept_start`` of ``method`` on ``cond`` (:func:`rl_goal`; NaN without a record)."""
    kept = (
        objectives[(objectives["condition"] == cond) & (objectives["method"] == method)]["kept_prior"].dropna()
        if objectives is not None and not objectives.empty and "kept_prior" in objectives
        else pd.Series(dtype=object)
    )
    if kept.empty:
        return {"runs": np.nan, "kept_start": np.nan}
    return {"runs": float(len(kept)), "kept_start": float(kept.astype(bool).sum())}


def _tabular_state_count(causes: pd.DataFrame | None, conds: set[str]) -> str:
    """The sentence of :func:`rl_goal_bullets` on tabular Q's state over the goal conditions ``conds`` (empty
    without its rows)."""
    if causes is None or causes.empty:
        return ""
    state = causes[(causes["cause"] == "tabular state") & causes["condition"].isin(conds)]
    if state.empty:
        return ""
    n = int((state["diff_hi"] < 0).sum())
    return (f" The best rule on {TABULAR_AGENT}'s own discretised state ({TABULAR_OPTIMUM}, exact dynamic programming on the training "
            f"queries) is itself significantly behind the best supervised model on {n} of {len(state)}: on those, "
            "better learning on that state would not close the gap, in the model estimated from the training queries "
            "(the cause table).")  # fmt: skip


def rl_goal_bullets(goal: pd.DataFrame, causes: pd.DataFrame | None = None) -> list[Block]:
    """The verdicts of :func:`rl_goal` on the goal conditions: the best RL agent within noise of the best
    supervised model, and the counted (condition, RL agent) pairs significantly behind it. The goal's counts are
    stated on all 10 base and two-scorer conditions: on fewer (a comparison of some of them) the counts are
    shown and the goal is not judged. With ``causes`` (:func:`cause_table`), also on how many of them the best
    rule on tabular Q's own state (``bor-dp``) is itself significantly behind the best supervised model. Where
    ``goal`` records the runs of an agent that starts from a supervised model (:func:`rl_goal`'s ``runs`` and
    ``kept_start``), the count without such agents is followed by how many of their runs on these conditions kept
    that start untrained. Every "best" breaks equal means by name (:func:`experiments.report.tables.best_of`)."""
    g = goal[goal["goal_condition"]] if len(goal) else goal
    if g.empty:
        return []
    best = g[g["best_rl"]]
    counted = g[g["counted"]]
    n_ok, n_behind = int(best["within_noise"].sum()), int(counted["behind"].sum())
    own = g[~g["agent"].isin(list(FROM_SUPERVISED_AGENTS))]
    by_cond = [c.set_index("agent") for _, c in own.groupby("condition", sort=False)]
    own_best = [c.loc[best_of(c[JUDGED])] for c in by_cond]  # each condition's best, equal means by name
    n_own = sum(bool(r["within_noise"]) for r in own_best)
    starts = "; ".join(f"{a}, which starts from {m}" for a, m in FROM_SUPERVISED_AGENTS.items() if a in set(g["agent"]))
    kept = "".join(
        f" {a} kept that start, untrained, in {int(r['kept_start'].sum())} of its {int(r['runs'].sum())} runs on "
        "these conditions."
        for a in FROM_SUPERVISED_AGENTS
        if "runs" in g and (r := g[(g["agent"] == a) & g["runs"].notna()]).size
    )
    without = (
        f" Without {starts}, the best RL agent is within noise of it or ahead on {n_own} of {len(own_best)}.{kept}"
        if starts
        else ""
    )
    every = g.groupby("agent", sort=False)["behind"].agg(["sum", "size"])
    per_agent = ", ".join(f"{agent} {int(r['sum'])} of {int(r['size'])}" for agent, r in every.iterrows())
    conds = set(best["condition"])
    n_base, n_two = len(conds & set(GOAL_BASE_CONDITIONS)), len(conds & set(GOAL_TWO_SCORER_CONDITIONS))
    n_goal = len(GOAL_BASE_CONDITIONS) + len(GOAL_TWO_SCORER_CONDITIONS)
    judged = n_base + n_two == n_goal

    def verdict(bound: str, met: bool) -> str:
        return f"goal: {bound}; {'met' if met else 'NOT met'}" if judged else f"goal on all {n_goal}: {bound}"

    within = verdict(f">= {GOAL_MIN_RL_WITHIN_NOISE}", n_ok >= GOAL_MIN_RL_WITHIN_NOISE)
    pairs = verdict(f"at most {GOAL_MAX_RL_BEHIND}", n_behind <= GOAL_MAX_RL_BEHIND)

    where = (
        f"on the {n_goal} base and two-scorer conditions"
        if judged
        else f"on {n_base} base and {n_two} two-scorer conditions of its {n_goal}: not judged here"
    )
    return [
        Bullets(
            [
                f"RL against the best supervised model (goal of issue 39, {where}): the best RL agent is within noise "
                f"of it or ahead on {n_ok} of {len(best)} ({within}); {' and '.join(GOAL_RL_AGENTS)} are significantly "
                f"behind it in {n_behind} of {len(counted)} (condition, RL agent) pairs ({pairs}). "
                f"Significantly behind, per RL agent: {per_agent} (`rl_goal.csv`)."
                + without
                + _tabular_state_count(causes, conds)
            ]
        )
    ]


__all__ = [
    "CAUSE_COLUMNS",
    "CAUSES_HEADING",
    "cause_section",
    "cause_sentence",
    "cause_table",
    "rl_goal",
    "rl_goal_bullets",
    "run_objectives",
    "tabular_sentence",
]
