"""The ``listwise`` observation set (:mod:`envs.features`): its columns are the score (or hybrid) set followed by
the listwise posterior's per-item features of the top 20 ranks and their shown flags; bounded float32; it
reads no label and nothing beyond what its table documents; SB3-checked environment on it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs import EpisodeConfig, RankedQuery, ShortlistEnv, feature_matrix
from envs.features import (
    LISTWISE_ITEM_HYBRID_NAMES,
    LISTWISE_ITEM_NAMES,
    LISTWISE_RANKS,
    OBSERVATION_CHOICES,
    OBSERVATIONS,
    observation_of,
    rank_feature_names,
    rank_features,
)


def query(n: int = 30, seed: int = 0, hybrid: bool = False, gold: int = 3) -> RankedQuery:
    rng = np.random.default_rng(seed)
    aux = rng.random(n) if hybrid else None
    return RankedQuery(np.sort(rng.normal(size=n))[::-1].copy(), [gold], f"q{seed}", aux_scores=aux)


def blocks(f: np.ndarray, hybrid: bool) -> np.ndarray:
    """(D, ranks, per-rank columns) view of the per-item part of a listwise matrix."""
    base = len(OBSERVATIONS["hybrid" if hybrid else "score"])
    per = len(LISTWISE_ITEM_NAMES) + (len(LISTWISE_ITEM_HYBRID_NAMES) if hybrid else 0)
    return f[:, base:].reshape(f.shape[0], LISTWISE_RANKS, per)


@pytest.mark.parametrize("hybrid", [False, True])
def test_columns_are_the_summary_set_then_the_posteriors_per_item_view(hybrid: bool) -> None:
    """The whole matrix rebuilt from what the module table documents (nothing else enters): the score (hybrid)
    set, then per rank the columns of :func:`rank_features` named there and the shown flag."""
    q = query(hybrid=hybrid)
    f = feature_matrix(q, 25, "listwise")
    kind = observation_of(q, "listwise")
    assert kind == ("listwise-hybrid" if hybrid else "listwise") and f.shape == (25, len(OBSERVATIONS[kind]))
    assert f.shape[1] == (220 if hybrid else 133) and f.dtype == np.float32
    base = feature_matrix(q, 25, "hybrid" if hybrid else "score")
    np.testing.assert_array_equal(f[:, : base.shape[1]], base)
    ranks = rank_features(q, LISTWISE_RANKS)
    col = dict(zip(rank_feature_names(hybrid), ranks.T, strict=True))
    b = blocks(f, hybrid)
    expected = [col["z"], col["gap_next"], col["gap_top"], col["minmax"], col["softmax_mass"]]
    if hybrid:
        log_l = np.log2(q.length)
        expected += [col["aux_log_rank"] / log_l, col["aux_z"], col["aux_top1"], col["fused_log_rank"] / log_l]
    for depth in (0, 7, 24):  # the same per-item view at every depth, but for the shown flags
        np.testing.assert_allclose(b[depth, :, :5], np.column_stack(expected[:5]), rtol=1e-6, atol=1e-7)
        if hybrid:
            np.testing.assert_allclose(b[depth, :, 6:], np.column_stack(expected[5:]), rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(b[depth, :, 5], np.arange(1, LISTWISE_RANKS + 1) <= depth + 1)
    assert "listwise" in OBSERVATION_CHOICES and "listwise-hybrid" not in OBSERVATION_CHOICES


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 45),
    seed=st.integers(0, 10_000),
    ties=st.booleans(),
    scale=st.sampled_from([1e-9, 1.0, 1e9]),
    hybrid=st.booleans(),
)
def test_bounded_and_reads_no_label(n: int, seed: int, ties: bool, scale: float, hybrid: bool) -> None:
    """Every column in [-1, 1] (the environment's Box), finite, whatever the list: short (zero blocks beyond the
    list), tied, constant, huge or tiny scores; and the labels (relevant ranks, R, N) change nothing but ``log_n``
    and ``ceiling``, which read N, as in the score set."""
    rng = np.random.default_rng(seed)
    s = np.sort(np.round(rng.normal(size=n), 1 if ties else 6))[::-1] * scale
    aux = rng.random(n) if hybrid else None
    a = RankedQuery(s.copy(), [1], "a", aux_scores=aux)
    b = RankedQuery(s.copy(), [n] if n > 1 else [], "b", n_candidates=n, n_relevant=min(n, 1), aux_scores=aux)
    fa, fb = feature_matrix(a, None, "listwise"), feature_matrix(b, None, "listwise")
    assert np.all(np.isfinite(fa)) and fa.min() >= -1.0 and fa.max() <= 1.0
    np.testing.assert_array_equal(fa, fb)
    if n < LISTWISE_RANKS:
        np.testing.assert_array_equal(blocks(fa, hybrid)[:, n:, :], 0.0)


@pytest.mark.parametrize("hybrid", [False, True])
def test_environment_on_the_listwise_set_passes_the_checkers(hybrid: bool) -> None:
    import warnings

    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check

    env = ShortlistEnv([query(seed=i, hybrid=hybrid) for i in range(5)], EpisodeConfig(observation="listwise"))
    assert env.observation_space.shape == (220 if hybrid else 133,)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)
        sb3_check(env)
    with pytest.raises(ValueError, match="unknown observation"):
        EpisodeConfig(observation="listwise-hybrid")


#: Each RL kind with a tiny budget.
TINY = {
    "dqn": {"total_timesteps": 600, "learning_starts": 100, "n_envs": 1},
    "fqi": {"gradient_steps": 100, "target_update_interval": 50},
    "ppo": {"total_timesteps": 256, "n_steps": 64, "batch_size": 64, "n_epochs": 1},
    "tabular": {"episodes": 300},
}


@pytest.mark.parametrize("kind", sorted(TINY))
def test_every_rl_kind_trains_acts_saves_and_loads_on_the_listwise_set(kind: str, tmp_path) -> None:
    """``--observation listwise`` for every RL kind: it trains and acts on the set, its saved file loads back to the
    same depths (the SB3 kinds record the set in their zip, so the loader needs no width guess), and applying it
    to another set is refused, naming both."""
    from agents import registry

    rng = np.random.default_rng(0)
    qs = [RankedQuery(np.sort(rng.random(30))[::-1].copy(), [2], f"q{i}") for i in range(30)]
    cfg = EpisodeConfig(observation="listwise")
    settings = registry.get(kind).from_dict(TINY[kind])
    agent = registry.make(kind, "bor", settings).fit(qs, cfg, 0)
    k = agent.depths(qs, cfg)
    assert k.shape == (30,) and k.min() >= 1 and k.max() <= 30
    path = tmp_path / agent.artifact
    agent.save(path)
    back = registry.get(kind).load(path, "bor", settings)
    np.testing.assert_array_equal(back.depths(qs, cfg), k)
    with pytest.raises(ValueError, match="same observation set"):
        back.depths(qs, EpisodeConfig())
