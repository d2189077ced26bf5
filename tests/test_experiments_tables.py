"""Report tables: intervals are a bootstrap over test queries, seed spread is separate, depths
show their spread (median, p90, whole-list rate) and comparisons can drop whole-list episodes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from agents.evaluation import depth_spread, summarise
from experiments.report.tables import aggregate, ratio_interval

N = 10


def _rows(method: str, seed: int, ks: list[int], found: list[int], rewards: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "condition": "c",
            "method": method,
            "seed": seed,
            "qid": [f"q{i}" for i in range(len(ks))],
            "k": ks,
            "n": N,
            "r": 1,
            "found": found,
            "reward": rewards,
            "reward_net": [r - 0.01 * (k - 1) for r, k in zip(rewards, ks, strict=True)],
            "p_random": [k / N for k in ks],
        }
    )


@pytest.fixture
def per_query() -> pd.DataFrame:
    return pd.concat(
        [
            _rows("m", 1, [1, 2, 10, 3], [1, 1, 1, 0], [3.3, 2.3, 0.0, 0.0]),
            _rows("m", 2, [1, 1, 4, 10], [1, 0, 1, 1], [3.3, 0.0, 1.3, 0.0]),
            _rows("f", 1, [3, 3, 3, 3], [1, 1, 0, 1], [1.7, 1.7, 0.0, 1.7]),
        ],
        ignore_index=True,
    )


def test_depth_spread() -> None:
    got = depth_spread([1, 2, 3, 10, 10], 10)
    assert got == {"median_k": 3.0, "p90_k": 10.0, "whole_list_pct": 40.0}
    assert math.isnan(depth_spread([], 10)["median_k"])
    assert {"median_k", "p90_k", "whole_list_pct"} <= set(summarise(_rows("m", 1, [1, 10], [1, 1], [1, 0])).columns)


def test_aggregate_interval_is_a_query_bootstrap_and_seed_spread_is_separate(per_query: pd.DataFrame) -> None:
    summary = summarise(per_query)
    n_boot = 500
    agg = aggregate(summary, per_query, seed=7, n_boot=n_boot).set_index("method")
    m = agg.loc["m"]
    s = summary[summary["method"] == "m"].set_index("seed")
    assert m["found_pct"] == pytest.approx(s["found_pct"].mean())
    assert (m["found_pct_seed_min"], m["found_pct_seed_max"]) == (75.0, 75.0)
    assert (m["mean_k_seed_min"], m["mean_k_seed_max"]) == (4.0, 4.0)
    # the interval: the same resamples of the 4 test queries, metric per seed, mean over seeds
    idx = np.random.default_rng(7).integers(4, size=(n_boot, 4))
    found = per_query[per_query["method"] == "m"].pivot(index="seed", columns="qid", values="found").to_numpy()
    k = per_query[per_query["method"] == "m"].pivot(index="seed", columns="qid", values="k").to_numpy()
    boot_found = [100 * np.mean([found[s_, row].mean() for s_ in range(2)]) for row in idx]
    boot_k = [np.mean([k[s_, row].mean() for s_ in range(2)]) for row in idx]
    assert m["found_pct_lo"] == pytest.approx(np.quantile(boot_found, 0.025))
    assert m["found_pct_hi"] == pytest.approx(np.quantile(boot_found, 0.975))
    assert m["mean_k_lo"] == pytest.approx(np.quantile(boot_k, 0.025))
    assert m["mean_k_hi"] == pytest.approx(np.quantile(boot_k, 0.975))
    # equal seed summaries would give an empty min-max "interval"; the query bootstrap is not empty
    assert m["found_pct_lo"] < m["found_pct"] < m["found_pct_hi"]
    # depth spread pools the 8 rows of both seeds; 2 of 8 episodes show the whole list
    assert m["median_k"] == 2.5
    assert m["whole_list_pct"] == 25.0
    assert m["mean_k_partial"] == pytest.approx((1 + 2 + 3 + 1 + 1 + 4) / 6)
    assert m["found_pct_partial"] == pytest.approx(100 * 4 / 6)
    f = agg.loc["f"]
    assert f["whole_list_pct"] == 0.0 and f["mean_k_partial"] == f["mean_k"]


def test_aggregate_rejects_seeds_on_different_queries(per_query: pd.DataFrame) -> None:
    bad = per_query.copy()
    bad.loc[(bad["method"] == "m") & (bad["seed"] == 2) & (bad["qid"] == "q3"), "qid"] = "q9"
    with pytest.raises(ValueError, match="same splits and test queries"):
        aggregate(summarise(bad), bad)


def test_unit_resamples_stratify_by_split_and_reduce_to_the_query_bootstrap() -> None:
    from experiments.report.tables import query_resamples, unit_resamples

    one = unit_resamples(np.zeros(7, dtype=np.int64), 50, seed=3)
    assert np.array_equal(one, query_resamples(7, 50, seed=3))
    assert np.array_equal(one, np.random.default_rng(3).integers(7, size=(50, 7)))
    splits = np.array([0, 0, 0, 4, 4])
    idx = unit_resamples(splits, 200, seed=1)
    assert idx.shape == (200, 5)
    assert ((idx[:, :3] >= 0) & (idx[:, :3] < 3)).all() and ((idx[:, 3:] >= 3) & (idx[:, 3:] < 5)).all()
    with pytest.raises(ValueError, match="contiguous"):
        unit_resamples(np.array([0, 1, 0]), 5)


def test_aggregate_over_splits_stratifies_and_reports_seed_and_split_ranges() -> None:
    """Two splits with different test queries: the point estimate is the mean over runs, the
    interval a bootstrap that resamples each split's queries within that split (metric per run,
    mean over runs), and the seed range and the split range are separate columns."""
    from experiments.report.tables import paired_differences, unit_resamples

    def rows(method: str, seed: int, split: int, ks: list[int], found: list[int]) -> pd.DataFrame:
        df = _rows(method, seed, ks, found, [float(f) * math.log2(N / k) for k, f in zip(ks, found, strict=True)])
        df["qid"] = [f"s{split}q{i}" for i in range(len(ks))]
        return df.assign(split_seed=split)

    pq = pd.concat(
        [
            rows("m", 1, 0, [1, 2, 3], [1, 1, 0]),
            rows("m", 2, 0, [1, 1, 3], [1, 0, 1]),
            rows("m", 1, 1, [2, 2, 2, 5], [1, 1, 1, 1]),
            rows("m", 2, 1, [1, 2, 2, 5], [0, 1, 1, 1]),
        ],
        ignore_index=True,
    )
    keys = ["condition", "method", "seed", "split_seed"]
    summary = summarise(pq, keys)
    n_boot = 300
    m = aggregate(summary, pq, seed=5, n_boot=n_boot).iloc[0]
    assert (m["n_seeds"], m["n_splits"]) == (2, 2)
    assert m["found_pct"] == pytest.approx(summary["found_pct"].mean())
    by_seed = summary.groupby("seed")["mean_reward"].mean()
    by_split = summary.groupby("split_seed")["mean_reward"].mean()
    assert (m["mean_reward_seed_min"], m["mean_reward_seed_max"]) == pytest.approx((by_seed.min(), by_seed.max()))
    assert (m["mean_reward_split_min"], m["mean_reward_split_max"]) == pytest.approx((by_split.min(), by_split.max()))
    idx = unit_resamples(np.array([0, 0, 0, 1, 1, 1, 1]), n_boot, seed=5)
    wide = pq.pivot(index="seed", columns=["split_seed", "qid"], values="k").sort_index(axis=1).to_numpy()
    boot = [np.mean([wide[s_, row[a:b]].mean() for s_ in range(2) for a, b in ((0, 3), (3, 7))]) for row in idx]
    assert m["mean_k_lo"] == pytest.approx(np.quantile(boot, 0.025))
    assert m["mean_k_hi"] == pytest.approx(np.quantile(boot, 0.975))
    # paired differences pair each test unit (split, query) of both methods
    other = pq[pq["method"] == "m"].assign(method="gap-tail10-buffer5", reward=0.0, reward_net=0.0)
    d = paired_differences(pd.concat([pq.assign(method="bor-dqn"), other], ignore_index=True), n_boot=100)
    assert d.iloc[0]["n_queries"] == 7  # differences of the judged net reward
    assert d.iloc[0]["diff"] == pytest.approx(pq.groupby(["split_seed", "qid"])["reward_net"].mean().mean())


def test_ratio_interval_is_paired() -> None:
    num, den = np.array([1.0, 4.0]), np.array([2.0, 4.0])
    idx = np.array([[0, 0], [1, 1], [0, 1]])
    frac, lo, hi = ratio_interval(num, den, idx, level=0.5)
    assert frac == pytest.approx(5 / 6)
    assert lo == pytest.approx(np.quantile([0.5, 1.0, 5 / 6], 0.25))
    assert hi == pytest.approx(np.quantile([0.5, 1.0, 5 / 6], 0.75))
    assert all(math.isnan(x) for x in ratio_interval(num, np.zeros(2), idx))


def test_git_state_ignores_rewritten_results_but_not_code(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regenerating results/ in a clean checkout must record git_dirty false; a code edit true."""
    import subprocess

    from experiments import io

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "summary.csv").write_text("a\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    monkeypatch.setattr(io, "REPO", tmp_path)
    assert io.git_state()["git_dirty"] is False
    (tmp_path / "results" / "summary.csv").write_text("b\n")
    assert io.git_state()["git_dirty"] is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert io.git_state()["git_dirty"] is True


def test_code_fingerprint_covers_cell_code_not_rendering() -> None:
    from experiments.io import REPO, code_files

    rel = {p.relative_to(REPO).as_posix() for p in code_files()}
    assert {"rewards/bor.py", "envs/ranked.py", "agents/dqn.py", "experiments/runner.py", "experiments/io.py"} <= rel
    assert not [r for r in rel if r.startswith("experiments/report/") or r == "experiments/figures.py"]
    # every experiments module a cell's code imports (transitively) is covered
    import ast

    todo, seen = ["experiments/runner.py"], set()
    while todo:
        path = todo.pop()
        seen.add(path)
        for node in ast.walk(ast.parse((REPO / path).read_text())):
            mod = node.module if isinstance(node, ast.ImportFrom) else None
            if mod and mod.startswith("experiments."):
                dep = mod.replace(".", "/") + ".py"
                if dep not in seen:
                    todo.append(dep)
    assert seen <= rel, sorted(seen - rel)


def _bucket_rows(ks_by_bucket: dict[str, list[int]]) -> pd.DataFrame:
    rows = []
    for b, ks in ks_by_bucket.items():
        rows += [
            {"condition": "c", "method": "m", "seed": 1, "qid": f"{b}{i}", "bucket": b, "k": k}
            for i, k in enumerate(ks)
        ]
    return pd.DataFrame(rows)


def test_depth_trend_uses_every_bucket_with_enough_queries() -> None:
    from experiments.report.tables import depth_trend

    up = _bucket_rows({"easy": [1, 2] * 10, "medium": [3, 4] * 10, "hard": [6, 8] * 10, "very hard": [50, 50]})
    t = depth_trend(up, "c", "m", n_boot=500)
    assert t is not None
    assert t.buckets == ["easy", "medium", "hard"]  # very hard has 2 queries: left out
    assert t.mean_k == [1.5, 3.5, 7.0] and t.grows and t.diff_lo > 0
    # the two ends grow but the middle dips: not a growth claim
    dip = _bucket_rows({"easy": [2] * 12, "medium": [1] * 12, "hard": [9] * 12})
    t = depth_trend(dip, "c", "m", n_boot=200)
    assert t is not None and not t.monotone and not t.grows
    assert depth_trend(_bucket_rows({"easy": [1] * 12, "hard": [2] * 3}), "c", "m") is None


def test_measured_factors_from_manifests_and_test_rows(tmp_path) -> None:
    """Train found@1 is derived per split from the recorded all-query found@1 and the split sizes,
    then averaged over splits, with the range of test minus train over splits; the BFCL
    tool-text fields are read off the tool_text function, not asserted."""
    import json

    from experiments.report.tables import bfcl_text_fields, condition_meta, measured_factors

    for split, all1 in ((0, 50.0), (1, 40.0)):
        run = tmp_path / "runs" / f"bfcl-bm25__fixed-1__s1__split{split}"
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"condition": "bfcl-bm25", "split_seed": split}))
        meta = {
            "benchmark": "bfcl", "n_train": 6, "n_test": 4, "n_queries": 10, "n_tools": 370,
            "found_at_1_pct_all": all1, "tool_text": "spec",
        }  # fmt: skip
        (run / "manifest.json").write_text(json.dumps({"condition": meta}))
    pq = pd.DataFrame(
        {
            "condition": "bfcl-bm25",
            "method": "fixed-1",
            "split_seed": [0, 0, 0, 0, 1, 1, 1, 1],
            "qid": ["a", "b", "c", "d", "a", "e", "f", "g"],
            "gold_rank": [1, 1, 1, 4, 1, 2, 2, 2],
        }
    )
    f = measured_factors(pq, condition_meta(tmp_path / "runs"), ["bfcl-bm25"]).iloc[0]
    train0, train1 = (50.0 * 10 - 75.0 * 4) / 6, (40.0 * 10 - 25.0 * 4) / 6
    assert f["n_splits"] == 2
    assert f["found_at_1_test"] == pytest.approx(50.0)
    assert f["found_at_1_train"] == pytest.approx((train0 + train1) / 2)
    assert f["test_minus_train_min"] == pytest.approx(min(75.0 - train0, 25.0 - train1))
    assert f["test_minus_train_max"] == pytest.approx(max(75.0 - train0, 25.0 - train1))
    assert f["n_queries"] == 10 and f["paper_n_queries"] == 400
    assert f["tool_text"] == " + ".join(bfcl_text_fields("spec")) == "description + parameter names"
    assert bool(f["tool_text_as_spec"]) is True
    assert bfcl_text_fields("rich") == ["function name", "description", "parameter names"]


