"""Numerics at scale: p_random and BoR exact for N up to 10^12, vectorised over a million
(K, N, R) triples, and an MS MARCO-sized evaluation (N = 8,841,823) end to end.

The reference is mpmath at 60 digits using log-gamma differences:
``P_rand = -expm1(lgamma(N-R+1) - lgamma(N-R-K+1) - lgamma(N+1) + lgamma(N-K+1))``.
The speed claim (10^6 triples in under a second) is measured outside the test suite (see
RELIABILITY.md); here only correctness on 10^6 triples is asserted.
"""

from __future__ import annotations

import math
from pathlib import Path

import mpmath
import numpy as np
import pandas as pd
import pytest

from agents import FixedK, evaluate
from envs import EpisodeConfig, RankedQuery, ShortlistEnv, feature_matrix
from experiments.cli import main
from experiments.runner import get_condition
from rewards import bor_aggregate, bor_ceiling, bor_optimistic, bor_reward, p_random

RTOL = 1e-9
MSMARCO_N = 8_841_823
mpmath.mp.dps = 60


def mp_p_random(k: int, n: int, r: int) -> mpmath.mpf:
    k, n, r = int(k), int(n), int(r)
    if k == 0 or r == 0:
        return mpmath.mpf(0)
    if k > n - r:
        return mpmath.mpf(1)
    lg = mpmath.loggamma
    return -mpmath.expm1(lg(n - r + 1) - lg(n - r - k + 1) - lg(n + 1) + lg(n - k + 1))


def million_triples(seed: int = 2024, size: int = 10**6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """N log-uniform in [1, 10^12]; K and R each log-uniform, near N, or uniform in [0, N]."""
    rng = np.random.default_rng(seed)
    n = np.floor(np.exp(rng.uniform(0, math.log(1e12), size))).astype(np.int64)

    def part() -> np.ndarray:
        log_u = np.floor(np.exp(rng.uniform(0, np.log(n + 1.0)))).astype(np.int64)
        near = n - np.floor(np.exp(rng.uniform(0, np.log(n + 1.0)))).astype(np.int64) + 1
        uni = np.floor(rng.uniform(0, 1, size) * (n + 1)).astype(np.int64)
        return np.clip(np.choose(rng.integers(0, 3, size), [log_u, near, uni]), 0, n)

    return part(), n, part()


@pytest.fixture(scope="module")
def million() -> tuple[np.ndarray, ...]:
    k, n, r = million_triples()
    return k, n, r, np.asarray(p_random(k, n, r))


def test_million_triples_are_finite_probabilities(million: tuple[np.ndarray, ...]) -> None:
    k, n, r, p = million
    assert p.shape == (10**6,) and p.dtype == np.float64
    assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))
    assert np.array_equal(p == 0, (k == 0) | (r == 0))
    assert np.all(p[k > n - r] == 1.0)


def test_million_triples_match_mpmath_on_a_sample(million: tuple[np.ndarray, ...]) -> None:
    """4,000 triples of the million (half of them with 0 < P_rand < 1) within 1e-9 relative."""
    k, n, r, p = million
    rng = np.random.default_rng(5)
    open_ = np.flatnonzero((p > 0) & (p < 1))
    idx = np.concatenate([rng.choice(10**6, 2000, replace=False), rng.choice(open_, 2000, replace=False)])
    worst, where = 0.0, None
    for i in idx:
        want = mp_p_random(k[i], n[i], r[i])
        err = float(abs(mpmath.mpf(p[i]) - want) / want) if want > 0 else float(p[i])
        if err > worst:
            worst, where = err, (int(k[i]), int(n[i]), int(r[i]), float(p[i]), mpmath.nstr(want, 20))
    assert worst <= RTOL, where


def test_million_triples_vectorised_equals_chunked_and_symmetric(million: tuple[np.ndarray, ...]) -> None:
    """One call over 10^6 triples = the same triples in chunks; P(K; N, R) = P(R; N, K)."""
    k, n, r, p = million
    chunked = np.concatenate(
        [np.asarray(p_random(k[i : i + 1000], n[i : i + 1000], r[i : i + 1000])) for i in range(0, 50_000, 1000)]
    )
    np.testing.assert_array_equal(chunked, p[:50_000])
    swapped = np.asarray(p_random(r, n, k))
    np.testing.assert_allclose(swapped, p, rtol=1e-12, atol=0)


