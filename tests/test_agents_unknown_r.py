"""agents.unknown_r: estimating R from scores and the cost of a wrong chance term."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.unknown_r import R_FEATURES, REstimator, estimate_r, r_features, unknown_r_table
from envs import RankedQuery
from rewards import bor_aggregate, p_random


def _plateau(r: int, n: int, qid: str, rng: np.random.Generator) -> RankedQuery:
    """r items scoring ~1.0, the rest ~0.3 and below: a score list that reveals R."""
    s = np.concatenate([1.0 - 0.02 * rng.random(r), 0.3 * rng.random(n - r)])
    return RankedQuery(np.sort(s)[::-1], np.arange(1, r + 1), qid)


def test_features_use_scores_only() -> None:
    s = np.array([5.0, 4.0, 1.0, 0.0])
    a = RankedQuery(s, np.array([1]), "a")
    b = RankedQuery(s, np.array([2, 3, 4]), "b")
    fa, fb = r_features([a]), r_features([b])
    np.testing.assert_array_equal(fa, fb)
    assert fa.shape == (1, len(R_FEATURES))
    z = (s - s.mean()) / s.std()
    assert fa[0, 0] == pytest.approx(math.log1p(1)) and fa[0, 1] == pytest.approx(math.log1p(2))
    assert fa[0, 2] == pytest.approx(z[0]) and fa[0, 3] == pytest.approx(z[0] - z[1])
    assert fa[0, 5] == pytest.approx(math.log(4))
    const = r_features([RankedQuery(np.ones(3), np.array([1]), "c")])
    assert np.all(np.isfinite(const)) and const[0, 2] == 0.0


def test_mean_and_constant_r() -> None:
    rng = np.random.default_rng(0)
    train = [_plateau(2, 30, f"t{i}", rng) for i in range(20)]
    test = [_plateau(2, 30, f"s{i}", rng) for i in range(5)]
    assert estimate_r(train, test, "mean").tolist() == [2] * 5
    assert estimate_r(train, test, "regression").tolist() == [2] * 5


def test_regression_recovers_r_from_plateaus() -> None:
    rng = np.random.default_rng(1)
    rs = rng.integers(1, 7, size=200)
    qs = [_plateau(int(r), 50, f"q{i}", rng) for i, r in enumerate(rs)]
    est = REstimator("regression", alpha=1e-3).fit(qs[:150])
    pred = est.predict(qs[150:])
    assert np.mean(pred == rs[150:]) >= 0.9
    assert estimate_r(qs[:150], qs[150:], "mean").tolist() == [round(rs[:150].mean())] * 50
    assert np.mean(pred == rs[150:]) > np.mean(round(rs[:150].mean()) == rs[150:])


def test_estimator_errors() -> None:
    with pytest.raises(ValueError, match="unknown R estimator"):
        REstimator("median")
    with pytest.raises(ValueError, match="before fit"):
        REstimator().predict([RankedQuery(np.ones(2), np.array([1]), "a")])
    with pytest.raises(ValueError, match="'z' has R = 0"):
        REstimator().fit([RankedQuery(np.ones(2), np.array([], dtype=np.int64), "z")])
    with pytest.raises(ValueError, match="no training queries"):
        REstimator().fit([])


def test_unknown_r_table_by_hand() -> None:
    # N = 20, R = 2 everywhere; gold at ranks (1, 3) and (2, 9); K = 3
    qs = [
        RankedQuery(np.linspace(1, 0, 20), np.array([1, 3]), "a"),
        RankedQuery(np.linspace(1, 0, 20), np.array([2, 9]), "b"),
    ]
    k = np.array([3, 3])
    df = unknown_r_table(qs, {"fixed-3": k}, np.array([3, 2]))
    assert df["assumption"].tolist() == ["R=1", "estimated", "true"]
    one, est, true = (df.iloc[i] for i in range(3))
    assert one["found_pct"] == est["found_pct"] == true["found_pct"] == 100.0
    assert true["complete_pct"] == 50.0
    assert one["bor_bits"] == pytest.approx(math.log2(20 / 3))
    assert true["bor_bits"] == pytest.approx(bor_aggregate([1, 1], k, 20, 2))
    p_true = p_random(3, 20, 2)
    assert true["bor_bits"] == pytest.approx(-math.log2(p_true))
    assert one["bor_bits_minus_true"] == pytest.approx(math.log2(20 / 3) + math.log2(p_true))
    assert one["bor_bits_minus_true"] > 0  # R = 1 understates chance: BoR overstated
    assert est["mean_p_random"] == pytest.approx((p_random(3, 20, 3) + p_true) / 2)
    assert est["r_exact_pct"] == 50.0 and est["r_mae"] == 0.5
    assert true["bor_bits_minus_true"] == 0.0
    pa_true = 3 * 2 / (20 * 19)
    assert true["bor_bits_all"] == pytest.approx(math.log2(0.5 / pa_true))
    assert one["bor_bits_all"] == pytest.approx(math.log2(0.5 / (3 / 20)))
    with pytest.raises(ValueError, match="outside 1..20"):
        unknown_r_table(qs, {"k": k}, np.array([0, 2]))
    with pytest.raises(ValueError, match="expected 2 depths"):
        unknown_r_table(qs, {"k": np.array([3])}, np.array([2, 2]))
