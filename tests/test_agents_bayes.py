"""The Bayes-optimal depth: exact posterior (enumeration, scipy, Monte Carlo) and optimality."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from agents.base import FixedK
from agents.bayes import (
    BayesOptimal,
    bayes_depths,
    expected_payoff,
    gold_posterior,
    log_likelihood_ratio,
    payoff_if_found,
)
from agents.peers import GapPolicy, objective_matrix, threshold_depths
from benchmarks.synthetic import SyntheticSpec, candidate_scores, generate
from envs import CONTINUE, STOP, EpisodeConfig, RankedQuery, ShortlistEnv

# --------------------------------------------------------------------------- posterior


@pytest.mark.parametrize(
    "spec, oracle",
    [
        (SyntheticSpec(separation=1.3), stats.norm()),
        (SyntheticSpec(separation=0.7, rho=0.4), stats.norm(scale=math.sqrt(0.7))),
        (
            SyntheticSpec(separation=1.1, distribution="student-t", df=3.0),
            stats.t(3.0, scale=math.sqrt(1.0 / 3.0)),
        ),
    ],
)
def test_continuous_llr_matches_scipy_densities(spec: SyntheticSpec, oracle: stats.rv_continuous) -> None:
    x = np.linspace(-6, 8, 57)
    want = oracle.logpdf(x - spec.separation) - oracle.logpdf(x)
    np.testing.assert_allclose(log_likelihood_ratio(spec, x), want, rtol=1e-10, atol=1e-10)


def _enumerated_posterior(spec: SyntheticSpec, law: stats.rv_continuous, cells: range) -> dict[tuple, np.ndarray]:
    """Brute force: P(gold rank | sorted rounded scores) by summing over every gold position and
    every cell assignment, ranking each assignment with the stable rule of RankedQuery.from_scores."""
    n, h, d = spec.n, spec.ties, spec.separation

    def cell_p(m: int, shift: float) -> float:
        return float(law.cdf((m + 0.5) * h - shift) - law.cdf((m - 0.5) * h - shift))

    p_gold = {m: cell_p(m, d) for m in cells}
    p_dist = {m: cell_p(m, 0.0) for m in cells}
    joint: dict[tuple, np.ndarray] = {}
    for pos in range(n):
        for ms in itertools.product(cells, repeat=n):
            p = 1.0 / n
            for j, m in enumerate(ms):
                p *= p_gold[m] if j == pos else p_dist[m]
            s = np.array(ms, dtype=float) * h
            order = np.argsort(-s, kind="stable")
            rank = int(np.flatnonzero(order == pos)[0])
            key = tuple(s[order])
            joint.setdefault(key, np.zeros(n))[rank] += p
    return {k: v / v.sum() for k, v in joint.items()}


@pytest.mark.parametrize(
    "spec, law",
    [
        (SyntheticSpec(n=3, separation=1.0, ties=0.8), stats.norm()),
        (
            SyntheticSpec(n=3, separation=1.5, ties=1.0, distribution="student-t", df=3.0),
            stats.t(3.0, scale=math.sqrt(1.0 / 3.0)),
        ),
    ],
)
def test_tied_posterior_matches_enumeration(spec: SyntheticSpec, law: stats.rv_continuous) -> None:
    exact = _enumerated_posterior(spec, law, range(-3, 5))
    keys = sorted(exact)
    assert any(len(set(k)) < len(k) for k in keys)  # ties are part of the check
    got = gold_posterior(spec, np.array(keys))
    np.testing.assert_allclose(got, np.vstack([exact[k] for k in keys]), rtol=1e-9, atol=1e-12)


def test_tied_ranks_share_posterior_mass() -> None:
    spec = SyntheticSpec(n=4, separation=2.0, ties=0.5)
    p = gold_posterior(spec, [[1.0, 1.0, 0.5, 0.5]])[0]
    assert p[0] == p[1] and p[2] == p[3] and p[0] > p[2]


def test_extreme_cells_stay_finite() -> None:
    spec = SyntheticSpec(n=3, separation=2.0, ties=0.1)
    p = gold_posterior(spec, [[40.0, -30.0, -40.0]])
    assert np.all(np.isfinite(p)) and p[0, 0] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "spec",
    [
        SyntheticSpec(n=4, separation=1.5, n_queries=20_000),
        SyntheticSpec(n=4, separation=1.5, n_queries=20_000, distribution="student-t", df=3.0),
    ],
)
def test_posterior_is_calibrated_by_monte_carlo(spec: SyntheticSpec) -> None:
    """Among generated queries whose posterior of rank r lies in a bin, the gold sits at rank r
    as often as the mean posterior says (within 4 binomial standard errors)."""
    scores, gold = candidate_scores(spec, 11)
    order = np.argsort(-scores, axis=1, kind="stable")
    ranked = np.take_along_axis(scores, order, axis=1)
    gold_rank = np.argmax(order == gold[:, None], axis=1)
    post = gold_posterior(spec, ranked)
    np.testing.assert_allclose(post.sum(axis=1), 1.0)
    for r in range(2):
        hit = gold_rank == r
        bins = np.minimum((post[:, r] * 5).astype(int), 4)
        for b in range(5):
            sel = bins == b
            if sel.sum() < 300:
                continue
            p = post[sel, r].mean()
            se = math.sqrt(p * (1 - p) / sel.sum())
            assert abs(hit[sel].mean() - p) < 4 * se + 1e-3, (r, b, hit[sel].mean(), p)


# --------------------------------------------------------------------------- payoffs match the env


def test_expected_payoff_equals_posterior_average_of_realised_payoffs() -> None:
    """E[payoff(K)] = sum_i P(gold at i) * payoff(K | gold at i), with the realised payoffs of
    agents.peers.objective_matrix (the package's definition), for both objectives and a cap."""
    spec = SyntheticSpec(n=8, separation=1.0, n_queries=5)
    q = generate(spec, 0)[3]
    post = gold_posterior(spec, q.scores[None, :])[0]
    for objective in ("reward", "return"):
        for kind in ("bor", "f1", "constant"):
            config = EpisodeConfig(reward=kind, step_cost=0.03, gamma=0.9, max_depth=6)
            variants = [RankedQuery(q.scores, np.array([i]), q.qid) for i in range(1, 9)]
            pay, _ = objective_matrix(variants, config, kind, objective)
            want = post @ pay[:, :6]
            found, cost = payoff_if_found(kind, objective, config, 8, 6)
            np.testing.assert_allclose(expected_payoff(post[None, :], found, cost)[0], want, rtol=1e-12, atol=1e-12)


def test_undiscounted_return_equals_the_env_sum_of_rewards_including_the_forced_stop() -> None:
    spec = SyntheticSpec(n=6, separation=1.0, n_queries=3)
    q = RankedQuery(generate(spec, 1)[0].scores, np.array([2]), "x")
    config = EpisodeConfig(step_cost=0.05, gamma=1.0, max_depth=4)
    found, cost = payoff_if_found("bor", "return", config, 6, 4)
    env = ShortlistEnv([q], EpisodeConfig(step_cost=0.05, max_depth=4))
    for k in range(1, 5):
        env.reset(options={"index": 0})
        total, done, depth = 0.0, False, 1
        while not done:
            _, r, done, _, info = env.step(STOP if depth == k else CONTINUE)
            total += r
            depth += 1
        assert info["k"] == k  # k = 4 is the forced stop at the cap
        assert total == pytest.approx(float(q.found_at(k)) * found[k - 1] - cost[k - 1], abs=1e-12)


# --------------------------------------------------------------------------- optimality on a large set


def _mean_se(x: np.ndarray) -> tuple[float, float]:
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))