def test_whole_list_section_lists_runaways_and_reads_the_validation_tests(tmp_path) -> None:
    """The study's whole-list section names every learned pair with K = N episodes and, when the tuning
    folders exist, computes the before/after sentence from their files (the package default is "after")."""
    from experiments.report.page import section_lines
    from experiments.report.study import whole_list_section

    agg = pd.DataFrame(
        {
            "condition": ["c1", "c1", "c1", "c2", "c2"],
            "method": ["bor-dqn", "bor-cutoff", "gap", "bor-tabular", "bor-dqn@strict"],
            "whole_list_pct": [2.5, 0.0, 40.0, 0.0, 1.0],
        }
    )
    meta = {("c1", 0): {"tied_tail_pct": 88.0, "gold_in_tied_tail_pct": 30.0}}
    lines = "\n".join(section_lines(whole_list_section(agg, meta, tmp_path)))
    assert "4 condition x method pairs" in lines and "2 pairs show it" in lines and "c1 bor-dqn 2.50%" in lines
    assert "c2 bor-dqn@strict 1.00%" in lines  # learned by registry group, tagged or not
    assert "gap" not in lines.split("Tied tails")[0]  # peers are not learned policies
    assert "c1 88.0% / 30.0% (has whole-list episodes)" in lines
    assert "Why BoR-DQN" not in lines  # no tuning folders yet
    folder = tmp_path / "tuning" / "n_steps"
    folder.mkdir(parents=True)
    cols = {
        f"{m}_{s}": v
        for m, v in (("mean_reward", 3.0), ("whole_list_pct", 0.0), ("mean_k", 4.0))
        for s in ("mean", "min", "max")
    }
    before = {**cols, "setting": "n_steps=1, double_q=False", "whole_list_pct_max": 40.0, "mean_reward_mean": 2.5}
    after = {**cols, "setting": "n_steps=4, double_q=False"}
    pd.DataFrame([before, after]).to_csv(folder / "c1_mean.csv", index=False)
    lines = "\n".join(section_lines(whole_list_section(agg, meta, tmp_path)))
    assert "`shortlist tune --grid n_steps=1,4 double_q=false,true`" in lines
    assert "lower than with n_steps=1, double_q=False on 1 of the 1 conditions" in lines
    assert "zero on 1 of 1; mean validation reward changes by c1 +0.500." in lines


