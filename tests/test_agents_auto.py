"""``auto``: picks the candidate with the best validation net reward on an inner split of the training
queries (never the test ones; k-fold cross-validation when that split would validate on fewer than 30), refits
it on all of them, does not depend on the order the queries come in, and round-trips through the chosen kind's
JSON file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agents import registry
from agents.auto import AutoConfig, AutoPolicy, cv_folds, inner_split, net_reward, net_rewards
from agents.peers import objective_matrix
from envs import EpisodeConfig, RankedQuery

CANDIDATES = ("gap", "threshold", "cutoff", "posterior")


def noisy_lists(count: int, n: int = 30, seed: int = 0) -> list[RankedQuery]:
    """Random sorted scores; the gold sits at rank 1 when the top score stands out, deeper otherwise."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        s = np.sort(rng.random(n))[::-1].copy()
        clear = rng.random() < 0.6
        if clear:
            s[0] += 1.0
        gold = 1 if clear else int(rng.integers(2, 8))
        out.append(RankedQuery(s, [gold], f"q{i:03d}"))
    return out


def fitted(queries: list[RankedQuery], cfg: EpisodeConfig, min_validation: int = 30) -> AutoPolicy:
    settings = AutoConfig(candidates=CANDIDATES, inner_seed=5, min_validation=min_validation)
    return AutoPolicy("bor", settings).fit(queries, cfg, 0)


def test_picks_the_best_validation_net_reward_and_refits_on_all_training_queries() -> None:
    cfg = EpisodeConfig(step_cost=0.05)
    queries = noisy_lists(80)
    auto = fitted(queries, cfg, min_validation=0)  # one inner split, whatever the size
    assert auto.selection == "split"
    fit_idx, val_idx = inner_split(queries, 0.7, 5)
    assert set(fit_idx).isdisjoint(val_idx) and sorted(fit_idx + val_idx) == list(range(80))
    val_q = [queries[i] for i in val_idx]
    for kind in CANDIDATES:  # every score is the candidate's net reward on the validation queries
        policy = registry.make(kind, "bor").fit([queries[i] for i in fit_idx], cfg, 0)
        assert auto.validation[kind] == pytest.approx(net_reward(policy.depths(val_q, cfg), val_q, cfg))
    assert auto.chosen == max(CANDIDATES, key=lambda k: auto.validation[k])
    refit = registry.make(auto.chosen, "bor").fit(queries, cfg, 0)
    test = noisy_lists(40, seed=9)
    np.testing.assert_array_equal(auto.depths(test, cfg), refit.depths(test, cfg))


def test_net_reward_is_the_judged_objective() -> None:
    cfg = EpisodeConfig(step_cost=0.1)
    queries = noisy_lists(10, n=12)
    depths = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 40])  # the last one beyond the list: clipped to its cap
    table, caps = objective_matrix(queries, cfg, "bor", "net")
    by_hand = np.mean([table[i, min(k, caps[i]) - 1] for i, k in enumerate(depths)])
    assert net_reward(depths, queries, cfg) == pytest.approx(by_hand)
    gold_one = [q for q in queries if q.gold_rank == 1]
    assert net_reward(np.ones(len(gold_one), dtype=np.int64), gold_one, cfg) == pytest.approx(np.log2(12))


def test_small_training_sets_are_compared_by_cross_validation() -> None:
    """Under 99 training queries an inner 30% split would validate on fewer than 30 (min_validation): the
    candidates are scored by 5-fold cross-validation, every training query once, by a fit that never saw it."""
    settings = AutoConfig(candidates=CANDIDATES, inner_seed=5)
    assert settings.uses_cv(98) and not settings.uses_cv(99)  # 98 - round(68.6) = 29 < 30; 99 - 69 = 30
    assert not AutoConfig(min_validation=0).uses_cv(3)
    cfg = EpisodeConfig(step_cost=0.05)
    queries = noisy_lists(40, seed=2)
    auto = fitted(queries, cfg)
    assert auto.selection == "5-fold cross-validation"
    folds = cv_folds(queries, 5, 5)
    assert sorted(i for f in folds for i in f) == list(range(40)) and {len(f) for f in folds} == {8}
    for kind in CANDIDATES:
        scores = []
        for fold in folds:
            fit_q = sorted((queries[i] for f in folds if f is not fold for i in f), key=lambda q: q.qid)
            policy = registry.make(kind, "bor").fit(fit_q, cfg, 0)
            val_q = [queries[i] for i in fold]
            scores.append(net_rewards(policy.depths(val_q, cfg), val_q, cfg))
        assert auto.validation[kind] == pytest.approx(float(np.concatenate(scores).mean()))
    assert auto.chosen == max(CANDIDATES, key=lambda k: auto.validation[k])
    assert len(cv_folds(queries[:3], 5, 0)) == 3  # fewer queries than folds: leave-one-out


