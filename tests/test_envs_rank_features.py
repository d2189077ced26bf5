"""Per-rank features of the listwise model (:func:`envs.features.rank_features`): values by hand, shape,
range, ties, constant and one-item lists, the second scorer's columns, and that no label is read."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from envs import RankedQuery
from envs.features import RANK_FEATURE_NAMES, RANK_HYBRID_NAMES, rank_feature_names, rank_features


def named(f: np.ndarray, hybrid: bool = False) -> dict[str, np.ndarray]:
    return {name: f[:, i] for i, name in enumerate(rank_feature_names(hybrid))}


def test_score_features_by_hand() -> None:
    s = np.array([4.0, 3.0, 1.0, 0.0])
    f = rank_features(RankedQuery(s, [2], "q"))
    assert f.shape == (4, len(RANK_FEATURE_NAMES)) == (4, 9) and f.dtype == np.float64
    h = named(f)
    z = (s - s.mean()) / s.std()
    np.testing.assert_allclose(h["z"], z / 8)
    np.testing.assert_allclose(h["gap_next"], np.append(z[:-1] - z[1:], 0.0) / 8)
    np.testing.assert_allclose(h["gap_prev"], np.append(0.0, z[:-1] - z[1:]) / 8)
    np.testing.assert_allclose(h["gap_top"], (z[0] - z) / 16)
    np.testing.assert_allclose(h["log_rank"], np.log2([1, 2, 3, 4]))
    np.testing.assert_array_equal(h["is_rank1"], [1, 0, 0, 0])
    np.testing.assert_array_equal(h["is_rank2"], [0, 1, 0, 0])
    np.testing.assert_allclose(h["minmax"], s / 4)
    np.testing.assert_allclose(h["softmax_mass"], np.exp(z) / np.exp(z).sum())


def test_shape_follows_m_and_statistics_use_the_whole_list() -> None:
    rng = np.random.default_rng(0)
    q = RankedQuery(np.sort(rng.normal(size=100))[::-1].copy(), [7], "q")
    full = rank_features(q)
    assert full.shape == (100, 9)
    np.testing.assert_array_equal(rank_features(q, 60), full[:60])  # z, min-max, softmax: over all 100
    assert rank_features(q, 500).shape == (100, 9)  # M = min(m, L)
    assert np.all(np.isfinite(full))
    bounded = [i for i, n in enumerate(RANK_FEATURE_NAMES) if n != "log_rank"]
    assert full[:, bounded].min() >= -1 and full[:, bounded].max() <= 1
    assert named(full)["softmax_mass"].sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="'q': m must be >= 1"):
        rank_features(q, 0)


def test_ties_share_score_features_and_keep_their_positions() -> None:
    q = RankedQuery(np.array([5.0, 2.0, 2.0, 2.0, 0.0]), [1], "t")
    h = named(rank_features(q))
    for name in ("z", "gap_top", "minmax", "softmax_mass"):
        assert h[name][1] == h[name][2] == h[name][3], name
    np.testing.assert_array_equal(h["gap_next"][1:3], 0.0)  # no drop inside the tie block
    np.testing.assert_array_equal(h["gap_prev"][2:4], 0.0)
    np.testing.assert_allclose(h["log_rank"], np.log2(np.arange(1, 6)))  # positions follow the ranking
    flat = named(rank_features(RankedQuery(np.full(4, 3.0), [2], "c")))  # constant list: z = 0 everywhere
    for name in ("z", "gap_next", "gap_prev", "gap_top"):
        np.testing.assert_array_equal(flat[name], 0.0)
    np.testing.assert_array_equal(flat["minmax"], 1.0)
    np.testing.assert_allclose(flat["softmax_mass"], 0.25)
    one = rank_features(RankedQuery(np.array([1.5]), [1], "o"))
    np.testing.assert_array_equal(one, [[0, 0, 0, 0, 0, 1, 0, 1, 1]])


def test_huge_scores_do_not_overflow() -> None:
    f = rank_features(RankedQuery(np.array([1e308, 0.0, -1e308]), [1], "big"))
    assert np.all(np.isfinite(f))
    np.testing.assert_allclose(named(f)["minmax"], [1.0, 0.5, 0.0])


def test_second_scorer_columns_by_hand() -> None:
    """First scorer ranks A B C D; the second scores them 1, 4, 4, 0 (B and C tie for its top)."""
    s, a = np.array([4.0, 3.0, 2.0, 1.0]), np.array([1.0, 4.0, 4.0, 0.0])
    f = rank_features(RankedQuery(s, [2], "q", aux_scores=a))
    assert f.shape == (4, 15) and rank_feature_names(True) == RANK_FEATURE_NAMES + RANK_HYBRID_NAMES
    np.testing.assert_array_equal(f[:, :9], rank_features(RankedQuery(s, [2], "q")))
    h = named(f, hybrid=True)
    np.testing.assert_allclose(h["aux_log_rank"], np.log2([3, 1, 1, 4]))  # ties share the best rank
    za = (a - a.mean()) / a.std()
    np.testing.assert_allclose(h["aux_z"], za / 8)
    np.testing.assert_array_equal(h["aux_top1"], [0, 1, 1, 0])
    z = (s - s.mean()) / s.std()
    fused = z + za
    np.testing.assert_allclose(h["fused_log_rank"], np.log2([1 + np.sum(fused > v) for v in fused]))
    np.testing.assert_array_equal(h["aux_agree_top"], 0.0)
    np.testing.assert_array_equal(h["both_top"], 0.0)
    agree = named(rank_features(RankedQuery(s, [1], "g", aux_scores=np.array([9.0, 1.0, 2.0, 3.0]))), True)
    np.testing.assert_array_equal(agree["aux_agree_top"], 1.0)
    np.testing.assert_array_equal(agree["both_top"], [1, 0, 0, 0])


def test_features_never_read_labels() -> None:
    rng = np.random.default_rng(3)
    s, a = np.sort(rng.random(30))[::-1].copy(), rng.random(30)
    for aux in (None, a):
        base = rank_features(RankedQuery(s, [1], "q", aux_scores=aux), 20)
        for relevant, n_relevant in (([], -1), ([25], -1), ([2, 9, 30], -1), ([4], 5)):
            other = RankedQuery(s, relevant, "q", n_relevant=n_relevant, aux_scores=aux)
            np.testing.assert_array_equal(rank_features(other, 20), base)


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=40), st.integers(1, 50), st.booleans())
@example([(1e308, -1e308), (-1e308, 1e308)], 3, True)
@example([(8.988465674311579e307, 0.0), (8.98846567431158e307, 1.0)], 1, True)
def test_fuzz_rank_features_finite_and_bounded(pairs: list[tuple[float, float]], m: int, aux: bool) -> None:
    """Any finite score list (and second scorer) gives finite features inside the documented ranges."""
    s = np.array([p[0] for p in pairs])
    order = np.argsort(-s, kind="stable")
    with np.errstate(all="ignore"):  # RankedQuery's sortedness check may overflow in np.diff (harmless)
        q = RankedQuery(s[order], [1], "q", aux_scores=np.array([p[1] for p in pairs])[order] if aux else None)
        f = rank_features(q, m)
    assert f.shape == (min(m, len(pairs)), 15 if aux else 9)
    assert np.all(np.isfinite(f))
    names = rank_feature_names(aux)
    rank_cols = [i for i, n in enumerate(names) if n.endswith("log_rank")]
    other = [i for i in range(len(names)) if i not in rank_cols]
    assert f[:, other].min() >= -1 and f[:, other].max() <= 1
    assert f[:, rank_cols].min() >= 0 and f[:, rank_cols].max() <= np.log2(len(pairs))