def test_million_triples_monotone_in_k(million: tuple[np.ndarray, ...]) -> None:
    k, n, r, p = million
    step = k < n
    p1 = np.asarray(p_random(k[step] + 1, n[step], r[step]))
    assert np.all(p1 >= p[step]), int(np.sum(p1 < p[step]))


@pytest.mark.parametrize(
    ("k", "n", "r"),
    [
        (1, 10**12, 1),
        (10**12, 10**12, 1),
        (10**12 - 1, 10**12, 1),
        (1, 10**12, 10**12),
        (1000, 10**12, 1),
        (10**6, 10**12, 10**6),
        (5 * 10**11, 10**12, 5 * 10**11),
        (5 * 10**11 - 1, 10**12, 5 * 10**11),
        (10**11, 10**12, 10**11),
        (64, 10**12, 10**9),
        (65, 10**12, 10**9),
        (1, 10**12, 10**12 - 1),
        (3, 10**12, 10**12 - 3),
        (2, 10**12, 10**12 - 3),
        (10**5, 10**12, 77),
        (999_999_999_999, 10**12, 1),
        (1000, MSMARCO_N, 1),
        (1000, MSMARCO_N, 3),
        (MSMARCO_N - 1, MSMARCO_N, 1),
    ],
)
def test_p_random_extremes_at_huge_n(k: int, n: int, r: int) -> None:
    want = mp_p_random(k, n, r)
    got = p_random(k, n, r)
    err = float(abs(mpmath.mpf(got) - want) / want) if want > 0 else abs(float(got))
    assert err <= RTOL, (got, mpmath.nstr(want, 20))


def test_bor_aggregate_exact_at_huge_n() -> None:
    """BoR over 2,000 queries with N up to 10^12 and mixed R: absolute error <= 1e-9 bits."""
    rng = np.random.default_rng(9)
    q = 2000
    n = np.floor(np.exp(rng.uniform(math.log(1e6), math.log(1e12), q))).astype(np.int64)
    r = rng.integers(1, 50, q)
    k = rng.integers(1, 2000, q)
    found = rng.random(q) < 0.6
    want_mean_rand = mpmath.fsum(mp_p_random(a, b, c) for a, b, c in zip(k, n, r, strict=True)) / q
    want = mpmath.log(mpmath.mpf(int(found.sum())) / q / want_mean_rand, 2)
    assert abs(bor_aggregate(found, k, n, r) - float(want)) <= 1e-9
    assert abs(bor_ceiling(k, n, r) - float(-mpmath.log(want_mean_rand, 2))) <= 1e-9


# ---------------------------------------------------------------- MS MARCO scale


def test_msmarco_optimistic_ceiling() -> None:
    """log2(N/K) with N = 8,841,823 and K = 1,000 is 13.11 bits (and equals -log2 P_rand at R = 1)."""
    want = math.log2(MSMARCO_N / 1000)
    assert bor_optimistic(1000, MSMARCO_N) == pytest.approx(want, rel=1e-15)
    assert round(float(bor_optimistic(1000, MSMARCO_N)), 2) == 13.11
    assert bor_ceiling(1000, MSMARCO_N, 1) == pytest.approx(want, rel=1e-12)


def msmarco_like(n_queries: int = 60, length: int = 1000, seed: int = 3) -> tuple[list[str], list[str], list[dict]]:
    """Synthetic ranked lists of length 1,000 from an 8.8M-document corpus with known gold ranks.

    Returns TREC run lines, TREC qrels lines and per-query truth (gold ranks within the list,
    R including relevant documents outside the top 1,000).
    """
    rng = np.random.default_rng(seed)
    run, qrels, truth = [], [], []
    for qi in range(n_queries):
        qid = f"q{qi}"
        r = int(rng.choice([1, 1, 1, 2, 3]))
        # gold ranks: rank 1 for a third, then geometric-ish, some beyond the list (absent)
        ranks = sorted({int(min(rng.geometric(0.08), 5000)) for _ in range(r)})
        r = len(ranks)
        scores = np.sort(rng.normal(size=length))[::-1] + 20.0
        docs = [f"D{qi}-{i}" for i in range(1, length + 1)]
        for i, (d, s) in enumerate(zip(docs, scores, strict=True), start=1):
            run.append(f"{qid} Q0 {d} {i} {s:.12f} synth")
        rel_docs = [docs[g - 1] if g <= length else f"OUTSIDE-{qi}-{g}" for g in ranks]
        qrels += [f"{qid} 0 {d} 1" for d in rel_docs]
        truth.append({"qid": qid, "gold": [g for g in ranks if g <= length], "r": r})
    return run, qrels, truth