@pytest.fixture(scope="module")
def big() -> list[RankedQuery]:
    return generate(SyntheticSpec(n=50, separation=1.5, n_queries=12_000), 2024)


@pytest.mark.parametrize("objective", ["reward", "return"])
def test_bayes_beats_fixed_k_thresholds_and_gap(big: list[RankedQuery], objective: str) -> None:
    """Mean objective of the Bayes policy >= every fixed K, every min-max and raw score threshold
    of a grid, and the largest-gap rule (paired difference > -3 standard errors; most are far above)."""
    config = EpisodeConfig(step_cost=0.01, gamma=0.95)
    pay, _ = objective_matrix(big, config, "bor", objective)
    rows = np.arange(len(big))
    bayes = BayesOptimal(reward="bor", objective=objective).fit(big[:10], config, 0)
    kb, ev = bayes_depths(bayes.spec, big, config, "bor", objective)  # type: ignore[arg-type]
    ours = pay[rows, kb - 1]
    # calibration: the realised mean matches the posterior expectation
    m, se = _mean_se(ours - ev)
    assert abs(m) < 4 * se
    scores = np.vstack([q.scores for q in big])
    rivals: dict[str, np.ndarray] = {f"fixed-{k}": np.full(len(big), k) for k in range(1, 51)}
    for t in np.linspace(0.0, 1.0, 26):
        rivals[f"minmax-{t:.2f}"] = threshold_depths(scores, t=float(t))
    for tau in np.arange(-1.0, 4.01, 0.2):
        rivals[f"raw-{tau:.1f}"] = np.maximum((scores >= tau).sum(axis=1), 1)
    rivals["gap"] = GapPolicy().depths(big, config)
    margins = {}
    for name, k in rivals.items():
        m, se = _mean_se(ours - pay[rows, k - 1])
        assert m > -3 * se, (name, m, se)
        margins[name] = m / se
    best_fixed = max(pay.mean(axis=0))
    assert ours.mean() > best_fixed  # strictly better than the best fixed K chosen in hindsight
    assert min(margins[f"fixed-{k}"] for k in range(1, 51)) > 5  # clearly, not by luck