def test_scores_digest_names_the_score_matrix_not_the_order() -> None:
    """The runs' ``scores_sha256``: the same for the same queries in any order, different when one score or
    the second scorer's scores change."""
    from envs import RankedQuery
    from experiments.runner import scores_digest

    a = [RankedQuery([0.9, 0.5, 0.1], [1], "a"), RankedQuery([0.8, 0.7], [2], "b")]
    digest = scores_digest(a)
    assert len(digest) == 64 and scores_digest(a[::-1]) == digest
    assert scores_digest([RankedQuery([0.9, 0.5, 0.2], [1], "a"), a[1]]) != digest
    with_aux = [RankedQuery([0.9, 0.5, 0.1], [1], "a", aux_scores=[0.1, 0.2, 0.3]), a[1]]
    assert scores_digest(with_aux) != digest


def test_the_unknown_r_table_prints_no_infinity() -> None:
    """BoR bits (all) with no query complete is log2 0 (R assumed 1) or 0/0 (no depth could show the true R):
    both are *none complete* on the page, never ``-inf``; an exact estimate is said."""
    from experiments.report.multi import unknown_r_lines
    from experiments.report.page import Paragraph, Table

    base = {"condition": "c", "method": "fixed-1", "bor_bits": 5.36, "r_exact_pct": 100.0, "complete_pct": 0.0}
    ur = pd.DataFrame([
        {**base, "assumption": "R=1", "bor_bits_minus_true": 1.0, "bor_bits_all": -np.inf,
         "bor_bits_all_minus_true": np.nan},
        {**base, "assumption": "estimated", "bor_bits_minus_true": 0.0, "bor_bits_all": np.nan,
         "bor_bits_all_minus_true": np.nan},
        {**base, "method": "fixed-5", "assumption": "true", "complete_pct": 7.4, "bor_bits_minus_true": 0.0,
         "bor_bits_all": 7.05, "bor_bits_all_minus_true": 0.0},
    ])  # fmt: skip
    blocks = unknown_r_lines(ur)
    table = next(b for b in blocks if isinstance(b, Table))
    cells = [list(row[5:]) for row in table.rows]
    assert cells == [["none complete", "-"], ["none complete", "-"], ["7.05", "0.00"]]
    assert not any("inf" in str(c) for row in table.rows for c in row)
    text = " ".join(b.text for b in blocks if isinstance(b, Paragraph))
    assert "none complete" in text and "estimate was exact on every query" in text


