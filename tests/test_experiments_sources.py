"""``shortlist train`` on every source: MetaTool and ToolBench candidate sets (shared data),
bring-your-own TREC runs and BEIR folders (fixtures written here)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.conditions import BENCHMARKS, CandidateRule, build_condition, candidate_rule, candidate_sets
from experiments.cli import main

HAVE_SHARED = Path(os.environ.get("SHORTLIST_DATA_DIR", "/nonexistent"), "metatool").is_dir()
needs_data = pytest.mark.skipif(not HAVE_SHARED, reason="shared benchmark data folder not present")


@pytest.fixture(scope="module")
def cache_dir(shared_cache: Path) -> str:
    return str(shared_cache)


def write_run(tmp: Path, n_queries: int = 30, n_docs: int = 40, seed: int = 0) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    run_lines, qrel_lines = [], []
    for q in range(n_queries):
        scores = np.sort(rng.random(n_docs))[::-1]
        gold = sorted(rng.choice(n_docs, size=1 + q % 3, replace=False) if q % 2 else [min(q % 5, n_docs - 1)])
        for rank, s in enumerate(scores, start=1):
            run_lines.append(f"q{q} Q0 d{rank - 1} {rank} {s:.6f} mine")
        qrel_lines += [f"q{q} 0 d{g} 1" for g in gold]
    run, qrels = tmp / "run.trec", tmp / "qrels.txt"
    run.write_text("\n".join(run_lines) + "\n")
    qrels.write_text("\n".join(qrel_lines) + "\n")
    return run, qrels


def test_candidate_sets_rules() -> None:
    sim = np.array([[1.0, 0.9, 0.1, 0.5, 0.2], [0.9, 1.0, 0.3, 0.2, 0.1]])
    gold = np.array([0, 1])
    c = candidate_sets(np.array([0, 1]), gold, 5, CandidateRule(3, 2, 0), sim, seed=0)
    np.testing.assert_array_equal(c, [[0, 1, 3], [0, 1, 2]])  # gold + 2 nearest, registry order
    mixed = candidate_sets(np.array([0, 1]), gold, 5, CandidateRule(4, 1, 2), sim, seed=0)
    assert all(g in row and len(set(row)) == 4 for g, row in zip(gold, mixed, strict=True))
    np.testing.assert_array_equal(mixed, candidate_sets(np.array([0, 1]), gold, 5, CandidateRule(4, 1, 2), sim, seed=0))
    with pytest.raises(ValueError, match="exceeds"):
        CandidateRule(3, 2, 1)
    with pytest.raises(ValueError, match="no candidate-set variant 'top7'"):
        candidate_rule("metatool", "top7")
    assert candidate_rule("toolbench", "sub500").n == 500


def test_byo_trec_run_trains_and_keeps_true_r(tmp_path: Path, cache_dir: str) -> None:
    run, qrels = write_run(tmp_path)
    out = tmp_path / "o"
    code = main(
        [
            "train",
            "--run",
            str(run),
            "--qrels",
            str(qrels),
            "--n-candidates",
            "1000",
            "--agent",
            "tabular",
            "--set",
            "tabular.episodes=300",
            "--seeds",
            "1",
            "--out",
            str(out),
            "--cache-dir",
            cache_dir,
            "--no-progress",
        ]
    )
    assert code == 0
    pq = pd.read_csv(out / "per_query.csv")
    (condition,) = set(pq["condition"])  # run-<stem>-<hash of the inputs>-n<N>
    assert re.fullmatch(r"run-run-[0-9a-f]{6}-n1000", condition), condition
    assert set(pq["n"]) == {1000}
    assert pq["r"].max() == 3  # multi-relevant queries keep their R
    from rewards import p_random

    np.testing.assert_allclose(pq["p_random"], [p_random(k, 1000, r) for k, r in zip(pq["k"], pq["r"], strict=True)])
    cfg = json.loads(next((out / "runs").iterdir()).joinpath("config.json").read_text())
    assert len(cfg["options"]["run_sha256"]) == 64


def test_byo_errors(tmp_path: Path, cache_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    run, qrels = write_run(tmp_path)
    base = [
        "train",
        "--agent",
        "fixed",
        "--k",
        "1",
        "--seeds",
        "1",
        "--cache-dir",
        cache_dir,
        "--out",
        str(tmp_path / "o"),
    ]
    assert main([*base, "--run", str(run)]) == 2
    assert "--run and --qrels go together" in capsys.readouterr().err
    assert main([*base, "--run", str(tmp_path / "missing.trec"), "--qrels", str(qrels)]) == 2
    assert "missing.trec" in capsys.readouterr().err
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 d1 1 0.5 x\nq1 Q0 d2 2 notanumber x\n")
    assert main([*base, "--run", str(bad), "--qrels", str(qrels)]) == 2
    err = capsys.readouterr().err
    assert "bad.trec:2" in err and "Traceback" not in err
    assert main([*base, "--run", str(run), "--qrels", str(qrels), "--n-candidates", "5"]) == 2
    assert "n_candidates" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--benchmark", "run"], "--benchmark run needs --run RUN --qrels QRELS"),
        (["--benchmark", "beir", "--beir-dir", "X", "RUN"], "--run/--qrels replace --benchmark: drop --benchmark beir"),
        (["--scorer", "minilm", "RUN"], "--run/--qrels bring their own scores"),
        (["--variant", "hybrid", "RUN"], "--run/--qrels bring their own scores"),
        (["--beir-dir", "X"], "--beir-dir goes with --benchmark beir (the data here: bfcl)"),
        (["--beir-split", "dev", "RUN"], "--beir-split goes with --benchmark beir (the data here: run)"),
        (["--benchmark", "beir", "--beir-dir", "X", "--n-candidates", "5000"], "--n-candidates goes with --run"),
        (["--benchmark", "metatool", "--tools", "T", "--log", "L"], "--tools/--log replace --benchmark"),
    ],
)
@pytest.mark.parametrize("command", ["train", "recommend"])
def test_options_of_another_data_source_are_refused_not_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, extra: list[str], said: str
) -> None:
    """One line, status 2, nothing written (``--benchmark run`` without a run was an AssertionError's traceback)."""
    run, qrels = write_run(tmp_path)
    args = [a for e in extra for a in (["--run", str(run), "--qrels", str(qrels)] if e == "RUN" else [e])]
    out = tmp_path / "o"
    assert main([command, *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_byo_beir_folder(tmp_path: Path, cache_dir: str) -> None:
    folder = tmp_path / "tiny"
    (folder / "qrels").mkdir(parents=True)
    docs = [f"document {i} about topic {i % 4} with words {'alpha beta gamma delta'.split()[i % 4]}" for i in range(12)]
    (folder / "corpus.jsonl").write_text(
        "\n".join(json.dumps({"_id": f"d{i}", "title": "", "text": t}) for i, t in enumerate(docs))
    )
    queries = [f"topic {i % 4} {'alpha beta gamma delta'.split()[i % 4]}" for i in range(8)]
    (folder / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": f"q{i}", "text": t}) for i, t in enumerate(queries))
    )
    rows = ["query-id\tcorpus-id\tscore"] + [f"q{i}\td{j}\t1" for i in range(8) for j in range(12) if j % 4 == i % 4]
    (folder / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "o"
    assert (
        main(
            [
                "train",
                "--benchmark",
                "beir",
                "--beir-dir",
                str(folder),
                "--scorer",
                "bm25",
                "--agent",
                "fixed",
                "--k",
                "1",
                "3",
                "--seeds",
                "1",
                "--out",
                str(out),
                "--cache-dir",
                cache_dir,
                "--no-progress",
            ]
        )
        == 0
    )
    pq = pd.read_csv(out / "per_query.csv")
    assert set(pq["r"]) == {3} and set(pq["n"]) == {12}


@needs_data
@pytest.mark.parametrize(
    "benchmark, scorer, variant, n, n_queries, buckets",
    [
        ("metatool", "bm25", "", 100, 2000, "default"),
        ("metatool", "minilm", "top20", 20, 1200, "narrow"),
        ("metatool", "minilm", "top50", 50, 1200, "narrow"),
        # MiniLM embeddings of all 3,406 ToolBench tools: minutes on 2 cores
        pytest.param("toolbench", "minilm", "", 50, 474, "default", marks=pytest.mark.slow),
    ],
)
def test_shared_benchmark_conditions(
    benchmark: str, scorer: str, variant: str, n: int, n_queries: int, buckets: str, shared_cache: Path
) -> None:
    c = build_condition(benchmark, scorer, variant=variant, cache_dir=shared_cache)
    assert len(c.queries) == n_queries
    assert {q.n_candidates for q in c.queries} == {n}
    assert all(q.gold_rank >= 1 for q in c.queries)
    assert len(c.train_idx) == round(0.7 * n_queries)
    assert c.buckets == buckets
    again = build_condition(benchmark, scorer, variant=variant, cache_dir=shared_cache)
    assert [q.gold_rank for q in again.queries] == [q.gold_rank for q in c.queries]
    assert again.meta["score_cache_hit"]


@needs_data
@pytest.mark.parametrize(
    "n_queries",
    [
        # the main rule on 1,200 sampled queries: the sample of the top20/top50 rules (same seed), whose MiniLM
        # embeddings the shared cache already holds; the main rule's 2,000 are another sample, embedded anew
        1200,
        pytest.param(None, marks=pytest.mark.slow),  # the condition as the study builds it
    ],
    ids=["sample1200", "all2000"],
)
def test_scorers_share_candidate_sets(
    n_queries: int | None, shared_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The distractor similarity does not depend on the scorer: BM25 and MiniLM rank the same sets (MetaTool's
    main rule: the gold tool, its 24 most similar tools and 75 drawn at random)."""
    rules = BENCHMARKS["metatool"][1]
    if n_queries is not None:
        monkeypatch.setitem(rules, "", replace(rules[""], n_queries=n_queries))
    a = build_condition("metatool", "bm25", cache_dir=shared_cache)
    b = build_condition("metatool", "minilm", cache_dir=shared_cache)
    assert len(a.queries) == (n_queries or 2000) and a.meta["candidate_rule"]["n_similar"] == 24
    assert [q.qid for q in a.queries] == [q.qid for q in b.queries]
    assert a.meta["candidate_rule"] == b.meta["candidate_rule"]
    for ta, tb in zip(a.ranked_tools, b.ranked_tools, strict=True):
        assert set(ta.tolist()) == set(tb.tolist()) and len(ta) == 100
    assert any(not np.array_equal(ta, tb) for ta, tb in zip(a.ranked_tools, b.ranked_tools, strict=True))