def test_a_wrong_spec_loses_so_the_check_has_power(big: list[RankedQuery]) -> None:
    config = EpisodeConfig()
    pay, _ = objective_matrix(big, config, "bor", "reward")
    wrong = BayesOptimal(SyntheticSpec(n=50, separation=6.0)).depths(big, config)
    best_k = int(np.argmax(pay.mean(axis=0))) + 1
    m, se = _mean_se(pay[np.arange(len(big)), wrong - 1] - pay[:, best_k - 1])
    assert m < -3 * se


@pytest.mark.parametrize("kind", ["f1", "constant"])
def test_bayes_beats_fixed_k_for_other_rewards(big: list[RankedQuery], kind: str) -> None:
    config = EpisodeConfig(reward=kind, step_cost=0.01, gamma=0.95)
    qs = big[:5000]
    pay, _ = objective_matrix(qs, config, kind, "return")
    kb = BayesOptimal(reward=kind, objective="return").depths(qs, config)
    ours = pay[np.arange(len(qs)), kb - 1]
    for k in range(1, 51):
        m, se = _mean_se(ours - pay[:, k - 1])
        assert m > -3 * se, (kind, k, m, se)


def test_depths_respect_the_cap_and_argmax() -> None:
    spec = SyntheticSpec(n=30, separation=0.3, n_queries=200)
    qs = generate(spec, 0)
    config = EpisodeConfig(max_depth=4)
    k = BayesOptimal(spec).depths(qs, config)
    assert k.max() <= 4 and k.min() >= 1
    post = gold_posterior(spec, np.vstack([q.scores for q in qs]))
    found, cost = payoff_if_found("bor", "reward", config, 30, 4)
    ev = expected_payoff(post, found, cost)
    assert np.array_equal(k, np.argmax(ev, axis=1) + 1)
    assert k.mean() > 3  # weak separation: the policy wants to go deeper than the cap allows


def test_easy_lists_stop_at_one() -> None:
    spec = SyntheticSpec(n=20, separation=8.0, n_queries=100)
    qs = generate(spec, 0)
    assert np.all(BayesOptimal(spec).depths(qs, EpisodeConfig()) == 1)
    assert all(q.gold_rank == 1 for q in qs)