def _expected_bor(truth: list[dict], k: int) -> tuple[float, float]:
    found = [1 if t["gold"] and min(t["gold"]) <= k else 0 for t in truth]
    mean_rand = mpmath.fsum(mp_p_random(k, MSMARCO_N, t["r"]) for t in truth) / len(truth)
    return 100.0 * sum(found) / len(found), float(mpmath.log(mpmath.mpf(sum(found)) / len(found) / mean_rand, 2))


def test_msmarco_scale_evaluation_in_process() -> None:
    """RankedQuery lists of 1,000 out of N = 8,841,823, evaluated by the one evaluator."""
    _, _, truth = msmarco_like()
    rng = np.random.default_rng(0)
    queries = [
        RankedQuery(
            np.sort(rng.normal(size=1000))[::-1], t["gold"], t["qid"], n_candidates=MSMARCO_N, n_relevant=t["r"]
        )
        for t in truth
    ]
    for k in (1, 10, 100, 1000):
        rows = evaluate(FixedK(k), queries, EpisodeConfig())
        found = rows["found"].to_numpy()
        want_found, want_bits = _expected_bor(truth, k)
        assert 100.0 * found.mean() == pytest.approx(want_found)
        assert bor_aggregate(found, rows["k"], rows["n"], rows["r"]) == pytest.approx(want_bits, abs=1e-9)
        hit = rows[rows["found"] == 1]
        np.testing.assert_allclose(hit["reward"], np.asarray(bor_reward(1, hit["k"], MSMARCO_N, hit["r"])), rtol=1e-12)
    # the environment and the features run at this N too (bounded observations, exact terminal reward)
    env = ShortlistEnv(queries[:3], EpisodeConfig(reward="bor", max_depth=1000))
    obs, _ = env.reset(seed=0, options={"index": 0})
    assert env.observation_space.contains(obs)
    f = feature_matrix(queries[0])
    assert f.shape == (1000, 13) and np.all(np.isfinite(f)) and np.all(np.abs(f) <= 1)


def test_msmarco_scale_evaluation_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``shortlist train --run --qrels --n-candidates 8841823 --agent fixed``: summary.csv holds the exact BoR."""
    run_lines, qrels_lines, truth = msmarco_like()
    run = tmp_path / "msmarco-synth.run"
    qrels = tmp_path / "msmarco-synth.qrels"
    run.write_text("\n".join(run_lines) + "\n")
    qrels.write_text("\n".join(qrels_lines) + "\n")
    get_condition.cache_clear()
    out = tmp_path / "out"
    code = main(
        [
            "train",
            "--run",
            str(run),
            "--qrels",
            str(qrels),
            "--n-candidates",
            str(MSMARCO_N),
            "--agent",
            "fixed",
            "--k",
            "1",
            "10",
            "100",
            "1000",
            "--seeds",
            "0",
            "--out",
            str(out),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-progress",
        ]
    )
    assert code == 0, capsys.readouterr().err
    summary = pd.read_csv(out / "summary.csv")
    per_query = pd.read_csv(out / "per_query.csv", dtype={"qid": str})
    test_qids = set(per_query["qid"])
    test_truth = [t for t in truth if t["qid"] in test_qids]
    assert len(test_truth) == len(test_qids) == 18  # 30% of 60
    assert (per_query["n"] == MSMARCO_N).all()
    for k in (1, 10, 100, 1000):
        row = summary[summary["method"] == f"fixed-{k}"].iloc[0]
        want_found, want_bits = _expected_bor(test_truth, k)
        assert row["found_pct"] == pytest.approx(want_found)
        assert row["bor_bits"] == pytest.approx(want_bits, rel=1e-9)  # 10 significant digits in the CSV
    k1000 = summary[summary["method"] == "fixed-1000"].iloc[0]
    r = np.array([t["r"] for t in test_truth])
    want_ceiling = -math.log2(float(np.mean([float(mp_p_random(1000, MSMARCO_N, x)) for x in r])))
    assert k1000["bor_ceiling"] == pytest.approx(want_ceiling, rel=1e-9)
    assert 11.0 < k1000["bor_ceiling"] <= math.log2(MSMARCO_N / 1000) + 1e-9  # R > 1 lowers the 13.11-bit ceiling
