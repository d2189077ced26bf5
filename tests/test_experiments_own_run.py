"""A researcher's own TREC run + qrels through ``shortlist train | evaluate | predict`` (issue 28):
run ids that carry the inputs' hash, a split on the query ids, no silent leakage, console notes
for small or skipped data, tied and one-candidate lists."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments import load_policy
from experiments.cli import main

FAST = ["--agent", "threshold", "--seeds", "42", "--no-progress"]


def write_run(
    folder: Path, seed: int, n_queries: int = 40, depth: int = 20, name: str = "my", prefix: str = "q"
) -> tuple[Path, Path]:
    """A TREC run (grouped by query) and its qrels: one relevant document per query, most often near the top;
    query ids ``<prefix>0``, ``<prefix>1``, ..."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    lines, qrels = [], []
    for q in range(n_queries):
        scores = np.sort(rng.normal(size=depth))[::-1]
        gold = min(int(rng.geometric(0.3)), depth)
        lines += [f"{prefix}{q} Q0 d{q}_{r} {r} {s:.6f} bm25" for r, s in enumerate(scores, 1)]
        qrels.append(f"{prefix}{q} 0 d{q}_{gold} 1")
    run, qrels_path = folder / f"{name}.run", folder / f"{name}.qrels"
    run.write_text("\n".join(lines) + "\n")
    qrels_path.write_text("\n".join(qrels) + "\n")
    return run, qrels_path


def train(run: Path, qrels: Path, out: Path, *extra: str) -> int:
    return main(["train", "--run", str(run), "--qrels", str(qrels), *FAST, *extra, "--out", str(out)])


def run_dirs(out: Path) -> list[Path]:
    return sorted(p for p in (out / "runs").iterdir() if p.is_dir() and not p.name.startswith("."))


# ---------------------------------------------------------------- 1. run ids carry the inputs' hash