@pytest.mark.parametrize("n_boot", [1, 255, 256, 257, 1000])
def test_resampled_means_are_the_one_shot_gather_bit_for_bit(n_boot: int) -> None:
    from experiments.report.tables import resampled_means, unit_resamples

    rng = np.random.default_rng(7)
    splits = np.repeat([0, 1, 2], [40, 33, 27])
    idx = unit_resamples(splits, n_boot, 3)
    one = rng.normal(size=splits.size) * 1e3
    rows = rng.normal(size=(3, splits.size))
    assert np.array_equal(resampled_means(one, idx), one[idx].mean(axis=1))
    assert np.array_equal(resampled_means(rows, idx[:, 40:73]), rows[:, idx[:, 40:73]].mean(axis=2))
    assert resampled_means(rows, idx).shape == (3, n_boot)


def test_report_tables_are_the_same_on_one_thread_and_on_several(monkeypatch: pytest.MonkeyPatch) -> None:
    """The threaded bootstraps (:func:`parallel_map`) put every interval on its own row: the tables equal the
    single-threaded ones exactly, and every row's interval is recomputed here from its own differences."""
    from experiments.report import tables
    from experiments.report.tables import diff_interval, limits_table, paired_differences, unit_resamples

    rng = np.random.default_rng(0)
    methods = ("bor-dqn", "bor-tabular", "bor-posterior", "bor-cutoff", "bor-dp", "oracle", "gap", "fixed-3")
    rows = []
    for ci, cond in enumerate(("bfcl-bm25", "metatool-bm25")):
        for split in (0, 1):
            for mi, m in enumerate(methods):
                n_q = 30 + 10 * ci
                ks = rng.integers(1, N + 1, n_q).tolist()
                found = (rng.random(n_q) < 0.3 + 0.08 * mi).astype(int).tolist()
                df = _rows(m, 42, ks, found, [f * math.log2(N / k) for k, f in zip(ks, found, strict=True)])
                rows.append(df.assign(condition=cond, split_seed=split, qid=[f"s{split}q{i}" for i in range(n_q)]))
    pq = pd.concat(rows, ignore_index=True)
    summary = summarise(pq, ("condition", "method", "seed", "split_seed"))

    def tables_now() -> tuple[pd.DataFrame, ...]:
        return paired_differences(pq, n_boot=500), limits_table(pq, n_boot=300), aggregate(summary, pq, n_boot=300)

    monkeypatch.setattr(tables, "report_threads", lambda: 4)
    many = tables_now()
    monkeypatch.setattr(tables, "report_threads", lambda: 1)
    one = tables_now()
    for a, b in zip(many, one, strict=True):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    paired = many[0]
    assert len(paired) > 10 and paired["diff_lo"].nunique() == len(paired)
    assert many[2]["mean_reward_net_lo"].nunique() == len(many[2]) == 2 * len(methods)
    for cond, g in pq.groupby("condition"):
        wide = g.pivot_table(index="method", columns=["split_seed", "qid"], values="reward_net", sort=True)
        idx = unit_resamples(wide.columns.get_level_values(0).to_numpy(), 500, 0)
        for _, r in paired[paired["condition"] == cond].iterrows():
            want = diff_interval((wide.loc[r["agent"]] - wide.loc[r["peer"]]).to_numpy(), idx)
            assert (r["diff"], r["diff_lo"], r["diff_hi"]) == (want["diff"], want["diff_lo"], want["diff_hi"])


def test_parallel_map_keeps_the_order_of_its_items(monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments.report import tables

    monkeypatch.setattr(tables, "report_threads", lambda: 3)
    assert tables.parallel_map(lambda x: x * x, range(50)) == [x * x for x in range(50)]
    assert tables.parallel_map(str, []) == []
    monkeypatch.undo()
    assert 1 <= tables.report_threads() <= tables.MAX_REPORT_THREADS