@pytest.mark.parametrize("min_validation", [0, 30])  # one split, and cross-validation
def test_the_order_of_the_queries_changes_nothing(min_validation: int) -> None:
    cfg = EpisodeConfig(step_cost=0.05)
    queries = noisy_lists(60, seed=3)
    shuffled = [queries[i] for i in np.random.default_rng(1).permutation(len(queries))]
    a, b = fitted(queries, cfg, min_validation), fitted(shuffled, cfg, min_validation)
    assert a.chosen == b.chosen and a.validation == pytest.approx(b.validation)
    test = noisy_lists(30, seed=4)
    np.testing.assert_array_equal(a.depths(test, cfg), b.depths(test, cfg))


def test_save_and_load_through_the_chosen_kind(tmp_path: Path) -> None:
    cfg = EpisodeConfig(step_cost=0.05)
    auto = fitted(noisy_lists(60, seed=6), cfg)
    path = tmp_path / "agent.json"
    auto.save(path)
    saved = json.loads(path.read_text())
    assert saved["auto"]["chosen"] == auto.chosen and list(saved["auto"]["candidates"]) == list(CANDIDATES)
    back = registry.get("auto").load(path, "bor")
    assert back.chosen == auto.chosen and back.validation == pytest.approx(auto.validation)
    assert saved["auto"]["selection"] == back.selection == "5-fold cross-validation"
    test = noisy_lists(30, seed=7)
    np.testing.assert_array_equal(back.depths(test, cfg), auto.depths(test, cfg))
    path.write_text('{"auto": {"chosen": "gap"}}')
    with pytest.raises(ValueError, match="malformed auto policy file"):
        registry.get("auto").load(path, "bor")


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"candidates": ()}, "at least one kind"),
        ({"inner_frac": 1.0}, r"inner_frac must lie in \(0, 1\)"),
        ({"cv_folds": 1}, "cv_folds >= 2"),
        ({"min_validation": -1}, "min_validation >= 0"),
    ],
)
def test_bad_settings_are_refused(settings: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AutoConfig(**settings)


def test_one_training_query_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2 training queries"):
        AutoPolicy().fit(noisy_lists(1), EpisodeConfig(), 0)
    with pytest.raises(RuntimeError, match="call fit"):
        AutoPolicy().depths(noisy_lists(2), EpisodeConfig())


def test_the_commands_settings_reach_the_candidates_auto_fits(tmp_path: Path) -> None:
    """``--set cutoff.epochs=3`` on an ``auto`` cell: the cut-off auto fits (and refits, when it picks it) is built
    with 3 epochs, its run's config records it (so its hash differs from the defaults'), a non-candidate kind's
    item is refused, and without any candidate item the cell is the one it was (settings None)."""
    from agents import registry
    from agents.auto import AutoConfig, with_candidate_settings
    from agents.method import MethodSpec
    from experiments.plan import settings_of

    given = registry.parse_settings(["cutoff.epochs=3", "dqn.total_timesteps=5000", "auto.inner_seed=5"])
    cell = settings_of(MethodSpec("auto"), given)
    assert cell == AutoConfig(inner_seed=5, candidate_settings=("cutoff.epochs=3",))
    assert settings_of(MethodSpec("auto"), registry.parse_settings(["dqn.total_timesteps=5000"])) is None
    assert settings_of(MethodSpec("cutoff"), given) == given["cutoff"]
    assert with_candidate_settings(None, {}) == AutoConfig()
    with pytest.raises(ValueError, match="'dqn' is not a candidate kind"):
        AutoConfig(candidate_settings=("dqn.double_q=true",))
    with pytest.raises(ValueError, match="'cutoff'.*'epochs'"):
        AutoConfig(candidate_settings=("cutoff.epochs=x",))
    built: list = []
    original = registry.make

    def spy(name: str, reward: str = "bor", settings: object = None):  # records what auto builds
        built.append((name, settings))
        return original(name, reward, settings)

    queries = [RankedQuery(np.linspace(1, 0, 12), [1 + i % 3], f"q{i:02d}") for i in range(40)]
    auto = AutoPolicy(settings=AutoConfig(candidates=("cutoff", "gap"), candidate_settings=("cutoff.epochs=3",)))
    import agents.registry as reg

    reg_make, reg.make = reg.make, spy
    try:
        auto.fit(queries, EpisodeConfig(), 0)
    finally:
        reg.make = reg_make
    cutoffs = [s for name, s in built if name == "cutoff"]
    assert cutoffs and all(s.epochs == 3 for s in cutoffs)
    assert all(s is None for name, s in built if name == "gap")


def _auto_cell(settings: AutoConfig):
    from agents.method import MethodSpec
    from experiments.config import Cell
    from experiments.plan import PLANS

    plan = PLANS["bfcl-bm25"]
    return Cell(plan.condition, MethodSpec("auto"), 7, plan.episode, settings)


def test_candidate_settings_holding_commas_round_trip_through_the_command() -> None:
    """An item whose value holds commas (``topp.temperatures=0.5,1.0``) in ``auto.candidate_settings``: the
    printed ``shortlist train`` command's ``--set`` items parse back to the same settings and config hash, and
    the ``--set`` text splits only where the next ``kind.key=`` item starts."""
    import shlex

    from agents.method import MethodSpec
    from experiments.options import LearnArgs
    from experiments.plan import PLANS, cells_for

    cell = _auto_cell(AutoConfig(candidate_settings=("topp.temperatures=0.5,1.0", "cutoff.epochs=3")))
    argv = shlex.split(cell.command())
    items = tuple(argv[i + 1] for i, a in enumerate(argv) if a == "--set")
    la = LearnArgs(seeds=(7,), set=items)
    (back,) = cells_for([PLANS["bfcl-bm25"]], la.seeds, {"bfcl-bm25": [MethodSpec("auto")]}, learning=la.learning())
    assert back.settings == cell.settings
    assert back.config_hash() == cell.config_hash()
    assert back.settings.kind_settings()["topp"].temperatures == (0.5, 1.0)
    parsed = registry.parse_settings(["auto.candidate_settings=topp.temperatures=0.5,1.0"])["auto"]
    assert parsed.candidate_settings == ("topp.temperatures=0.5,1.0",)
    text = "auto.candidate_settings=cutoff.epochs=3, gap-tail10.buffer=2,topp.temperatures=0.5,1.0"
    both = registry.parse_settings(["auto.candidates=gap-tail10,topp,cutoff", text])["auto"]
    assert both.candidate_settings == ("cutoff.epochs=3", "gap-tail10.buffer=2", "topp.temperatures=0.5,1.0")


@pytest.mark.parametrize(
    "items",
    [
        ("topp.temperatures=0.5,1.0", "cutoff.epochs=3"),  # another order
        ("cutoff.epochs=5", "topp.temperatures=.5, 1", "cutoff.epochs=3"),  # the later item wins; other text
        ("cutoff.hidden=32", "cutoff.epochs=+3", "gap.tail=0.0", "topp.temperatures=0.5,1.0"),  # defaults dropped
    ],
)
def test_equal_candidate_settings_make_one_config(items: tuple[str, ...]) -> None:
    """Item order, items equal to a kind's default and items overridden by a later one for the same key change
    neither the AutoConfig nor the config hash: equal fits reuse one finished run."""
    plain = AutoConfig(candidate_settings=("cutoff.epochs=3", "topp.temperatures=0.5,1.0"))
    assert plain.candidate_settings == ("cutoff.epochs=3", "topp.temperatures=0.5,1.0")
    other = AutoConfig(candidate_settings=items)
    assert other == plain
    assert _auto_cell(other).config_hash() == _auto_cell(plain).config_hash()
    assert AutoConfig(candidate_settings=("cutoff.epochs=300", "gap.buffer=0")) == AutoConfig()


def test_the_commands_item_overrides_autos_own() -> None:
    """``--set auto.candidate_settings=cutoff.epochs=5 --set cutoff.epochs=3``: the command's item wins."""
    from agents.auto import with_candidate_settings

    base = AutoConfig(candidate_settings=("cutoff.epochs=5", "cutoff.hidden=8"))
    chosen = with_candidate_settings(base, registry.parse_settings(["cutoff.epochs=3"]))
    assert chosen.candidate_settings == ("cutoff.hidden=8", "cutoff.epochs=3")  # CutoffConfig's field order


def test_candidate_settings_must_be_a_sequence_of_items() -> None:
    """One string is refused with the expected form (it is not read as characters, nor as one item: ``--set``
    text is split by its parser, never here); a list (a run's config.json) is read as a tuple."""
    with pytest.raises(ValueError, match=r"tuple of --set items.*\('cutoff\.epochs=3',\).*'cutoff\.epochs=3'"):
        AutoConfig(candidate_settings="cutoff.epochs=3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tuple of --set items"):
        AutoConfig(candidate_settings=(3,))  # type: ignore[arg-type]
    read = registry.get("auto").from_dict({"candidate_settings": ["cutoff.epochs=3"]}, "config.json")
    assert read == AutoConfig(candidate_settings=("cutoff.epochs=3",))