def test_a_run_of_other_data_never_overwrites_an_earlier_one(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """data/my.run and data2/my.run hold other lists: two run directories, the first left as it was;
    the same bytes in a third folder get the first one's name (and reuse its cell)."""
    out = tmp_path / "runs-byo"
    first = write_run(tmp_path / "data", seed=0)
    assert train(*first, out) == 0
    (before,) = run_dirs(out)
    kept = {f.name: f.read_bytes() for f in before.iterdir() if f.is_file()}
    assert train(*write_run(tmp_path / "data2", seed=1), out) == 0
    dirs = run_dirs(out)
    assert len(dirs) == 2 and before in dirs, [d.name for d in dirs]
    assert {f.name: f.read_bytes() for f in before.iterdir() if f.is_file()} == kept
    assert all(d.name.startswith("run-my-") and d.name.endswith("__bor-threshold__s42") for d in dirs)
    hashes = {d.name.split("__")[0].removeprefix("run-my-") for d in dirs}
    assert len(hashes) == 2 and all(len(h) == 6 and int(h, 16) >= 0 for h in hashes)

    elsewhere = tmp_path / "elsewhere" / "deeper"
    elsewhere.mkdir(parents=True)
    copies = [Path(shutil.copy(f, elsewhere / f.name)) for f in first]
    capsys.readouterr()
    assert train(*copies, out) == 0
    assert run_dirs(out) == dirs  # same bytes, same condition name, wherever the files live
    assert before.name.split("__")[0] in capsys.readouterr().out


def test_a_run_replaced_by_other_settings_is_said_with_what_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The run id names the data, the method and the seed, not every setting: a run made with another step cost
    (or --set) is replaced, and the console says which and what changed; the same settings reuse it silently."""
    run, qrels = write_run(tmp_path / "data", seed=0)
    out = tmp_path / "o"
    assert train(run, qrels, out) == 0
    (made,) = run_dirs(out)
    capsys.readouterr()
    assert train(run, qrels, out) == 0
    assert "replacing" not in capsys.readouterr().err
    assert train(run, qrels, out, "--step-cost", "0.05") == 0
    err = capsys.readouterr().err
    assert f"shortlist: note: replacing {made}, made with other settings or inputs: " in err, err
    assert "episode.step_cost: 0.01 -> 0.05" in err and "objective.step_cost: 0.01 -> 0.05" in err
    assert run_dirs(out) == [made]


def test_hashed_run_dirs_work_with_evaluate_load_policy_and_predict(tmp_path: Path) -> None:
    run, qrels = write_run(tmp_path / "data", seed=0)
    assert train(run, qrels, tmp_path / "o") == 0
    (run_dir,) = run_dirs(tmp_path / "o")
    condition = run_dir.name.split("__")[0]
    assert json.loads((run_dir / "config.json").read_text())["condition"] == condition
    assert set(pd.read_csv(run_dir / "per_query.csv")["condition"]) == {condition}

    assert main(["evaluate", "--run-dir", str(run_dir), "--out", str(tmp_path / "e")]) == 0
    evaluated = pd.read_csv(tmp_path / "e" / "per_query.csv", dtype={"qid": str})
    trained = pd.read_csv(run_dir / "per_query.csv", dtype={"qid": str})
    pd.testing.assert_frame_equal(evaluated[trained.columns], trained)

    policy = load_policy(run_dir)
    assert policy.depth([3.0, 1.0, 0.9, 0.1]) >= 1
    short = tmp_path / "short.run"
    assert main(["predict", "--run-dir", str(run_dir), "--run", str(run), "--out", str(short)]) == 0
    assert short.is_file() and short.read_text().count("\n") >= 40


def test_predict_reads_the_run_from_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """``--run -`` streams the run from the standard input (plain or gzip) and writes the same file as from a path;
    a malformed line is named as ``stdin:<line>``; a missing file says how to read stdin."""
    import gzip
    import io
    import sys

    run, qrels = write_run(tmp_path / "data", seed=0)
    assert train(run, qrels, tmp_path / "o") == 0
    (run_dir,) = run_dirs(tmp_path / "o")
    from_file = tmp_path / "file.run"
    assert main(["predict", "--run-dir", str(run_dir), "--run", str(run), "--out", str(from_file)]) == 0
    for raw in (run.read_bytes(), gzip.compress(run.read_bytes())):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))
        out = tmp_path / "stdin.run"
        assert main(["predict", "--run-dir", str(run_dir), "--run", "-", "--out", str(out)]) == 0
        assert out.read_bytes() == from_file.read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"q1 Q0 d1 1 3.0 t\nq1 Q0 d2 2 x t\n")))
    capsys.readouterr()
    assert main(["predict", "--run-dir", str(run_dir), "--run", "-", "--out", str(tmp_path / "bad.run")]) == 2
    assert "error: stdin:2: " in capsys.readouterr().err and not (tmp_path / "bad.run").exists()
    assert main(["predict", "--run-dir", str(run_dir), "--run", str(tmp_path / "none.run")]) == 2
    assert "no such file (give - to read the run from the standard input)" in capsys.readouterr().err


def test_predict_never_replaces_another_policys_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Two policies of one method (trained on other data): their default outputs differ by the policy id in the name,
    each with OUT.json naming its policy; a rerun by the same policy rewrites its file; an --out holding the other
    policy's run, or a file no record says this policy wrote, is refused in one line naming it and left as it was.
    Before, both defaults were my.bor-threshold.trec, the second silently replacing the first."""
    from servers import policy_id

    run, qrels = write_run(tmp_path / "data", seed=0)
    assert train(run, qrels, tmp_path / "a") == 0
    assert train(*write_run(tmp_path / "other", seed=1), tmp_path / "b") == 0
    (a,), (b,) = run_dirs(tmp_path / "a"), run_dirs(tmp_path / "b")
    ids = {d: policy_id(load_policy(d)) for d in (a, b)}
    assert ids[a] != ids[b]
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    for d in (a, b):
        assert main(["predict", "--run-dir", str(d), "--run", str(run)]) == 0
    names = {d: f"my.bor-threshold.{ids[d]}.trec" for d in (a, b)}
    assert sorted(p.name for p in here.iterdir()) == sorted(n + x for n in names.values() for x in ("", ".json"))
    for d, name in names.items():
        record = json.loads((here / f"{name}.json").read_text())
        assert (record["policy_id"], record["method"], record["run_dir"]) == (ids[d], "bor-threshold", str(d.resolve()))

    out = here / "short.run"
    assert main(["predict", "--run-dir", str(a), "--run", str(run), "--out", str(out)]) == 0
    assert main(["predict", "--run-dir", str(a), "--run", str(run), "--out", str(out)]) == 0  # its own: rewritten
    kept = {f: f.read_bytes() for f in (out, here / "short.run.json")}
    capsys.readouterr()
    assert main(["predict", "--run-dir", str(b), "--run", str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"shortlist: error: --out {out}: holds the run of another policy (bor-threshold, id {ids[a]}")
    assert len(err.splitlines()) == 1 and {f: f.read_bytes() for f in kept} == kept
    mine = here / "mine.run"
    mine.write_text("made by hand\n")
    assert main(["predict", "--run-dir", str(a), "--run", str(run), "--out", str(mine)]) == 2
    assert f"--out {mine}: exists, and no {mine}.json says this policy wrote it" in capsys.readouterr().err
    assert mine.read_text() == "made by hand\n" and not (here / "mine.run.json").exists()


# ---------------------------------------------------------------- 2. the split is on the query ids


def shuffled_copy(path: Path, folder: Path, seed: int) -> Path:
    """``path`` with its lines in another order, under ``folder``."""
    lines = path.read_text().splitlines()
    np.random.default_rng(seed).shuffle(lines)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / path.name).write_text("\n".join(lines) + "\n")
    return folder / path.name


def test_the_split_and_every_result_ignore_the_order_of_lines(tmp_path: Path) -> None:
    from benchmarks.conditions import build_condition, seeded_split

    run, qrels = write_run(tmp_path / "data", seed=0)
    shuf = shuffled_copy(run, tmp_path / "shuf", 1), shuffled_copy(qrels, tmp_path / "shuf", 2)
    pairs = [(run, qrels), shuf]
    conds = [build_condition("run", "run", options={"run": str(r), "qrels": str(q)}) for r, q in pairs]
    ids = sorted(q.qid for q in conds[0].queries)
    _, test = seeded_split(len(ids), 0.7, 0)
    for cond in conds:  # the seeded permutation of the sorted ids
        assert [q.qid for q in cond.queries] == ids
        assert [q.qid for q in cond.test] == [ids[i] for i in test]
    for r, q in pairs:
        assert train(r, q, tmp_path / "o") == 0
    a, b = run_dirs(tmp_path / "o")  # other bytes: two run directories, the same numbers
    assert (a / "agent.json").read_bytes() == (b / "agent.json").read_bytes()
    rows = [pd.read_csv(d / "per_query.csv").drop(columns="condition") for d in (a, b)]
    pd.testing.assert_frame_equal(*rows)


def test_train_frac_sets_the_share_of_training_queries_and_names_the_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run, qrels = write_run(tmp_path / "data", seed=0)
    assert train(run, qrels, tmp_path / "o", "--train-frac", "0.5") == 0
    (run_dir,) = run_dirs(tmp_path / "o")
    assert run_dir.name.split("__")[0].endswith("-train0.5")
    meta = json.loads((run_dir / "manifest.json").read_text())["condition"]
    assert (meta["n_train"], meta["n_test"], meta["train_frac"]) == (20, 20, 0.5)
    assert json.loads((run_dir / "config.json").read_text())["options"]["train_frac"] == "0.5"
    assert len(pd.read_csv(run_dir / "per_query.csv")) == 20
    capsys.readouterr()
    refused = ["train", "--benchmark", "bfcl", "--train-frac", "0.5", *FAST, "--out", str(tmp_path / "x")]
    assert main(refused) == 2 and "--train-frac goes with --run" in capsys.readouterr().err
    assert main(["train", "--run", str(run), "--qrels", str(qrels), "--train-frac", "1", *FAST]) == 2


def test_the_builtin_splits_are_unchanged() -> None:
    """BFCL's test queries are those of every committed result (sha256 of the test qids at split 0 and 3,
    as main made them): only a user's own data is split on sorted ids."""
    from benchmarks.conditions import build_condition

    pinned = {
        0: "aacc5810e7a8d69ed61f4c49fbe39bbd7e478c01396eedf535d1219f4ea4c1c4",
        3: "7cc406ca6a1b974e3cc94b5d4248e9d51c52aa5985880c51adaf0efc4bd5a819",
    }
    conds = {s: build_condition("bfcl", "bm25", split_seed=s) for s in pinned}  # the README's set-up fetches BFCL
    assert {s: c.meta["test_qids_sha256"] for s, c in conds.items()} == pinned


def test_a_beir_folder_is_split_on_its_query_ids(tmp_path: Path) -> None:
    """BEIR folders had the same flaw (queries in queries.jsonl order): the split no longer depends on it."""
    from benchmarks.conditions import build_condition

    docs = [{"_id": f"d{i}", "title": f"doc {i}", "text": f"topic {i % 4} words {i} more {i * 7}"} for i in range(30)]
    queries = [{"_id": f"q{i}", "text": f"topic {i % 4} words {i}"} for i in range(20)]
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(20))
    test_ids = []
    for order in (queries, queries[::-1], [queries[i] for i in np.random.default_rng(0).permutation(20)]):
        folder = tmp_path / f"beir{len(test_ids)}"
        (folder / "qrels").mkdir(parents=True)
        (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
        (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in order))
        (folder / "qrels" / "test.tsv").write_text(qrels)
        cond = build_condition("beir", "bm25", cache_dir=tmp_path / "cache", options={"beir_dir": str(folder)})
        test_ids.append([q.qid for q in cond.test])
        assert [q.qid for q in cond.queries] == sorted(q["_id"] for q in queries)
    assert test_ids[0] == test_ids[1] == test_ids[2]


