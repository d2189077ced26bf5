"""The study plan: which conditions, methods and seeds each command runs, and the stated goals.

Everything a reader needs to know about *what* the study runs is here, as plain data:
the paper's conditions with their episode settings (:data:`PLANS`), the registry-size
sweeps (:data:`SWEEPS`), the method lists of ``reproduce`` and ``compare``, and the goal
thresholds checked in the reports. :func:`cells_for` turns plans into cells.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agents import registry
from agents.method import MethodSpec
from benchmarks.names import ConditionId
from benchmarks.synthetic import SyntheticSpec
from envs import EpisodeConfig, EpisodeOverrides
from experiments.config import Cell

FIXED_KS = (1, 3, 5, 10, 20, 50)
"""Fixed-K baselines of the study (the paper's grid)."""
SWEEP_FIXED_KS = (1, 5, 10)
"""Fixed-K baselines at registry-size sweep points."""
DEFAULT_SEEDS = (42,)
"""Training seeds of ``reproduce``, ``compare`` and ``train`` by default: one per train/test split (five splits
on the main conditions), the configuration the committed results are made in."""
FULL_SEEDS = (42, 123, 456)
"""The documented full run (``--seeds 42 123 456``): three training seeds per split, as the README's BFCL main
job runs; also the seeds ``shortlist tune`` judges settings on (never one seed)."""
DEFAULT_SPLIT_SEEDS = (0, 1, 2, 3, 4)
"""Train/test split seeds of the main conditions of ``reproduce`` and ``compare`` (every other suite
runs on the first): each is its own seeded 70/30 split, so no number rests on one lucky split."""


@dataclass(frozen=True)
class ConditionPlan:
    """A condition of the study and how the paper trained on it."""

    condition: ConditionId
    episode: EpisodeConfig = EpisodeConfig()
    """The condition's episode settings, over :class:`envs.EpisodeConfig`'s defaults (the one place they
    are set): its step cost c is the learners' step cost and the c of the judged net reward (found x
    -log2 P_rand(K) - c (K - 1); :func:`agents.base.judged_objective`); its discount is 1, so every
    learner trains on the judged objective itself (the paper used 0.95 on most conditions; see README).
    A command line's :class:`envs.EpisodeOverrides` apply on top of it."""
    constant_reward: bool = False
    """Also train the constant-reward ablation (the paper's BFCL+BM25 F1 row)."""
    suite: str = "main"
    """``main`` (the paper's table), ``hybrid`` (two scorers: the other scorer observed beside the
    ranking one, the fused ranking, ToolBench with BM25: BoR-DQN, BoR-tabular, the BoR cut-off and fixed
    K), ``text`` (BFCL with the richer tool text, beside SPEC's: the same methods), ``multi`` (several
    relevant tools), ``sweep`` (a registry-size sweep point: BoR-DQN and fixed K in
    :data:`SWEEP_FIXED_KS`) or ``synthetic`` (the controlled-difficulty study: every applicable peer and
    limit, tabular Q, DQN on :data:`DQN_SUBSET`)."""

    @property
    def name(self) -> str:
        return self.condition.name

    @property
    def sweep_only(self) -> bool:
        return self.suite == "sweep"


def _plan(name: str, **kw: object) -> ConditionPlan:
    return ConditionPlan(ConditionId.parse(name), **kw)  # type: ignore[arg-type]


#: The paper's main-table conditions (SPEC section 6), in report order, with its per-condition settings.
MAIN_PLANS: tuple[ConditionPlan, ...] = (
    _plan("bfcl-bm25", episode=EpisodeConfig(step_cost=0.005), constant_reward=True),
    _plan("bfcl-minilm"),
    _plan("metatool-bm25"),
    _plan("metatool-minilm"),
    _plan("metatool-minilm-top20"),
    _plan("metatool-minilm-top50"),
    _plan("metatool-minilm-top100"),
    _plan("toolbench-minilm"),
)
MAIN_CONDITIONS: tuple[str, ...] = tuple(p.name for p in MAIN_PLANS)

#: Registry-size sweep: family -> [(N, condition)], random sub-registries that always hold the
#: query's gold tool (``sub<N>``), plus the MetaTool top-distractor sets and the full registries.
SWEEPS: dict[str, list[tuple[int, str]]] = {
    "metatool": [(20, "metatool-minilm-top20"), (50, "metatool-minilm-top50"), (100, "metatool-minilm-top100")],
    "toolbench": [
        (20, "toolbench-minilm-sub20"),
        (50, "toolbench-minilm-sub50"),
        (100, "toolbench-minilm-sub100"),
        (500, "toolbench-minilm-sub500"),
        (1000, "toolbench-minilm-sub1000"),
        (3406, "toolbench-minilm-full"),
    ],
    "bfcl": [
        (20, "bfcl-bm25-sub20"),
        (50, "bfcl-bm25-sub50"),
        (100, "bfcl-bm25-sub100"),
        (200, "bfcl-bm25-sub200"),
        (370, "bfcl-bm25"),
    ],
}


# ----------------------------------------------------------------------------- synthetic study (SPEC: a
# controlled-difficulty benchmark with a known optimum, see benchmarks/synthetic.py and agents/bayes.py)

#: The base point every axis passes through: N = 100, d' = 2, normal noise, seeded 70/30 split of 2,000 queries.
SYNTHETIC_BASE = SyntheticSpec(n=100, separation=2.0)


def _v(**changes: object) -> str:
    fields = {**SYNTHETIC_BASE.as_dict(), **changes}
    return SyntheticSpec(**fields).variant


#: axis -> (x field of the spec, variants in x order). The base variant appears on several axes.
SYNTHETIC_AXES: dict[str, tuple[str, list[str]]] = {
    "difficulty": ("separation", [_v(separation=s) for s in (0.5, 1.0, 2.0, 3.0, 4.0)]),
    "distractors": (
        "distribution",
        [_v(), _v(distribution="student-t", df=3.0), _v(ties=0.25)],
    ),
    # fixed test size: n_queries = train + 1000, so every point is scored on 1,000 test queries
    "train": ("train", [_v(train=m, n_queries=m + 1000) for m in (25, 50, 100, 200, 400, 800)]),
    "noise": ("noise", [_v(noise=p) for p in (0.0, 0.1, 0.2, 0.3)]),
}

#: Every variant the study runs (16 conditions), in axis order without repeats.
SYNTHETIC_GRID: list[str] = list(dict.fromkeys(v for _, vs in SYNTHETIC_AXES.values() for v in vs))

#: DQN is too slow for the whole grid on 2 cores: it runs on the difficulty axis only.
DQN_SUBSET: list[str] = list(SYNTHETIC_AXES["difficulty"][1])


def base_plan(condition: ConditionId) -> ConditionPlan:
    """The plan of ``condition``: its own, else its base condition's settings, else the defaults."""
    main = {p.name: p for p in MAIN_PLANS}
    if condition.name in main:
        return main[condition.name]
    base = main.get(condition.base.name)
    if base is None:
        return ConditionPlan(condition)
    return ConditionPlan(condition, base.episode)


def _sweep_plans() -> tuple[ConditionPlan, ...]:
    main = set(MAIN_CONDITIONS)
    names = [name for points in SWEEPS.values() for _, name in points if name not in main]
    return tuple(replace(base_plan(ConditionId.parse(n)), suite="sweep") for n in dict.fromkeys(names))


#: BFCL with the richer tool text (function name + description + parameter names), both scorers:
#: the main BFCL conditions use SPEC's text (description + parameter names); these show the other.
TEXT_PLANS: tuple[ConditionPlan, ...] = tuple(
    replace(base_plan(ConditionId("bfcl", s, "richtext")), suite="text") for s in ("bm25", "minilm")
)

#: MetaTool's multi-tool queries (R = 2): both scorers, MetaTool's candidate-set rule for several gold tools.
MULTI_PLANS: tuple[ConditionPlan, ...] = tuple(
    replace(base_plan(ConditionId("metatool", s, "multi")), suite="multi") for s in ("bm25", "minilm")
)
SYNTHETIC_PLANS: tuple[ConditionPlan, ...] = tuple(
    ConditionPlan(ConditionId("synthetic", "gen", v), suite="synthetic") for v in SYNTHETIC_GRID
)

#: Two scorers on identical candidate sets, per benchmark: each scorer's ranking with the other's
#: scores observed beside it (``hybrid``: the two-scorer features of envs/features.py), the fused
#: ranking (weighted z-fusion, weight fitted on each training split) and ToolBench with BM25 (the
#: score-only base of ``toolbench-bm25-hybrid``; the paper ran ToolBench with MiniLM only).
HYBRID_PLANS: tuple[ConditionPlan, ...] = tuple(
    replace(base_plan(ConditionId.parse(name)), suite="hybrid")
    for b in ("bfcl", "metatool", "toolbench")
    for name in (
        *((f"{b}-bm25",) if b == "toolbench" else ()),
        f"{b}-bm25-hybrid",
        f"{b}-minilm-hybrid",
        f"{b}-fused",
    )
)

#: Every condition ``shortlist reproduce`` runs, in report order.
PLANS: dict[str, ConditionPlan] = {
    p.name: p for p in (*MAIN_PLANS, *HYBRID_PLANS, *TEXT_PLANS, *MULTI_PLANS, *_sweep_plans(), *SYNTHETIC_PLANS)
}

# ----------------------------------------------------------------------------- methods

#: Learned agents of ``shortlist compare`` and the ones whose goal is checked ("the BoR agent").
COMPARE_AGENTS: tuple[MethodSpec, ...] = (
    MethodSpec("dqn", "bor"),
    MethodSpec("tabular", "bor"),
    MethodSpec("cutoff", "bor"),
    MethodSpec("posterior", "bor"),
    MethodSpec("pfound", "bor"),
    MethodSpec("fqi", "bor"),
    MethodSpec("ppo", "bor"),
    MethodSpec("residual", "bor"),
    MethodSpec("dqn", "f1"),
)
#: The information probe of the comparison: this RL agent also runs on the ``listwise`` observation (the listwise
#: posterior's per-item view of the top ranks), beside its run on the summary features
#: (:mod:`experiments.report.causes`). Fitted Q on the full data: the RL agent with the optimisation taken out of
#: the way (no exploration, exact targets), so what the richer observation adds is measured on its own, and the
#: cheapest RL fit.
INFORMATION_PROBE = MethodSpec("fqi", "bor")
INFORMATION_OBSERVATION = "listwise"
INFORMATION_LABEL = f"{INFORMATION_PROBE.name}@{INFORMATION_OBSERVATION}"
BOR_AGENTS: tuple[str, ...] = (
    "bor-dqn",
    "bor-tabular",
    "bor-cutoff",
    "bor-posterior",
    "bor-pfound",
    "bor-fqi",
    "bor-ppo",
    "bor-residual",
    INFORMATION_LABEL,
)
#: The BoR agents trained by RL, each compared with the supervised learned models (the residual DQN starts from
#: one of them, the posterior: :mod:`agents.residual`).
RL_AGENTS: tuple[str, ...] = ("bor-dqn", "bor-tabular", "bor-fqi", "bor-ppo", "bor-residual", INFORMATION_LABEL)
#: The RL agents that start from a supervised model, each with the words the reports name that model by (the residual
#: DQN starts from the posterior's own Q-values): the reports also say where the best RL agent stands without them,
#: so a goal met through them is not mistaken for RL that learned on its own.
FROM_SUPERVISED_AGENTS: dict[str, str] = {"bor-residual": "the posterior model"}
#: The RL agents whose (condition, agent) pairs the goal of issue 39 counts ("significantly behind the best
#: supervised model on at most 2 of 20"): the two RL agents that issue measured (DQN, tabular Q), so the count
#: compares with its 18 of 20. The agents added since (fitted Q, PPO, fitted Q on listwise, the residual DQN)
#: measure the causes (:mod:`experiments.report.causes`) and take part in "the best RL agent"; their pairs are
#: reported beside.
GOAL_RL_AGENTS: tuple[str, ...] = ("bor-dqn", "bor-tabular")
#: At most this many (condition, goal RL agent) pairs significantly behind the best supervised model.
GOAL_MAX_RL_BEHIND = 2
#: On at least this many of the 10 base and two-scorer conditions the best RL agent is within noise of (or
#: ahead of) the best supervised model.
GOAL_MIN_RL_WITHIN_NOISE = 8
#: The supervised learned policies (no bootstrapping), each RL agent is compared with. The P(found) stop is the
#: cut-off made stepwise (:mod:`agents.pfound`): on an examined-only set (``strict``) it is the supervised model that
#: decides from the examined items only, as the RL agents do there.
SUPERVISED_AGENTS: tuple[str, ...] = ("bor-cutoff", "bor-posterior", "bor-pfound")
#: Methods drawn in the per-bucket figures of the study and of the comparison.
STUDY_BUCKET_METHODS = (
    "bor-dqn",
    "f1-dqn",
    "constant-dqn",
    "bor-tabular",
    "bor-cutoff",
    "bor-posterior",
    "fixed-1",
    "fixed-5",
)
COMPARE_BUCKET_METHODS = (
    "bor-dqn",
    "bor-tabular",
    "bor-cutoff",
    "bor-posterior",
    "f1-dqn",
    "gap-tail10-buffer5",
    "bor-threshold",
    "bor-greedyk",
    "bor-choppy",
    "bor-dp",
    "oracle",
)
#: Goal thresholds, stated before running and reported either way.
GOAL_FRACTION_OF_DP = 0.9


def fixed_n(plan: ConditionPlan) -> int | None:
    """The candidate-set size every query of ``plan``'s condition has (``top20``: 20, ``sub50``: 50, a
    synthetic N), or None where it is the registry's or varies (a user's run, BEIR, a log)."""
    from benchmarks.conditions import candidate_rule

    try:
        return candidate_rule(plan.condition.benchmark, plan.condition.variant).n
    except ValueError:
        return None


def beyond_n(plan: ConditionPlan, methods: Sequence[MethodSpec], n: int | None = None) -> list[MethodSpec]:
    """The fixed-K methods of ``methods`` whose K exceeds the list size (``n``, else ``plan``'s candidate-set size
    :func:`fixed_n`): each would show the whole list under another K's name (fixed-50 on a list of 20 is
    fixed-20), so the plans leave them out. ``n`` is the largest list of a condition whose size only its data
    knows (a log's registry, a run's lists, a BEIR corpus): :func:`experiments.pipeline.largest_list`."""
    n = fixed_n(plan) if n is None else n
    return [m for m in methods if n is not None and m.agent == "fixed" and m.k > n]


def within_n(plan: ConditionPlan, methods: Sequence[MethodSpec], n: int | None = None) -> list[MethodSpec]:
    """``methods`` without :func:`beyond_n`'s."""
    drop = beyond_n(plan, methods, n)
    return [m for m in methods if m not in drop]


def left_out_note(
    plans: Sequence[ConditionPlan],
    methods: Callable[[ConditionPlan], Sequence[MethodSpec]],
    n: int | None = None,
    name: str = "",
) -> str:
    """One console line naming the fixed-K methods the plans leave out (:func:`beyond_n`) with ``methods`` (a
    plan's full method list), or "" when none is; ``name``: the condition's full name where the plan's is a stub
    (a user's run: ``run-<file>-<digest>``, known once its data are read)."""
    out = []
    for plan in plans:
        drop = beyond_n(plan, methods(plan), n)
        if drop:
            size = f"N = {fixed_n(plan)}" if n is None else f"lists of {n} at most"
            out.append(f"{', '.join(m.name for m in drop)} on {name or plan.name} ({size})")
    if not out:
        return ""
    return f"left out, a fixed K above the list's size (the whole list under another K's name): {'; '.join(out)}"


def methods_for(plan: ConditionPlan, agents: Sequence[str] = ("dqn", "tabular", "cutoff", "fixed")) -> list[MethodSpec]:
    """``reproduce``'s methods: BoR-DQN, F1-DQN (+ constant-DQN where the paper used it), BoR-tabular, the
    BoR expected-reward cut-off, fixed K;
    on sweep points BoR-DQN and a few fixed K; on synthetic conditions :func:`synthetic_methods`. A fixed K
    above the condition's candidate-set size is left out (:func:`beyond_n`)."""
    return within_n(plan, all_methods_for(plan, agents))


def all_methods_for(
    plan: ConditionPlan, agents: Sequence[str] = ("dqn", "tabular", "cutoff", "fixed")
) -> list[MethodSpec]:
    """:func:`methods_for` before a fixed K above the list's size is left out."""
    if plan.suite == "sweep":
        return [MethodSpec("dqn", "bor"), *(MethodSpec("fixed", "bor", k) for k in SWEEP_FIXED_KS)]
    if plan.suite == "synthetic":
        return synthetic_methods(plan)
    if plan.suite in ("text", "hybrid"):
        return [
            MethodSpec("dqn", "bor"),
            MethodSpec("tabular", "bor"),
            MethodSpec("cutoff", "bor"),
            MethodSpec("posterior", "bor"),
            *(MethodSpec("fixed", "bor", k) for k in FIXED_KS),
        ]
    out: list[MethodSpec] = []
    if "dqn" in agents:
        out += [MethodSpec("dqn", "bor"), MethodSpec("dqn", "f1")]
        if plan.constant_reward:
            out.append(MethodSpec("dqn", "constant"))
    if "tabular" in agents:
        out.append(MethodSpec("tabular", "bor"))
    if "cutoff" in agents:
        out += [MethodSpec("cutoff", "bor"), MethodSpec("posterior", "bor")]
    if "fixed" in agents:
        out += [MethodSpec("fixed", "bor", k) for k in FIXED_KS]
    return out


def _applicable(group: registry.Group, benchmark: str) -> list[MethodSpec]:
    return [MethodSpec(k) for k in registry.kinds(group) if registry.KINDS[k].applies_to(benchmark)]


def compare_methods(benchmark: str = "") -> list[MethodSpec]:
    """``compare``'s methods on ``benchmark``: the agents, every applicable registered peer and limit,
    and fixed K, in report order."""
    peers, limits = _applicable("peer", benchmark), _applicable("limit", benchmark)
    return [*COMPARE_AGENTS, *peers, *limits, *(MethodSpec("fixed", "bor", k) for k in FIXED_KS)]


def synthetic_methods(plan: ConditionPlan) -> list[MethodSpec]:
    """The synthetic study's methods: BoR tabular Q (+ BoR-DQN on :data:`DQN_SUBSET`), every applicable
    peer and limit (the Bayes optimum among them) and fixed K."""
    dqn = [MethodSpec("dqn", "bor")] if plan.condition.variant in DQN_SUBSET else []
    bench = plan.condition.benchmark
    return [
        *dqn,
        MethodSpec("tabular", "bor"),
        MethodSpec("cutoff", "bor"),
        MethodSpec("posterior", "bor"),
        *_applicable("peer", bench),
        *_applicable("limit", bench),
        *(MethodSpec("fixed", "bor", k) for k in FIXED_KS),
    ]


@dataclass(frozen=True)
class Learning:
    """What a command sets for the cells it trains, beside the plans: policy settings per kind, the episode
    overrides and the split seeds (:meth:`experiments.options.LearnArgs.learning` builds it from the command
    line). The episode settings stay an :class:`envs.EpisodeOverrides` until :func:`cells_for` applies them to
    each plan's :class:`envs.EpisodeConfig`."""

    settings: Mapping[str, Any] = field(default_factory=dict)
    """Kind name -> its settings dataclass (the ``--set`` items); other kinds keep their defaults."""
    overrides: EpisodeOverrides = EpisodeOverrides()
    """Episode settings that replace each plan's own."""
    split_seeds: tuple[int, ...] | None = None
    """Train/test split seeds; None: the command's default (:func:`plan_splits`, or split 0)."""

    @property
    def observation(self) -> str:
        """The observation set the learners read (``auto`` unless overridden)."""
        return self.overrides.observation or "auto"


def settings_of(method: MethodSpec, settings: Mapping[str, Any]) -> Any:
    """The settings a cell of ``method`` gets from a command's ``--set`` (kind -> settings): its kind's, and for
    ``auto`` also those of its candidate kinds (:func:`agents.auto.with_candidate_settings`)."""
    if method.agent != "auto":
        return settings.get(method.agent)
    from agents.auto import with_candidate_settings

    own = settings.get("auto")
    chosen = with_candidate_settings(own, settings)
    return None if own is None and not chosen.candidate_settings else chosen  # None: the defaults, as before


def cells_for(
    plans: Sequence[ConditionPlan],
    seeds: Sequence[int],
    methods: dict[str, list[MethodSpec]] | None = None,
    *,
    learning: Learning = Learning(),
    buckets: str = "",
    options: tuple[tuple[str, str], ...] = (),
) -> list[Cell]:
    """Every (condition, method, split, seed) cell: each plan's episode with ``learning.overrides`` applied
    (:meth:`envs.EpisodeOverrides.apply`), then the method's (:meth:`agents.method.MethodSpec.episode`);
    ``learning.split_seeds`` default to split 0 only; kinds named in ``learning.settings`` get those settings
    (:func:`settings_of`)."""
    cells = []
    for plan in plans:
        episode = learning.overrides.apply(plan.episode)
        for m in (methods or {}).get(plan.name) or methods_for(plan):
            for split in learning.split_seeds or (0,):
                for seed in seeds:
                    cells.append(
                        Cell(
                            plan.condition,
                            m,
                            int(seed),
                            m.episode(episode),
                            settings_of(m, learning.settings),
                            int(split),
                            buckets,
                            options,
                        )
                    )
    return cells


def plan_splits(plan: ConditionPlan, split_seeds: Sequence[int] | None) -> tuple[int, ...]:
    """The split seeds ``reproduce``/``compare`` run ``plan`` on: every one of ``split_seeds``
    (default :data:`DEFAULT_SPLIT_SEEDS`) on a main, two-scorer or tool-text condition, the first elsewhere."""
    splits = tuple(split_seeds) if split_seeds else DEFAULT_SPLIT_SEEDS
    return splits if plan.suite in ("main", "hybrid", "text") else splits[:1]


def _split_by_seed(
    plan: ConditionPlan, methods: list[MethodSpec], seeds: Sequence[int], learning: Learning
) -> list[Cell]:
    """Stochastic methods on every seed, deterministic ones on the first (other seeds repeat it),
    on every split of :func:`plan_splits`."""
    if not seeds:
        raise ValueError("give at least one seed")
    learning = replace(learning, split_seeds=plan_splits(plan, learning.split_seeds))
    stoch = [m for m in methods if m.kind.stochastic]
    det = [m for m in methods if not m.kind.stochastic]
    cells = cells_for([plan], seeds, {plan.name: stoch}, learning=learning) if stoch else []
    return cells + (cells_for([plan], list(seeds)[:1], {plan.name: det}, learning=learning) if det else [])


def study_cells(plans: Sequence[ConditionPlan], seeds: Sequence[int], learning: Learning = Learning()) -> list[Cell]:
    """``reproduce``'s cells: every method on every seed and split of :func:`plan_splits`, except on
    synthetic conditions, where deterministic methods run once (the first seed)."""
    cells: list[Cell] = []
    for plan in plans:
        if plan.suite == "synthetic":
            cells += _split_by_seed(plan, methods_for(plan), seeds, learning)
        else:
            splits = replace(learning, split_seeds=plan_splits(plan, learning.split_seeds))
            cells += cells_for([plan], seeds, learning=splits)
    return cells


def compare_cells(plans: Sequence[ConditionPlan], seeds: Sequence[int], learning: Learning = Learning()) -> list[Cell]:
    """Every cell of the comparison: stochastic methods on all seeds, the rest on the first, and the information
    probe (:data:`INFORMATION_PROBE` on the :data:`INFORMATION_OBSERVATION` set, run id tagged
    ``@listwise``) unless the comparison itself names an observation set.

    The two-scorer suite and a comparison on a named observation set (``observation`` other than
    ``auto``) leave out the F1 ablation (F1-DQN): they ask what the state adds, while the F1
    question is about the reward and is answered on the main conditions.
    """
    if not seeds:
        raise ValueError("give at least one seed")
    cells: list[Cell] = []
    probe = replace(learning, overrides=replace(learning.overrides, observation=INFORMATION_OBSERVATION))
    for plan in plans:
        methods = within_n(plan, compare_methods(plan.condition.benchmark))
        if plan.suite == "hybrid" or learning.observation != "auto":
            methods = [m for m in methods if m.reward != "f1"]
        cells += _split_by_seed(plan, methods, seeds, learning)
        if learning.observation == "auto":  # the information probe (on a named set every learner reads that set)
            cells += _split_by_seed(plan, [INFORMATION_PROBE], seeds, probe)
    return cells


def resolve_plans(
    only: Sequence[str], suites: Sequence[str] = ("main", "hybrid", "text", "multi", "sweep", "synthetic")
) -> list[ConditionPlan]:
    """Plans named in ``only`` (ValueError naming unknown ones); default every plan of ``suites``."""
    unknown = [c for c in only if c not in PLANS]
    if unknown:
        raise ValueError(f"unknown condition(s) {unknown}; expected some of {', '.join(PLANS)}")
    if only:
        return [PLANS[c] for c in dict.fromkeys(only)]
    return [p for p in PLANS.values() if p.suite in suites]


# ----------------------------------------------------------------------------- the downstream study

#: The largest shortlist the downstream chooser sees (every downstream cell is capped there).
MAX_K = 20
#: The paper's Table 1 setting the methods are retrained in.
STEP_COST, GAMMA = 0.01, 0.95
#: Conditions of the study (BFCL, both scorers: the paper's Table 1 ran BFCL).
DOWNSTREAM_CONDITIONS = ("bfcl-bm25", "bfcl-minilm")
#: The methods whose shortlists the chooser is shown.
DOWNSTREAM_METHODS: tuple[MethodSpec, ...] = (
    MethodSpec("dqn", "bor"),
    MethodSpec("dqn", "f1"),
    MethodSpec("fixed", "bor", 1),
    MethodSpec("fixed", "bor", 5),
    MethodSpec("threshold", "bor"),
    MethodSpec("greedyk", "bor"),
    MethodSpec("cutoff", "bor"),
    MethodSpec("posterior", "bor"),
)
#: Kinds trained on the chooser's outcome (cross-fitted), each against its BoR-trained counterpart.
#: Distraction strengths of the sensitivity sweep: multiples of the simulated chooser's K penalty ``b``.
STRENGTHS = (0.0, 0.5, 1.0, 2.0, 4.0)


#: ``compare`` defaults to these suites (the sweep points and the synthetic study have their own reports).
COMPARE_SUITES = ("main", "hybrid", "multi")
#: ``bench`` times the per-condition fits on the conditions ``compare`` runs (two-scorer ones included).
BENCH_SUITES = COMPARE_SUITES


def condition_order(conds: Sequence[str]) -> list[str]:
    """Conditions in plan order, unknown ones after, sorted."""
    known = [c for c in PLANS if c in conds]
    return known + sorted(c for c in set(conds) if c not in PLANS)
