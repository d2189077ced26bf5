"""Crash safety: killed runs resume to the uninterrupted result, writes are atomic, concurrent
writers do not corrupt results or caches, and caches are keyed by everything they depend on.

The SIGKILL trials run a tiny ``shortlist reproduce`` (BFCL + BM25, 1 seed, 12 cells) as a
subprocess in its own process group, kill the whole group (SIGKILL, like ``kill -9 -PGID``
or an OOM kill of the job) at seeded random points, possibly several times, then rerun it to
completion and compare every table with an uninterrupted run (conftest's ``tiny_runs["a"]``, the
reference of the determinism suite too). Cells finished before the
rerun must not be recomputed (their directories keep their inode and mtime).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TINY_REPRODUCE_CELLS, cli_env, tiny_reproduce_cmd  # noqa: E402

from benchmarks import scorers
from benchmarks.score_cache import atomic_save_npy, cached_scores
from benchmarks.scorers import BM25Scorer, EmbeddingScorer
from experiments import runner
from experiments.io import atomic_write_csv, atomic_write_text, write_tables
from experiments.runner import get_condition, run_cell

REPO = Path(__file__).resolve().parents[1]
TABLES = ("per_query.csv", "summary.csv", "buckets.csv")
DERIVED = ("aggregate.csv", "scorer_strength.csv", "figures/buckets_bfcl-bm25.csv")
RUN_FILES = ("config.json", "command.txt", "manifest.json", "per_query.csv", "summary.csv", "buckets.csv")
COMPARED_RUN_FILES = ("per_query.csv", "summary.csv", "buckets.csv", "config.json")
N_CELLS = TINY_REPRODUCE_CELLS  # the tiny sweep: 3 DQN rewards, tabular, cut-off, posterior and 6 fixed K


def reproduce_cmd(out: Path, cache: Path, workers: int = 1) -> list[str]:
    return tiny_reproduce_cmd(out, cache, "--workers", str(workers))


def finished_cells(out: Path) -> list[str]:
    runs = out / "runs"
    if not runs.is_dir():
        return []
    return sorted(
        p.name for p in runs.iterdir() if not p.name.startswith(".") and all((p / f).is_file() for f in RUN_FILES)
    )


def hidden_leftovers(out: Path) -> list[str]:
    found = [p.name for p in (out / "runs").iterdir() if p.name.startswith(".")] if (out / "runs").is_dir() else []
    found += [p.name for p in out.iterdir() if p.name.startswith(".")] if out.is_dir() else []
    return sorted(found)


def _live_members(pgid: int) -> list[int]:
    """Processes of the group that are not zombies (zombies hold no files and write nothing)."""
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            live.append(int(stat.parent.name))
    return live


def _group_gone(pgid: int, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        if Path("/proc").is_dir() and not _live_members(pgid):
            return
        time.sleep(0.02)
    raise AssertionError(f"process group {pgid} survived SIGKILL")


def run_and_kill(cmd: list[str], out: Path, after_cells: int, extra_delay: float, start_delay: float = 0.0) -> bool:
    """Start ``cmd`` in a new process group; SIGKILL the group once ``after_cells`` cells are
    finished (plus ``extra_delay`` seconds) or ``start_delay`` seconds after the start.
    Returns whether the kill interrupted a running process (False: it had already finished)."""
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    t0 = time.monotonic()
    try:
        while proc.poll() is None:
            if start_delay and time.monotonic() - t0 >= start_delay:
                break
            if not start_delay and len(finished_cells(out)) >= after_cells:
                time.sleep(extra_delay)
                break
            if time.monotonic() - t0 > 600:
                raise AssertionError("reproduce did not progress in 600 s")
            time.sleep(0.02)
        if proc.poll() is not None:
            _, err = proc.communicate()
            assert proc.returncode == 0, err.decode()[-3000:]
            return False
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        _group_gone(proc.pid)
        return proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


@pytest.fixture(scope="module")
def warm_cache(tiny_runs: dict[str, Path]) -> Path:
    """The score cache the uninterrupted runs filled."""
    return tiny_runs["cache"]


@pytest.fixture(scope="module")
def uninterrupted(tiny_runs: dict[str, Path]) -> Path:
    """The tiny reproduce run to completion without interruption (a subprocess, ``--workers 1``)."""
    out = tiny_runs["a"]
    assert len(finished_cells(out)) == N_CELLS
    return out


def assert_equal_results(ref: Path, out: Path) -> None:
    for f in (*TABLES, *DERIVED):
        assert (ref / f).read_bytes() == (out / f).read_bytes(), f
    visible = sorted(p.name for p in (out / "runs").iterdir() if not p.name.startswith("."))
    assert visible == finished_cells(ref), visible
    for run in visible:
        for f in COMPARED_RUN_FILES:
            assert (ref / "runs" / run / f).read_bytes() == (out / "runs" / run / f).read_bytes(), f"{run}/{f}"
        if (ref / "runs" / run / "agent.json").exists():
            assert (ref / "runs" / run / "agent.json").read_bytes() == (out / "runs" / run / "agent.json").read_bytes()


def _stamp(run_dir: Path) -> tuple[int, int]:
    st = (run_dir / "manifest.json").stat()
    return st.st_ino, st.st_mtime_ns


#: (workers, cold cache, kills): each kill is ("cells", (low, high) more finished cells to wait for, (low, high)
#: extra seconds) or ("start", None, (low, high) seconds after the start). Cells run DQN first, so most kills
#: land inside a DQN or tabular cell, some during the condition build, the score cache or the report.
Kill = tuple[str, tuple[int, int] | None, tuple[float, float]]
TRIALS: dict[str, tuple[int, bool, list[Kill]]] = {
    "w1-one-kill": (1, False, [("cells", (1, 4), (0.0, 0.5))]),
    "w2-two-kills": (2, False, [("cells", (0, 2), (0.0, 0.3)), ("cells", (1, 3), (0.0, 0.2))]),
    "w1-cold-cache-kill-early-then-late": (1, True, [("start", None, (0.3, 3.0)), ("cells", (1, 4), (0.0, 0.3))]),
}
KILLS_DONE: list[bool] = []


@pytest.mark.parametrize("trial", list(TRIALS), ids=list(TRIALS))
def test_sigkill_then_resume_equals_uninterrupted(
    trial: str, uninterrupted: Path, warm_cache: Path, tmp_path: Path
) -> None:
    workers, cold, kills = TRIALS[trial]
    rng = np.random.default_rng(list(TRIALS).index(trial) + 2024)
    out = tmp_path / "out"
    cache = tmp_path / "cold-cache" if cold else warm_cache
    cmd = reproduce_cmd(out, cache, workers)
    for kind, cells, delay in kills:
        d = float(rng.uniform(*delay))
        if kind == "start":
            KILLS_DONE.append(run_and_kill(cmd, out, 0, 0.0, start_delay=d))
        else:
            assert cells is not None
            target = len(finished_cells(out)) + int(rng.integers(*cells))
            KILLS_DONE.append(run_and_kill(cmd, out, min(target, N_CELLS - 1), d))
    before = {c: _stamp(out / "runs" / c) for c in finished_cells(out)}
    proc = subprocess.run(cmd, cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    # finished cells were skipped, the others computed once
    after = {c: _stamp(out / "runs" / c) for c in finished_cells(out)}
    assert len(after) == N_CELLS
    assert {c: after[c] for c in before} == before, "a finished cell was recomputed"
    assert_equal_results(uninterrupted, out)
    leftovers = hidden_leftovers(out)
    print(
        f"[{trial}] kills interrupted a run: {KILLS_DONE[-len(kills) :]}; finished before resume: {len(before)}; "
        f"hidden temp leftovers after resume: {leftovers}"
    )


def test_some_kills_really_interrupted_a_run() -> None:
    """Guard against trials that only ever killed finished processes (vacuous when run alone)."""
    assert not KILLS_DONE or sum(KILLS_DONE) >= 2, KILLS_DONE


def _copy_runs(src: Path, dst: Path, skip: str) -> None:
    (dst / "runs").mkdir(parents=True)
    for p in (src / "runs").iterdir():
        if p.name != skip and not p.name.startswith("."):
            shutil.copytree(p, dst / "runs" / p.name)


def test_resume_removes_stale_temporary_files(uninterrupted: Path, warm_cache: Path, tmp_path: Path) -> None:
    """What a SIGKILL leaves behind (a half-written ``runs/.<run_id>.*`` folder, ``.<table>.*`` temp
    files next to the tables) is removed when the run is resumed; today it stays forever."""
    out = tmp_path / "out"
    victim = "bfcl-bm25__fixed-5__s1"
    _copy_runs(uninterrupted, out, victim)
    half = out / "runs" / f".{victim}.k1ll3d"
    half.mkdir()
    (half / "config.json").write_text("{}")
    (half / "per_query.csv").write_text("qid,gold_rank\nq1,")
    (out / ".per_query.csv.x7y8z9").write_text("condition,method\nbfcl")
    proc = subprocess.run(
        reproduce_cmd(out, warm_cache), cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_equal_results(uninterrupted, out)
    assert hidden_leftovers(out) == [], "stale temporary files survive a resumed run"


# ---------------------------------------------------------------- concurrent writers


def test_cell_finished_concurrently_by_another_process(
    tmp_path: Path, warm_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes computing the same cell (two ``reproduce`` on one --out): the other one renames
    its finished run directory into place just before we do. We must not crash (today: OSError
    'Directory not empty' from os.replace) and the result must be complete and correct."""
    from agents.method import MethodSpec
    from experiments.plan import PLANS, cells_for

    (cell,) = cells_for([PLANS["bfcl-bm25"]], [1], {"bfcl-bm25": [MethodSpec("fixed", "bor", 3)]})
    get_condition.cache_clear()
    first = run_cell(cell, tmp_path / "other", None, str(warm_cache), "other")
    real_replace = os.replace
    calls: list[str] = []

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(src).is_dir() and Path(dst).name == cell.run_id and not calls:
            calls.append(str(dst))
            shutil.copytree(first, dst)  # the other process's rename lands first
        real_replace(src, dst)

    monkeypatch.setattr(runner.os, "replace", replace)
    final = run_cell(cell, tmp_path / "out", None, str(warm_cache), "mine")
    assert calls, "the race was not exercised"
    for f in COMPARED_RUN_FILES:
        assert (final / f).read_bytes() == (first / f).read_bytes(), f
    assert hidden_leftovers(tmp_path / "out") == []


