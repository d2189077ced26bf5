"""Which cells a command runs: conditions, their episode settings and method lists."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from agents.dqn import DQNConfig
from agents.tabular import TabularConfig
from envs import EpisodeConfig
from experiments.config import FIXED_KS, Cell, MethodSpec


@dataclass(frozen=True)
class ConditionPlan:
    """A condition of the study and how the paper trained on it."""

    benchmark: str
    scorer: str
    variant: str = ""
    step_cost: float = 0.01
    gamma: float = 0.95
    constant_reward: bool = False
    """Also train the constant-reward ablation (the paper's BFCL+BM25 F1 row)."""
    sweep_only: bool = False
    """A registry-size sweep point: BoR-DQN and fixed K in {1, 5, 10} only."""

    @property
    def name(self) -> str:
        base = f"{self.benchmark}-{self.scorer}"
        return f"{base}-{self.variant}" if self.variant else base


#: The study's conditions (SPEC section 6) in report order; the paper's per-condition settings.
PLANS: dict[str, ConditionPlan] = {
    p.name: p
    for p in (
        ConditionPlan("bfcl", "bm25", step_cost=0.005, constant_reward=True),
        ConditionPlan("bfcl", "minilm"),
        ConditionPlan("metatool", "bm25", gamma=1.0),
        ConditionPlan("metatool", "minilm"),
        ConditionPlan("metatool", "minilm", "top20"),
        ConditionPlan("metatool", "minilm", "top50"),
        ConditionPlan("metatool", "minilm", "top100"),
        ConditionPlan("toolbench", "minilm"),
    )
}


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
for _family, _points in SWEEPS.items():
    for _n, _name in _points:
        if _name not in PLANS:
            _bench, _scorer, _variant = _name.split("-", 2)
            _base = PLANS.get(f"{_bench}-{_scorer}", ConditionPlan(_bench, _scorer))
            PLANS[_name] = ConditionPlan(_bench, _scorer, _variant, _base.step_cost, _base.gamma, sweep_only=True)
#: The paper's main-table conditions (SPEC section 6), in report order.
MAIN_CONDITIONS = (
    "bfcl-bm25",
    "bfcl-minilm",
    "metatool-bm25",
    "metatool-minilm",
    "metatool-minilm-top20",
    "metatool-minilm-top50",
    "metatool-minilm-top100",
    "toolbench-minilm",
)


def methods_for(plan: ConditionPlan, agents: Sequence[str] = ("dqn", "tabular", "fixed")) -> list[MethodSpec]:
    """BoR-DQN, F1-DQN (+ constant-DQN where the paper used it), BoR-tabular and fixed K."""
    out: list[MethodSpec] = []
    if plan.sweep_only:
        return [MethodSpec("dqn", "bor"), *(MethodSpec("fixed", "bor", k) for k in (1, 5, 10))]
    if "dqn" in agents:
        out += [MethodSpec("dqn", "bor"), MethodSpec("dqn", "f1")]
        if plan.constant_reward:
            out.append(MethodSpec("dqn", "constant"))
    if "tabular" in agents:
        out.append(MethodSpec("tabular", "bor"))
    if "fixed" in agents:
        out += [MethodSpec("fixed", "bor", k) for k in FIXED_KS]
    return out


def cells_for(
    plans: Sequence[ConditionPlan],
    seeds: Sequence[int],
    methods: dict[str, list[MethodSpec]] | None = None,
    *,
    dqn: DQNConfig | None = None,
    tabular: TabularConfig | None = None,
    step_cost: float | None = None,
    gamma: float | None = None,
    max_depth: int | None = None,
    split_seed: int = 0,
    buckets: str = "",
    options: tuple[tuple[str, str], ...] = (),
) -> list[Cell]:
    """Every (condition, method, seed) cell; explicit step_cost/gamma override the plan's."""
    cells = []
    for plan in plans:
        episode_base = EpisodeConfig(
            step_cost=plan.step_cost if step_cost is None else step_cost,
            gamma=plan.gamma if gamma is None else gamma,
            max_depth=max_depth,
        )
        for m in (methods or {}).get(plan.name) or methods_for(plan):
            episode = replace(episode_base, reward=m.reward if m.agent != "fixed" else "bor")
            for seed in seeds:
                cells.append(
                    Cell(
                        plan.benchmark,
                        plan.scorer,
                        m,
                        int(seed),
                        episode,
                        dqn or DQNConfig(),
                        tabular or TabularConfig(),
                        split_seed,
                        plan.variant,
                        buckets,
                        options,
                    )
                )
    return cells