def test_a_beir_folders_skipped_queries_are_named_on_the_console(tmp_path: Path) -> None:
    """A BEIR folder's skips were counted, never named: the console names the first ids, as for a TREC run."""
    from benchmarks.conditions import build_condition, data_notes

    docs = [{"_id": f"d{i}", "text": f"topic {i % 4} words {i}"} for i in range(12)]
    queries = [{"_id": f"q{i}", "text": f"topic {i % 4} words {i}"} for i in range(14)]
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(10))
    qrels += "q10\td1\t0\nghost\td2\t1\n"  # q10 judged with nothing relevant; ghost is no query
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels" / "test.tsv").write_text(qrels)
    cond = build_condition("beir", "bm25", cache_dir=tmp_path / "cache", options={"beir_dir": str(folder)})
    (note,) = [line for line in data_notes(cond.meta, len(cond.test)) if line.startswith("note: skipped")]
    assert note == (
        "note: skipped 1 qrels rows with query id not in queries.jsonl ('ghost'), 1 queries with no relevant doc "
        "in split ('q10'), 3 queries without qrels in split ('q11', 'q12', 'q13') (counted in manifest.json)"
    )


# ---------------------------------------------------------------- 3. no silent leakage in evaluate


def evaluate(run_dir: Path, out: Path, *extra: str) -> int:
    return main(["evaluate", "--run-dir", str(run_dir), *extra, "--out", str(out)])