def test_two_processes_fill_the_same_score_cache(tmp_path: Path) -> None:
    """Two ``shortlist train`` processes started together on a cold score cache: both succeed,
    give identical results, and leave exactly one valid cache entry (no temp files).
    (Unit-level race with a barrier inside the scorer:
    test_benchmarks_scorers.py::test_two_processes_fill_the_same_entry.)"""
    cache = tmp_path / "cache"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "experiments.cli",
                "train",
                "--agent",
                "fixed",
                "--k",
                "1",
                "5",
                "--seeds",
                "1",
                "--out",
                str(tmp_path / name),
                "--cache-dir",
                str(cache),
                "--no-progress",
            ],
            cwd=REPO,
            env=cli_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for name in ("a", "b")
    ]
    errs = [p.communicate(timeout=600)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    for t in TABLES:
        assert (tmp_path / "a" / t).read_bytes() == (tmp_path / "b" / t).read_bytes()
    entries = sorted((cache / "scores").iterdir())
    assert [e.suffix for e in entries] == [".npy"], entries
    m = np.load(entries[0], allow_pickle=False)
    assert m.shape == (400, 370) and np.all(np.isfinite(m))


# ---------------------------------------------------------------- atomic writes


def _boom(*_a: object, **_k: object) -> None:
    raise OSError("disk full (injected)")


def test_tables_are_replaced_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure while writing the tables leaves the previous complete files and no temp file."""
    df = pd.DataFrame({"a": [1, 2], "b": [0.5, 0.25]})
    write_tables(tmp_path, dict.fromkeys(TABLES, df))
    before = {t: (tmp_path / t).read_bytes() for t in TABLES}
    real = pd.DataFrame.to_csv

    def half_then_fail(self: pd.DataFrame, path: object, *a: object, **k: object) -> None:
        Path(str(path)).write_text("a,b\n1,")
        raise OSError("disk full (injected)")

    monkeypatch.setattr(pd.DataFrame, "to_csv", half_then_fail)
    with pytest.raises(OSError, match="injected"):
        write_tables(tmp_path, {TABLES[0]: df.assign(a=[3, 4]), TABLES[1]: df, TABLES[2]: df})
    monkeypatch.setattr(pd.DataFrame, "to_csv", real)
    assert {t: (tmp_path / t).read_bytes() for t in TABLES} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(TABLES)


def test_atomic_write_text_leaves_no_temp_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "README.md"
    atomic_write_text(target, "good\n")
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(target, "bad \ud800\n")  # a lone surrogate cannot be encoded
    assert target.read_text() == "good\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"], "a temporary file was left behind"


def test_figures_are_replaced_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash while saving a figure must not leave a truncated PNG under the final name
    (experiments.figures.bucket_figure writes through experiments.io.save_png)."""
    import matplotlib.figure

    from experiments.figures import bucket_figure

    buckets = pd.DataFrame(
        {
            "condition": "c",
            "method": ["fixed-1", "fixed-1"],
            "seed": 1,
            "bucket": ["easy", "hard"],
            "n": [3, 2],
            "found_pct": [100.0, 0.0],
            "mean_k": [1.0, 1.0],
            "std_k": [0.0, 0.0],
        }
    )
    png = tmp_path / "figures" / "buckets_c.png"
    bucket_figure(buckets, "c", ["fixed-1"], png)
    good = png.read_bytes()
    assert good.startswith(b"\x89PNG")

    def partial_save(self: object, fname: object, *a: object, **k: object) -> None:
        if isinstance(fname, str | os.PathLike):
            Path(fname).write_bytes(good[:100])
        else:
            getattr(fname, "write")(good[:100])  # noqa: B009 - a file object
        raise OSError("killed while saving (injected)")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", partial_save)
    with pytest.raises(OSError, match="injected"):
        bucket_figure(buckets, "c", ["fixed-1"], png)
    assert png.read_bytes() == good, "a truncated PNG replaced the previous figure"


def test_atomic_files_keep_the_umask_permissions(tmp_path: Path) -> None:
    """Atomically written results and cache entries get the permissions a plain open() gives
    (0666 & ~umask); mkstemp/mkdtemp make them owner-only (0600 / 0700) today, so a shared
    results folder or score cache is unreadable by the rest of the group."""
    old = os.umask(0o022)
    try:
        atomic_write_csv(pd.DataFrame({"a": [1]}), tmp_path / "summary.csv")
        atomic_write_text(tmp_path / "README.md", "x\n")
        atomic_save_npy(tmp_path / "entry.npy", np.zeros(2))
        modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    finally:
        os.umask(old)
    assert modes == {"summary.csv": 0o644, "README.md": 0o644, "entry.npy": 0o644}, {
        k: oct(v) for k, v in modes.items()
    }


def test_run_directories_keep_the_umask_permissions(uninterrupted: Path) -> None:
    modes = {p.name: p.stat().st_mode & 0o777 for p in (uninterrupted / "runs").iterdir()}
    assert set(modes.values()) <= {0o755, 0o775}, {k: oct(v) for k, v in modes.items()}


# ---------------------------------------------------------------- cache keys


Q = ["find the area of a circle", "convert celsius"]
T = ["calc_area: area of shapes", "temperature converter celsius fahrenheit", "send an email"]


@pytest.mark.parametrize(
    "change",
    ["stopwords", "tokenise"],
)
def test_bm25_cache_misses_when_tokenisation_changes(
    change: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tokenisation changed without anyone bumping TOKENISER_VERSION: the scores change, so the
    cache must not serve the old matrix. (A version bump alone: test_benchmarks_scorers.py::
    test_cache_misses_when_tokeniser_version_changes.)"""
    old, hit = cached_scores(BM25Scorer(), Q, T, tmp_path)
    assert hit is False
    if change == "stopwords":
        monkeypatch.setattr(scorers, "STOPWORDS", scorers.STOPWORDS | {"area", "celsius"})
    else:
        real = scorers.tokenise
        monkeypatch.setattr(scorers, "tokenise", lambda text: [t[:3] for t in real(text)])
    fresh = BM25Scorer().score(Q, T)
    assert not np.array_equal(fresh, old), "the change does not change the scores (test setup)"
    served, hit = cached_scores(BM25Scorer(), Q, T, tmp_path)
    np.testing.assert_array_equal(served, fresh, err_msg=f"stale score matrix served from the cache (hit={hit})")


def _fake_model(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 4}')
    (folder / "tokenizer.json").write_text('{"vocab": ["a", "b"]}')
    (folder / "model.safetensors").write_bytes(b"\x00" * 64)
    (folder / "modules.json").write_text("[]")
    return folder


@pytest.mark.parametrize("edit", ["tokenizer.json", "model.safetensors", "new 1_Pooling/config.json"])
def test_embedding_identity_follows_model_files_edited_in_place(edit: str, tmp_path: Path) -> None:
    """A model folder updated in place (same path: re-downloaded weights, a fixed tokenizer) gets
    a new identity, hence a new cache key, within the same process (today the digest is memoised
    by path alone, so the stale embeddings are served)."""
    model = _fake_model(tmp_path / "model")
    before = EmbeddingScorer(str(model)).identity()
    time.sleep(0.01)
    if edit == "tokenizer.json":
        (model / "tokenizer.json").write_text('{"vocab": ["a", "cd"]}')
    elif edit == "model.safetensors":
        (model / "model.safetensors").write_bytes(b"\x01" * 65)
    else:
        (model / "1_Pooling").mkdir()
        (model / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": false}')
    assert EmbeddingScorer(str(model)).identity() != before


def test_embedding_identity_differs_between_model_folders(tmp_path: Path) -> None:
    a = _fake_model(tmp_path / "a")
    b = _fake_model(tmp_path / "b")
    (b / "model.safetensors").write_bytes(b"\x02" * 64)
    ia, ib = EmbeddingScorer(str(a)).identity(), EmbeddingScorer(str(b)).identity()
    assert ia["model_digest"] != ib["model_digest"]
    c = tmp_path / "c"
    shutil.copytree(a, c)
    assert EmbeddingScorer(str(c)).identity()["model_digest"] == ia["model_digest"]  # content, not path


def _bfcl_folder(folder: Path, suffix: str) -> Path:
    names = ["alpha", "beta", "gamma"]
    q = folder / "BFCL_v4_simple_python.json"
    a = folder / "possible_answer" / "BFCL_v4_simple_python.json"
    a.parent.mkdir(parents=True)
    fn = lambda n: {"name": n, "description": f"Does {n}.", "parameters": {"properties": {"x": {}}}}  # noqa: E731
    q.write_text(
        "\n".join(
            json.dumps(
                {
                    "id": f"q{i}",
                    "question": [[{"role": "user", "content": f"{names[i % 3]} {suffix}"}]],
                    "function": [fn(names[i % 3])],
                }
            )
            for i in range(6)
        )
        + "\n"
    )
    a.write_text("\n".join(json.dumps({"id": f"q{i}", "ground_truth": [{names[i % 3]: {}}]}) for i in range(6)) + "\n")
    return folder


def test_condition_memo_is_keyed_by_its_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``get_condition`` memoises conditions per process; pointing the process at other data
    (``SHORTLIST_BFCL_DIR`` / ``SHORTLIST_DATA_DIR``) must not return the condition of the old data."""
    get_condition.cache_clear()
    try:
        monkeypatch.setenv("SHORTLIST_BFCL_DIR", str(_bfcl_folder(tmp_path / "a", "first version")))
        first = get_condition("bfcl", "bm25", "", 0, None, str(tmp_path / "cache"), ())
        monkeypatch.setenv("SHORTLIST_BFCL_DIR", str(_bfcl_folder(tmp_path / "b", "edited texts, more words")))
        second = get_condition("bfcl", "bm25", "", 0, None, str(tmp_path / "cache"), ())
        assert second.meta["inputs_sha256"] != first.meta["inputs_sha256"], "stale condition served from memory"
    finally:
        get_condition.cache_clear()


def test_stale_temporary_cleanup_never_touches_the_users_hidden_files(tmp_path: Path) -> None:
    """``--out .`` from a checkout: the resume cleanup removes only this package's temporaries
    (``.<run id>.<pid>.*``, ``.<table>.<pid>.*``), never ``.git``, ``.venv`` or ``.env`` files."""
    from experiments.io import remove_stale_temporaries

    dead = 2**22 + 12345  # above the default pid_max of 4194304: no live process has it
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / ".venv").mkdir()
    for name in (".env", ".env.local", ".gitignore"):
        (tmp_path / name).write_text("keep\n")
    stale = [f".bfcl-bm25__fixed-5__s1.{dead}.abc", f".per_query.csv.{dead}.x1.tmp", ".summary.csv.k1ll3d"]
    for name in stale:
        (tmp_path / name).write_text("half\n")
    (tmp_path / f".synthetic-gen-n100-sep2.0-normal__bor-dqn__s42__split3.{dead}.q").mkdir()
    remove_stale_temporaries(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".env", ".env.local", ".git", ".gitignore", ".venv"]
    assert (tmp_path / ".git" / "HEAD").is_file()