def test_spec_is_read_from_qids_and_must_be_unique() -> None:
    a = generate(SyntheticSpec(n=10, n_queries=20), 0)
    b = generate(SyntheticSpec(n=10, separation=1.0, n_queries=20), 0)
    pol = BayesOptimal()
    assert np.array_equal(
        pol.depths(a, EpisodeConfig()), BayesOptimal(SyntheticSpec(n=10, n_queries=20)).depths(a, EpisodeConfig())
    )
    with pytest.raises(ValueError, match="different synthetic specs"):
        BayesOptimal().depths(a + b, EpisodeConfig())
    with pytest.raises(ValueError, match="synthetic"):
        BayesOptimal().fit([RankedQuery(np.array([1.0, 0.0]), np.array([1]), "q1")], EpisodeConfig(), 0)
    with pytest.raises(ValueError, match="n=10"):
        BayesOptimal(SyntheticSpec(n=10)).depths(
            [RankedQuery(np.array([1.0, 0.0]), np.array([1]), "q1")], EpisodeConfig()
        )


def test_names_and_bad_arguments() -> None:
    assert BayesOptimal().name == "bayes"
    assert BayesOptimal(reward="f1").name == "f1-bayes"
    assert BayesOptimal(objective="return").name == "bor-bayes-mdp"
    assert BayesOptimal.artifact == "agent.json" and BayesOptimal.stochastic is False
    with pytest.raises(ValueError, match="objective"):
        BayesOptimal(objective="bits")
    with pytest.raises(ValueError, match="reward"):
        BayesOptimal(reward="ndcg")


# --------------------------------------------------------------------------- save / load


@pytest.mark.parametrize(
    "pol",
    [
        BayesOptimal(SyntheticSpec(n=40, separation=1.0, distribution="student-t", df=3.0, ties=0.25, n_queries=60)),
        BayesOptimal(SyntheticSpec(n=40, separation=1.0, rho=0.3, n_queries=60), "f1", "return"),
        BayesOptimal(),
    ],
)
def test_save_load_round_trip(pol: BayesOptimal, tmp_path: Path) -> None:
    spec = pol.spec or SyntheticSpec(n=40, n_queries=60)
    qs = generate(spec, 9)
    config = EpisodeConfig(step_cost=0.02, gamma=0.9)
    before = pol.depths(qs, config)
    pol.save(tmp_path / pol.artifact)
    assert json.loads((tmp_path / pol.artifact).read_text())["name"] == pol.name
    back = BayesOptimal.load(tmp_path / pol.artifact)
    assert (back.spec, back.reward, back.objective, back.name) == (pol.spec, pol.reward, pol.objective, pol.name)
    assert np.array_equal(back.depths(qs, config), before)


def test_load_rejects_malformed_files(tmp_path: Path) -> None:
    bad = tmp_path / "agent.json"
    bad.write_text('{"name": "bayes", "params": {"spec": {"n": 0}, "reward": "bor", "objective": "reward"}}')
    with pytest.raises(ValueError, match="Bayes"):
        BayesOptimal.load(bad)
    bad.write_text("not json")
    with pytest.raises(ValueError, match="agent.json"):
        BayesOptimal.load(bad)


def test_fixed_k_is_never_better_in_expectation() -> None:
    """Per query, the chosen depth's posterior expected payoff is >= that of every fixed K."""
    spec = SyntheticSpec(n=25, separation=1.0, ties=0.3, n_queries=300)
    qs = generate(spec, 3)
    config = EpisodeConfig()
    post = gold_posterior(spec, np.vstack([q.scores for q in qs]))
    found, cost = payoff_if_found("bor", "return", config, 25, 25)
    ev = expected_payoff(post, found, cost)
    k, v = bayes_depths(spec, qs, config, "bor", "return")
    assert np.all(v[:, None] >= ev - 1e-12)
    assert np.array_equal(FixedK(3).depths(qs, config), np.full(len(qs), 3))