def test_evaluate_on_the_training_data_defaults_to_its_test_queries(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run, qrels = write_run(tmp_path / "data", seed=0)
    assert train(run, qrels, tmp_path / "o") == 0
    (run_dir,) = run_dirs(tmp_path / "o")
    trained = pd.read_csv(run_dir / "per_query.csv", dtype={"qid": str})
    copies = [str(shutil.copy(f, tmp_path / f.name)) for f in (run, qrels)]  # the same bytes, elsewhere
    capsys.readouterr()

    assert evaluate(run_dir, tmp_path / "e", "--run", copies[0], "--qrels", copies[1]) == 0
    err = capsys.readouterr().err
    assert "the data this policy was trained on" in err and "used in training" not in err
    rows = pd.read_csv(tmp_path / "e" / "per_query.csv", dtype={"qid": str})
    pd.testing.assert_frame_equal(rows[trained.columns], trained)  # its test split, the numbers train wrote

    for split, n in (("all", 40), ("train", 28)):
        assert evaluate(run_dir, tmp_path / split, "--run", copies[0], "--qrels", copies[1], "--split", split) == 0
        err = capsys.readouterr().err
        assert f"warning: --split {split}: 28 of these {n} queries were used in training" in err
        assert len(pd.read_csv(tmp_path / split / "per_query.csv")) == n
    assert evaluate(run_dir, tmp_path / "all2", "--split", "all") == 0  # the run's own data, without --run
    assert "28 of these 40 queries were used in training" in capsys.readouterr().err
    frac = ["--run", copies[0], "--qrels", copies[1], "--train-frac", "0.5"]
    assert evaluate(run_dir, tmp_path / "x", *frac) == 2
    assert "would put its training queries among the test queries" in capsys.readouterr().err


def test_evaluate_on_other_data_takes_every_query_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Other queries (no query id in common with the training queries, checked): every one, said."""
    assert train(*write_run(tmp_path / "data", seed=0), tmp_path / "o") == 0
    (run_dir,) = run_dirs(tmp_path / "o")
    other, other_qrels = write_run(tmp_path / "other", seed=1, n_queries=35, prefix="o")
    capsys.readouterr()
    assert evaluate(run_dir, tmp_path / "e", "--run", str(other), "--qrels", str(other_qrels)) == 0
    err = capsys.readouterr().err
    assert "not the data this policy was trained on and share no query id with its 28 training queries" in err
    assert "every query" in err and "leakage" not in err
    assert len(pd.read_csv(tmp_path / "e" / "per_query.csv")) == 35
    record = json.loads((tmp_path / "e" / "manifest.json").read_text())["training_queries"]
    assert (record["checked"], record["n"], record["left_out"], record["qids"]) == (True, 0, False, [])


def test_other_files_holding_training_queries_leave_them_out(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The trained run less one query, or with other queries added (another sha256, so another split): the policy's
    training queries among them (by query id) are left out by default, said with their number on the console and
    recorded in the manifest (how many, their ids); ``--split all`` evaluates them with the leakage warning, and data
    of training queries alone are refused by default. Before, every query was evaluated with a note claiming no
    training query among them."""
    run, qrels = write_run(tmp_path / "data", seed=0)
    assert train(run, qrels, tmp_path / "o") == 0
    (run_dir,) = run_dirs(tmp_path / "o")
    tested = set(pd.read_csv(run_dir / "per_query.csv", dtype={"qid": str})["qid"])  # its 12 test queries
    trained = {f"q{i}" for i in range(40)} - tested
    dropped = min(tested)
    lines = run.read_text().splitlines(keepends=True)
    less = tmp_path / "less.run"
    less.write_text("".join(line for line in lines if line.split()[0] != dropped))
    extra_run, extra_qrels = write_run(tmp_path / "extra", seed=3, n_queries=10, prefix="x")
    more, more_qrels = tmp_path / "more.run", tmp_path / "more.qrels"
    more.write_text(run.read_text() + extra_run.read_text())
    more_qrels.write_text(qrels.read_text() + extra_qrels.read_text())
    extra = {f"x{i}" for i in range(10)}
    for name, files, evaluated in (
        ("less", (less, qrels), tested - {dropped}),
        ("more", (more, more_qrels), tested | extra),
    ):
        capsys.readouterr()
        assert evaluate(run_dir, tmp_path / name, "--run", str(files[0]), "--qrels", str(files[1])) == 0
        err = capsys.readouterr().err
        assert (f"hold 28 of its 28 training queries (by query id): those 28 are left out, the other {len(evaluated)} "
                "evaluated (--split all to include them)") in err, err  # fmt: skip
        assert "no training query" not in err and "leakage" not in err
        rows = pd.read_csv(tmp_path / name / "per_query.csv", dtype={"qid": str})
        assert set(rows["qid"]) == evaluated
        record = json.loads((tmp_path / name / "manifest.json").read_text())["training_queries"]
        assert (record["checked"], record["n"], record["left_out"], set(record["qids"])) == (True, 28, True, trained)

    assert evaluate(run_dir, tmp_path / "all", "--run", str(less), "--qrels", str(qrels), "--split", "all") == 0
    assert "warning: --split all: 28 of these 39 queries were used in training" in capsys.readouterr().err
    assert len(pd.read_csv(tmp_path / "all" / "per_query.csv")) == 39
    only = tmp_path / "trained.run"
    only.write_text("".join(line for line in lines if line.split()[0] in trained))
    assert evaluate(run_dir, tmp_path / "none", "--run", str(only), "--qrels", str(qrels)) == 2
    assert f"--run {only}: all 28 of its judged queries trained this policy" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()


def test_the_same_queries_in_another_file_are_the_training_data(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The trained run gzipped with its lines reordered (another sha256, the same queries): its split and test
    queries, the numbers train wrote, and the --train-frac guard; not every query, 28 of them trained on."""
    import gzip

    run, qrels = write_run(tmp_path / "data", seed=0)
    assert train(run, qrels, tmp_path / "o") == 0
    (run_dir,) = run_dirs(tmp_path / "o")
    trained = pd.read_csv(run_dir / "per_query.csv", dtype={"qid": str})
    lines = run.read_text().splitlines()
    by_query = [lines[i : i + 20] for i in range(0, len(lines), 20)][::-1]  # (grouped by query, in another order)
    moved = tmp_path / "moved.run.gz"
    moved.write_bytes(gzip.compress(("\n".join(x for q in by_query for x in q) + "\n").encode()))
    reordered = tmp_path / "moved.qrels"
    reordered.write_text("\r\n".join(qrels.read_text().splitlines()[::-1]) + "\r\n")
    capsys.readouterr()
    assert evaluate(run_dir, tmp_path / "e", "--run", str(moved), "--qrels", str(reordered)) == 0
    err = capsys.readouterr().err
    assert "hold the queries this policy was trained on" in err and "every query" not in err, err
    rows = pd.read_csv(tmp_path / "e" / "per_query.csv", dtype={"qid": str})
    same = [c for c in trained.columns if c != "condition"]  # (the condition is named after the file given)
    pd.testing.assert_frame_equal(rows[same], trained[same])
    frac = ["--run", str(moved), "--qrels", str(reordered), "--train-frac", "0.5"]
    assert evaluate(run_dir, tmp_path / "x", *frac) == 2
    assert "would put its training queries among the test queries" in capsys.readouterr().err


def test_the_n_a_policy_was_trained_with_is_kept_by_evaluate_and_predict(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run, qrels = write_run(tmp_path / "data", seed=0)
    assert train(run, qrels, tmp_path / "o", "--n-candidates", "1000") == 0
    (run_dir,) = run_dirs(tmp_path / "o")
    trained = pd.read_csv(run_dir / "per_query.csv", dtype={"qid": str})
    capsys.readouterr()
    assert evaluate(run_dir, tmp_path / "e", "--run", str(run), "--qrels", str(qrels)) == 0
    assert "N = 1000 candidates per query, as the policy was trained" in capsys.readouterr().err
    rows = pd.read_csv(tmp_path / "e" / "per_query.csv", dtype={"qid": str})
    pd.testing.assert_frame_equal(rows[trained.columns], trained)
    kept, given = tmp_path / "kept.run", tmp_path / "given.run"
    assert main(["predict", "--run-dir", str(run_dir), "--run", str(run), "--out", str(kept)]) == 0
    assert "N = 1000 candidates per query" in capsys.readouterr().err
    assert main(["predict", "--run-dir", str(run_dir), "--run", str(run), "--out", str(given),
                 "--n-candidates", "1000"]) == 0  # fmt: skip
    assert kept.read_text() == given.read_text()
    other, other_qrels = write_run(tmp_path / "other", seed=1, n_queries=35)
    capsys.readouterr()
    assert evaluate(run_dir, tmp_path / "o2", "--run", str(other), "--qrels", str(other_qrels)) == 0
    assert "trained with N = 1000 candidates per query; here N is each query's run length" in capsys.readouterr().err


def test_an_evaluation_of_other_inputs_is_never_replaced(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run, qrels = write_run(tmp_path / "data", seed=0)
    assert train(run, qrels, tmp_path / "o") == 0
    (run_dir,) = run_dirs(tmp_path / "o")
    out = tmp_path / "e"
    assert evaluate(run_dir, out, "--run", str(run), "--qrels", str(qrels)) == 0
    assert evaluate(run_dir, out, "--run", str(run), "--qrels", str(qrels)) == 0  # the same one: rewritten
    made = {f.name: f.read_bytes() for f in out.iterdir()}
    other, other_qrels = write_run(tmp_path / "other", seed=1, n_queries=35)
    capsys.readouterr()
    assert evaluate(run_dir, out, "--run", str(other), "--qrels", str(other_qrels)) == 2
    err = capsys.readouterr().err
    (said,) = [line for line in err.splitlines() if line.startswith("shortlist: error:")]
    assert f"--out {out}: holds another evaluation" in said and str(run) in said and str(qrels) in said
    assert evaluate(run_dir, out, "--run", str(run), "--qrels", str(qrels), "--split", "all") == 2
    assert {f.name: f.read_bytes() for f in out.iterdir()} == made


def test_a_policy_saved_from_python_is_evaluated_on_your_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``sd.fit(...).save(DIR)`` names no data of its own: ``evaluate --run --qrels`` evaluates it (every query,
    saying that whether its training queries are among them cannot be checked); without ``--run`` the error says
    to give one."""
    import shortlist_depth as sd

    run, qrels = write_run(tmp_path / "data", seed=0)
    queries = [sd.RankedQuery(np.sort(np.random.default_rng(i).normal(size=20))[::-1], np.array([1 + i % 3]), f"t{i}")
               for i in range(30)]  # fmt: skip
    saved = sd.fit("threshold", queries, seed=0).save(tmp_path / "py-policy")
    capsys.readouterr()
    assert evaluate(saved, tmp_path / "e", "--run", str(run), "--qrels", str(qrels)) == 0
    err = capsys.readouterr().err
    assert "whether they hold this policy's training queries cannot be checked" in err, err
    assert "names no training data (a policy saved from Python)" in err and "no training query" not in err
    assert len(pd.read_csv(tmp_path / "e" / "per_query.csv")) == 40
    assert evaluate(saved, tmp_path / "e2") == 2
    err = capsys.readouterr().err
    assert "names no data of its own: evaluate it on yours with --run RUN --qrels QRELS" in err, err


def test_predict_names_the_query_and_the_file_it_cannot_cut(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run, qrels = write_run(tmp_path / "data", seed=0)
    assert train(run, qrels, tmp_path / "o") == 0
    (run_dir,) = run_dirs(tmp_path / "o")
    capsys.readouterr()
    out = tmp_path / "short.run"
    assert main(["predict", "--run-dir", str(run_dir), "--run", str(run), "--n-candidates", "5", "--out",
                 str(out)]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert f"{run}: query 'q0':" in err and "(--n-candidates)" in err and "list-0" not in err, err
    assert not out.exists()
    assert main(["predict", "--run-dir", str(run_dir), "--run", str(tmp_path), "--out", str(out)]) == 2
    assert f"--run {tmp_path}: is a folder; give the run file" in capsys.readouterr().err
    assert train(tmp_path / "data", qrels, tmp_path / "o2") == 2
    assert f"--run {tmp_path / 'data'}: is a folder; give the file" in capsys.readouterr().err


# ---------------------------------------------------------------- 4. small and partly skipped data, on the console


def test_small_test_sets_and_skipped_queries_are_said_on_the_console(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run, qrels = write_run(tmp_path / "data", seed=0, n_queries=12)
    lines = qrels.read_text().splitlines()
    # q10, q11 lose their judgments (in the run, not in the qrels); x1 is judged but not in the run
    qrels.write_text("\n".join([*lines[:10], "x1 0 d1 1"]) + "\n")
    capsys.readouterr()
    assert train(run, qrels, tmp_path / "o") == 0
    err = capsys.readouterr().err
    said = "note: skipped 1 qrels queries not in run ('x1'), 2 run queries without qrels ('q10', 'q11')"
    assert f"{said} (counted in manifest.json)" in err  # each skip named by its first ids
    assert "warning: only 3 test queries, under 30: intervals will be wide" in err  # 10 judged queries: 7 train, 3 test
    (run_dir,) = run_dirs(tmp_path / "o")
    manifest = json.loads((run_dir / "manifest.json").read_text())["condition"]
    assert manifest["skipped_examples"] == {
        "qrels queries not in run": ["x1"],
        "run queries without qrels": ["q10", "q11"],
    }
    assert evaluate(run_dir, tmp_path / "e", "--split", "all") == 0
    err = capsys.readouterr().err
    assert said in err
    assert "warning: only 10 queries, under 30: intervals will be wide" in err


def test_a_large_clean_run_prints_no_data_note(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run, qrels = write_run(tmp_path / "data", seed=0, n_queries=100)
    capsys.readouterr()
    assert train(run, qrels, tmp_path / "o") == 0
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- 5. fully tied lists


def test_a_fully_tied_run_warns_and_never_prints_inf(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """All scores equal within each query: the order is the docids' (d_9 sorts last of d_1..d_20), the
    top 1 never holds the relevant d_9, BoR has no finite value: 'n/a' on the console, NaN in the CSVs."""
    folder = tmp_path / "data"
    folder.mkdir()
    run, qrels = folder / "tied.run", folder / "tied.qrels"
    run.write_text("".join(f"q{q} Q0 d{q}_{r} {r} 1.0 t\n" for q in range(40) for r in range(1, 21)))
    qrels.write_text("".join(f"q{q} 0 d{q}_9 1\n" for q in range(40)))
    capsys.readouterr()
    code = main(["train", "--run", str(run), "--qrels", str(qrels), "--agent", "fixed", "--k", "1", "--seeds", "1",
                 "--no-progress", "--out", str(tmp_path / "o")])  # fmt: skip
    assert code == 0
    shown = capsys.readouterr()
    assert "warning: every list is fully tied" in shown.err and "no ranking information" in shown.err
    assert "inf" not in shown.out and "n/a" in shown.out
    (run_dir,) = run_dirs(tmp_path / "o")
    for csv in [*(tmp_path / "o").glob("*.csv"), *run_dir.glob("*.csv")]:
        assert "inf" not in csv.read_text(), csv.name
    summary = pd.read_csv(tmp_path / "o" / "summary.csv")
    assert summary["found_pct"].tolist() == [0.0] and summary["bor_bits"].isna().all()
    assert evaluate(run_dir, tmp_path / "e") == 0
    shown = capsys.readouterr()
    assert "inf" not in shown.out and "every list is fully tied" in shown.err
    assert "inf" not in (tmp_path / "e" / "summary.csv").read_text()


# ---------------------------------------------------------------- 7. lists that leave no choice


def test_one_candidate_lists_count_as_chance_not_worse_than_random(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Every list holds one document; for half of the queries it is the relevant one, for the others the
    relevant document was not retrieved (R = 1 counted, N = 1 the list's length). Every depth is random:
    BoR is 0 bits (it was log2(mean found) < 0: 'worse than random'), and the console says why."""
    folder = tmp_path / "data"
    folder.mkdir()
    run, qrels = folder / "one.run", folder / "one.qrels"
    run.write_text("".join(f"q{q} Q0 d{q} 1 {q / 10} t\n" for q in range(40)))
    qrels.write_text("".join(f"q{q} 0 {f'd{q}' if q % 2 else f'unretrieved{q}'} 1\n" for q in range(40)))
    capsys.readouterr()
    code = main(["train", "--run", str(run), "--qrels", str(qrels), "--agent", "fixed", "--k", "1", "--seeds", "1",
                 "--no-progress", "--out", str(tmp_path / "o")])  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "note: 40 of 40 lists leave no choice" in err and "BoR counts them as chance (0 bits" in err
    summary = pd.read_csv(tmp_path / "o" / "summary.csv")
    assert 0 < summary.loc[0, "found_pct"] < 100 and summary.loc[0, "bor_bits"] == 0.0


def test_a_fixed_k_above_a_truncated_runs_lists_is_left_out_naming_the_condition(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Lists of 20 from a candidate set of a million (``--n-candidates``): fixed-50 would show the 20, under
    another K's name, so it is left out as on a list of 20; the console names the run's condition in full."""
    run, qrels = write_run(tmp_path, seed=3)
    args = ["train", "--run", str(run), "--qrels", str(qrels), "--n-candidates", "1000000", "--agent", "fixed"]
    assert main([*args, "--no-progress", "--out", str(tmp_path / "out")]) == 0
    said = capsys.readouterr().out
    assert re.search(r"fixed-50 on run-my-[0-9a-f]{6}-n1000000 \(lists of 20 at most\)", said), said
    assert "fixed-50" not in set(pd.read_csv(tmp_path / "out" / "summary.csv")["method"])
