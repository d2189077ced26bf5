"""Bad input, systematically: every user-facing input with its malformed variants.

One table (:data:`CLI_CASES`) drives the ``shortlist`` CLI end to end with each malformed
input and checks the user-error contract of the README: exit status 2, exactly one stderr
line ``shortlist: error: ...`` naming the input (and the position, ``file:line``, where the
input is a file), no traceback (an exception escaping :func:`experiments.cli.main` is what
the console script would print as a traceback) and no output folder left behind.
Errors that argparse itself raises (a value of the wrong type for a flag) keep argparse's
format (usage, then ``shortlist <command>: error: argument --flag: ...``) and status 2.

Inputs the CLI cannot reach with arbitrary files (MetaTool / ToolBench files are pinned by
sha256, so a malformed copy is refused before it is parsed) are checked at the loader in
:data:`LOADER_CASES`: the loader must raise :class:`~benchmarks.corpus.DataError` (which the
CLI turns into exit 2) naming the file and position, never another exception type.

Variants already tested elsewhere are referenced in :data:`COVERED_ELSEWHERE` (and a test
checks the referenced tests still exist) instead of being repeated here.

Safe data handling (archives, pickles, pinned downloads) is at the end of this module.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import lzma
import os
import pickle
import re
import shutil
import tarfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import pytest

from benchmarks import data
from benchmarks.corpus import DataError
from experiments.cli import main
from experiments.runner import get_condition

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
PACKAGES = ("rewards", "benchmarks", "envs", "agents", "experiments")

# ============================================================================ helpers


@dataclasses.dataclass
class CliResult:
    code: int | None
    err: str
    out: str
    uncaught: BaseException | None

    @property
    def err_lines(self) -> list[str]:
        return [ln for ln in self.err.splitlines() if ln.strip()]


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> CliResult:
    """Run ``main(argv)`` in-process; an exception escaping main is a traceback for the user."""
    capsys.readouterr()
    code: int | None
    uncaught: BaseException | None = None
    try:
        code = main(argv)
    except SystemExit as e:  # argparse
        code = e.code if isinstance(e.code, int) else 2
    except Exception as e:  # noqa: BLE001 - this is exactly what the test looks for
        code, uncaught = None, e
    cap = capsys.readouterr()
    return CliResult(code, cap.err, cap.out, uncaught)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A module-wide warm score cache."""
    return str(tmp_path_factory.mktemp("scores"))


@pytest.fixture(autouse=True)
def _fresh_conditions() -> Iterator[None]:
    """Conditions are memoised per process; some cases swap the BFCL files via the environment."""
    get_condition.cache_clear()
    yield
    get_condition.cache_clear()


# ---------------------------------------------------------------- good fixture files


def write_run(path: Path, lines: list[str] | None = None) -> Path:
    """A TREC run: 4 queries x 5 documents."""
    if lines is None:
        lines = [f"q{q} Q0 d{q}{d} {d} {10 - d}.5 tag" for q in range(1, 5) for d in range(1, 6)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_qrels(path: Path, lines: list[str] | None = None) -> Path:
    """TREC qrels: one relevant document per query (ranks 1, 2, 3, 5)."""
    if lines is None:
        lines = ["q1 0 d11 1", "q2 0 d22 1", "q3 0 d33 1", "q4 0 d45 1", "q4 0 d41 0"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


BEIR_DOCS = [
    {"_id": f"d{i}", "title": f"Title {i}", "text": f"document number {i} about topic {i % 3}"} for i in range(1, 9)
]
BEIR_QUERIES = [{"_id": f"q{i}", "text": f"topic {i % 3} number {i}"} for i in range(1, 6)]
BEIR_QRELS = [f"q{i}\td{i}\t1" for i in range(1, 6)]


def write_beir(
    folder: Path,
    docs: list[str] | None = None,
    queries: list[str] | None = None,
    qrels: list[str] | None = None,
    split: str = "test",
) -> Path:
    """A BEIR folder; each list holds raw lines (defaults: the good fixture)."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    docs = [json.dumps(d) for d in BEIR_DOCS] if docs is None else docs
    queries = [json.dumps(q) for q in BEIR_QUERIES] if queries is None else queries
    qrels = ["query-id\tcorpus-id\tscore", *BEIR_QRELS] if qrels is None else qrels
    (folder / "corpus.jsonl").write_text("\n".join(docs) + "\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (folder / "qrels" / f"{split}.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    return folder


def _bfcl_fn(name: str) -> dict:
    return {
        "name": name,
        "description": f"Does {name}.",
        "parameters": {"type": "dict", "properties": {"x": {"type": "string"}}},
    }


def bfcl_rows(n: int = 6) -> tuple[list[str], list[str]]:
    names = ["alpha", "beta", "gamma"]
    qs = [
        json.dumps(
            {
                "id": f"q{i}",
                "question": [[{"role": "user", "content": f"please {names[i % 3]} it {i}"}]],
                "function": [_bfcl_fn(names[i % 3])],
            }
        )
        for i in range(n)
    ]
    ans = [json.dumps({"id": f"q{i}", "ground_truth": [{names[i % 3]: {"x": ["1"]}}]}) for i in range(n)]
    return qs, ans


def write_bfcl(
    folder: Path, questions: list[str] | bytes | None = None, answers: list[str] | bytes | None = None
) -> Path:
    """A folder for ``SHORTLIST_BFCL_DIR`` (raw lines or raw bytes per file)."""
    gq, ga = bfcl_rows()
    q = folder / "BFCL_v4_simple_python.json"
    a = folder / "possible_answer" / "BFCL_v4_simple_python.json"
    a.parent.mkdir(parents=True, exist_ok=True)
    for path, rows, good in ((q, questions, gq), (a, answers, ga)):
        rows = good if rows is None else rows
        path.write_bytes(rows if isinstance(rows, bytes) else ("\n".join(rows) + "\n").encode())
    return folder


# ============================================================================ the table


@dataclasses.dataclass(frozen=True)
class Bad:
    """One malformed input and what the error must name.

    Attributes:
        id: ``<input>:<variant>``.
        build: writes whatever files the case needs under the given folder and returns the
            argv (``--out``, ``--cache-dir`` and ``--no-progress`` are appended).
        needles: substrings the error line must contain (the input, and its position).
        argparse: the error comes from argparse (usage + ``error: argument --flag``).
        env: environment variables for the case (``SHORTLIST_BFCL_DIR``).
    """

    id: str
    build: Callable[[Path], list[str]]
    needles: tuple[str, ...]
    argparse: bool = False
    env: Callable[[Path], dict[str, str]] | None = None


FIXED = ["--agent", "fixed", "--k", "1", "--seeds", "1"]
TRAIN_FIXED = ["train", *FIXED]
TINY_DQN = ["--set", "dqn.total_timesteps=200", "dqn.learning_starts=50"]


def args(*a: str) -> Callable[[Path], list[str]]:
    return lambda _tmp: list(a)


def with_run(
    run_lines: list[str] | None = None,
    qrels_lines: list[str] | None = None,
    run_bytes: bytes | None = None,
    qrels_bytes: bytes | None = None,
    extra: tuple[str, ...] = (),
) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        run = write_run(tmp / "run.txt", run_lines)
        qrels = write_qrels(tmp / "qrels.txt", qrels_lines)
        if run_bytes is not None:
            run.write_bytes(run_bytes)
        if qrels_bytes is not None:
            qrels.write_bytes(qrels_bytes)
        return ["train", "--run", str(run), "--qrels", str(qrels), *FIXED, *extra]

    return build


def with_beir(
    mutate: Callable[[Path], object] = lambda f: None,
    split: str = "test",
    docs: list[str] | None = None,
    queries: list[str] | None = None,
    qrels: list[str] | None = None,
) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        folder = write_beir(tmp / "beir", docs=docs, queries=queries, qrels=qrels)
        mutate(folder)
        return [
            "train",
            "--benchmark",
            "beir",
            "--beir-dir",
            str(folder),
            "--beir-split",
            split,
            "--scorer",
            "bm25",
            *FIXED,
        ]

    return build


def with_bfcl(
    questions: list[str] | bytes | None = None,
    answers: list[str] | bytes | None = None,
    mutate: Callable[[Path], None] = lambda f: None,
) -> tuple[Callable[[Path], list[str]], Callable[[Path], dict[str, str]]]:
    def build(tmp: Path) -> list[str]:
        mutate(write_bfcl(tmp / "bfcl", questions, answers))
        return ["train", "--benchmark", "bfcl", "--scorer", "bm25", *FIXED]

    return build, lambda tmp: {"SHORTLIST_BFCL_DIR": str(tmp / "bfcl")}


def with_data_dir(
    dataset: str, relpath: str, content: bytes | None, extra: tuple[str, ...] = ()
) -> Callable[[Path], list[str]]:
    """A data folder holding one file (``None``: a directory where the file should be)."""

    def build(tmp: Path) -> list[str]:
        target = tmp / "data" / relpath
        if content is None:
            target.mkdir(parents=True)
        else:
            target.parent.mkdir(parents=True)
            target.write_bytes(content)
        return ["train", "--benchmark", dataset, "--scorer", "bm25", *FIXED, "--data-dir", str(tmp / "data"), *extra]

    return build


def _file(folder: Path, name: str) -> Path:
    (folder / name).write_text("x")
    return folder / name


_Q = [f"q{q} Q0 d{q}{d} {d} {10 - d}.5 tag" for q in range(1, 5) for d in range(1, 6)]


def _replace(lines: list[str], i: int, new: str) -> list[str]:
    out = list(lines)
    out[i] = new
    return out


def _bfcl_case(id_: str, needles: tuple[str, ...], **kw) -> Bad:  # noqa: ANN003
    build, env = with_bfcl(**kw)
    return Bad(id_, build, needles, env=env)


_GQ, _GA = bfcl_rows()

CLI_CASES: list[Bad] = [
    # ---------------------------------------------------------------- CLI arguments (argparse types)
    Bad("cli-arg:--seeds=x", args(*TRAIN_FIXED[:-1], "x"), ("argument --seeds",), argparse=True),
    Bad(
        "cli-arg:--seeds-empty",
        args("reproduce", "--only", "bfcl-bm25", "--seeds"),
        ("argument --seeds",),
        argparse=True,
    ),
    Bad("cli-arg:--k=1.5", args("train", "--agent", "fixed", "--k", "1.5"), ("argument --k",), argparse=True),
    Bad("cli-arg:--workers=two", args(*TRAIN_FIXED, "--workers", "two"), ("argument --workers",), argparse=True),
    Bad("cli-arg:--gamma=abc", args(*TRAIN_FIXED, "--gamma", "abc"), ("argument --gamma",), argparse=True),
    Bad(
        "cli-arg:--set=int-as-float",
        args("train", "--agent", "dqn", "--seeds", "1", "--set", "total_timesteps=1e3"),
        ("--set", "'dqn'", "'total_timesteps'", "1e3"),
    ),
    Bad("cli-arg:unknown-flag", args(*TRAIN_FIXED, "--frobnicate"), ("--frobnicate",), argparse=True),
    Bad("cli-arg:unknown-command", args("bake"), ("bake",), argparse=True),
    # ---------------------------------------------------------------- CLI arguments (values)
    Bad("cli-value:--k=0", args("train", "--agent", "fixed", "--k", "0", "--seeds", "1"), ("--k must be >= 1",)),
    Bad("cli-value:--k=-3", args("train", "--agent", "fixed", "--k", "-3", "--seeds", "1"), ("--k must be >= 1",)),
    Bad("cli-value:--workers=0", args(*TRAIN_FIXED, "--workers", "0"), ("workers",)),
    Bad("cli-value:--workers=-2", args(*TRAIN_FIXED, "--workers", "-2"), ("workers",)),
    Bad("cli-value:--gamma=nan", args(*TRAIN_FIXED, "--gamma", "nan"), ("gamma",)),
    Bad("cli-value:--gamma=0", args(*TRAIN_FIXED, "--gamma", "0"), ("gamma",)),
    Bad("cli-value:--step-cost=inf", args(*TRAIN_FIXED, "--step-cost", "inf"), ("step_cost",)),
    Bad("cli-value:--step-cost=-1", args(*TRAIN_FIXED, "--step-cost", "-1"), ("step_cost",)),
    Bad("cli-value:--max-depth=-4", args(*TRAIN_FIXED, "--max-depth", "-4"), ("max_depth",)),
    Bad("cli-value:--variant=top7", args(*TRAIN_FIXED, "--variant", "top7"), ("top7",)),
    Bad("cli-value:--variant=sub0", args(*TRAIN_FIXED, "--variant", "sub0"), ("sub0",)),
    Bad("cli-value:--variant=sub99999", args(*TRAIN_FIXED, "--variant", "sub99999"), ("N=99999",)),
    Bad("cli-value:--buckets=wide", args(*TRAIN_FIXED, "--buckets", "wide"), ("wide",)),
    Bad("cli-value:--split-seeds=-1", args(*TRAIN_FIXED, "--split-seeds", "-1"), ("--split-seeds",)),
    Bad("cli-value:--split-seeds=dup", args(*TRAIN_FIXED, "--split-seeds", "2", "2"), ("--split-seeds", "duplicates")),
    Bad(
        "cli-value:--seeds=-1(tabular)",
        args("train", "--agent", "tabular", "--set", "tabular.episodes=10", "--seeds", "-1"),
        ("seed",),
    ),
    Bad("cli-value:--seeds=-1(dqn)", args("train", "--agent", "dqn", *TINY_DQN, "--seeds", "-1"), ("seed",)),
    Bad("cli-value:--seeds=2**70", args("train", "--agent", "fixed", "--k", "1", "--seeds", str(2**70)), ("seed",)),
    Bad(
        "cli-value:--set-tabular.episodes=-2",
        args("train", "--agent", "tabular", "--seeds", "1", "--set", "tabular.episodes=-2"),
        ("tabular", "episodes"),
    ),
    Bad(
        "cli-value:--set-episodes=0",
        args("train", "--agent", "tabular", "--seeds", "1", "--set", "episodes=0"),
        ("tabular", "episodes"),
    ),
    Bad(
        "cli-value:--set-dqn.total_timesteps=0",
        args("train", "--agent", "dqn", "--seeds", "1", "--set", "dqn.total_timesteps=0"),
        ("timesteps",),
    ),
    Bad(
        "cli-value:--set-dqn.total_timesteps=-5",
        args("train", "--agent", "dqn", "--seeds", "1", "--set", "dqn.total_timesteps=-5"),
        ("timesteps",),
    ),
    Bad(
        "cli-value:--set-timesteps<learning-starts",
        args("train", "--agent", "dqn", "--seeds", "1", "--set", "dqn.total_timesteps=300", "dqn.learning_starts=1000"),
        ("learning",),
    ),
    Bad(
        "cli-value:--set-dqn.exploration_fraction=nan",
        args("train", "--agent", "dqn", "--seeds", "1", *TINY_DQN, "--set", "dqn.exploration_fraction=nan"),
        ("exploration",),
    ),
    Bad(
        "cli-value:--set-dqn.exploration_fraction=2",
        args("train", "--agent", "dqn", "--seeds", "1", *TINY_DQN, "--set", "dqn.exploration_fraction=2"),
        ("exploration",),
    ),
    Bad(
        "cli-value:--set-dqn.learning_starts=-1",
        args("train", "--agent", "dqn", "--seeds", "1", "--set", "dqn.total_timesteps=200", "dqn.learning_starts=-1"),
        ("learning",),
    ),
    Bad(
        "cli-value:--set-dqn.train_freq=0",
        args("train", "--agent", "dqn", "--seeds", "1", *TINY_DQN, "--set", "dqn.train_freq=0"),
        ("train_freq",),
    ),
    Bad(
        "cli-value:--set-dqn.target_update_interval=0",
        args("train", "--agent", "dqn", "--seeds", "1", *TINY_DQN, "--set", "dqn.target_update_interval=0"),
        ("target",),
    ),
    Bad(
        "cli-value:--set-unknown-key",
        args("train", "--agent", "dqn", "--seeds", "1", "--set", "dqn.frobnicate=3"),
        ("'dqn'", "'frobnicate'"),
    ),
    Bad(
        "cli-value:--set-unknown-kind",
        args("train", "--agent", "dqn", "--seeds", "1", "--set", "nosuch.episodes=3"),
        ("'nosuch'",),
    ),
    Bad(
        "cli-value:--set-no-equals",
        args("train", "--agent", "dqn", "--seeds", "1", "--set", "dqn.total_timesteps"),
        ("key=value",),
    ),
    Bad(
        "cli-value:--set-unqualified-in-reproduce",
        args("reproduce", "--only", "bfcl-bm25", "--set", "episodes=3", "--dry-run"),
        ("--set", "name the policy kind"),
    ),
    Bad("cli-value:--n-candidates=0", with_run(extra=("--n-candidates", "0")), ("candidates",)),
    Bad("cli-value:--n-candidates=-3", with_run(extra=("--n-candidates", "-3")), ("candidates",)),
    Bad("cli-value:--n-candidates<list", with_run(extra=("--n-candidates", "4")), ("n_candidates=4", "q1")),
    Bad("cli-value:--n-candidates>2**53", with_run(extra=("--n-candidates", str(10**17))), ("candidates",)),
    Bad(
        "cli-value:--run-without-qrels",
        lambda t: ["train", "--run", str(write_run(t / "run.txt")), *FIXED],
        ("--qrels",),
    ),
    Bad(
        "cli-value:--run-missing",
        lambda t: ["train", "--run", str(t / "nope.txt"), "--qrels", str(write_qrels(t / "qrels.txt")), *FIXED],
        ("nope.txt",),
    ),
    Bad(
        "cli-value:--qrels-missing",
        lambda t: ["train", "--run", str(write_run(t / "run.txt")), "--qrels", str(t / "nope.qrels"), *FIXED],
        ("nope.qrels",),
    ),
    Bad(
        "cli-value:--beir-dir-missing",
        lambda t: ["train", "--benchmark", "beir", "--beir-dir", str(t / "nope"), *FIXED],
        ("nope",),
    ),
    Bad("cli-value:--beir-split-missing", with_beir(split="dev"), ("dev.tsv",)),
    Bad(
        "cli-value:--cache-dir-is-a-file",
        lambda t: [*TRAIN_FIXED, "--cache-dir", str(_file(t, "not-a-folder"))],
        ("not-a-folder",),
    ),
    Bad(
        "cli-value:--out-is-a-file", lambda t: [*TRAIN_FIXED, "--out", str(_file(t, "not-a-folder"))], ("not-a-folder",)
    ),
    Bad(
        "cli-value:--data-dir-is-a-file",
        lambda t: [
            "train",
            "--benchmark",
            "metatool",
            "--scorer",
            "bm25",
            *FIXED,
            "--data-dir",
            str(_file(t, "not-a-folder")),
        ],
        ("not-a-folder",),
    ),
    Bad(
        "cli-value:evaluate--split=dev",
        lambda t: ["evaluate", "--run-dir", "RUN:tabular", "--split", "dev"],
        ("--split",),
    ),
    Bad("cli-arg:evaluate-without--run-dir", args("evaluate"), ("--run-dir",), argparse=True),
    # ---------------------------------------------------------------- TREC run files
    Bad("trec-run:empty", with_run(run_lines=[]), ("run.txt", "empty")),
    Bad("trec-run:blank-lines-only", with_run(run_lines=["", "   ", ""]), ("run.txt", "empty")),
    Bad("trec-run:5-columns", with_run(run_lines=_replace(_Q, 2, "q1 Q0 d13 3 7.5")), ("run.txt:3", "6 columns")),
    Bad("trec-run:truncated-last-line", with_run(run_lines=[*_Q, "q4 Q0 d4"]), ("run.txt:21",)),
    Bad("trec-run:nan-score", with_run(run_lines=_replace(_Q, 4, "q1 Q0 d15 5 nan tag")), ("run.txt:5", "NaN")),
    Bad("trec-run:inf-score", with_run(run_lines=_replace(_Q, 4, "q1 Q0 d15 5 inf tag")), ("run.txt:5",)),
    Bad("trec-run:-inf-score", with_run(run_lines=_replace(_Q, 4, "q1 Q0 d15 5 -Infinity tag")), ("run.txt:5",)),
    Bad("trec-run:text-score", with_run(run_lines=_replace(_Q, 1, "q1 Q0 d12 2 high tag")), ("run.txt:2", "score")),
    Bad(
        "trec-run:fractional-rank", with_run(run_lines=_replace(_Q, 1, "q1 Q0 d12 2.5 8.5 tag")), ("run.txt:2", "rank")
    ),
    Bad("trec-run:duplicate-doc", with_run(run_lines=[*_Q, "q2 Q0 d21 9 0.1 tag"]), ("run.txt:21", "d21")),
    Bad(
        "trec-run:non-utf8",
        with_run(run_bytes=("\n".join(_Q[:3]) + "\nq1 Q0 d\xe9 4 1 tag\n").encode("latin-1")),
        ("run.txt:4", "UTF-8"),
    ),
    Bad("trec-run:binary-garbage", with_run(run_bytes=bytes(range(256)) * 4), ("run.txt",)),
    Bad("trec-run:one-judged-query", with_run(qrels_lines=["q1 0 d11 1"]), ("run.txt", "2 judged")),
    Bad("trec-run:unknown-qids-only", with_run(qrels_lines=["x1 0 d11 1", "x2 0 d22 1"]), ("run.txt", "2 judged")),
    Bad(
        "trec-run:R>N-without-n-candidates",
        with_run(qrels_lines=["q1 0 d11 1", *[f"q1 0 z{i} 1" for i in range(6)], "q2 0 d22 1", "q3 0 d33 1"]),
        ("q1", "n_candidates"),
    ),
    # ---------------------------------------------------------------- qrels files
    Bad("qrels:empty", with_run(qrels_lines=[]), ("qrels.txt", "empty")),
    Bad("qrels:3-columns-no-header", with_run(qrels_lines=["q1 d11 1"]), ("qrels.txt:1", "BEIR header")),
    Bad("qrels:5-columns", with_run(qrels_lines=["q1 0 d11 1", "q2 0 d22 1 x"]), ("qrels.txt:2",)),
    Bad("qrels:fractional-rel", with_run(qrels_lines=["q1 0 d11 1", "q2 0 d22 0.5"]), ("qrels.txt:2", "relevance")),
    Bad("qrels:nan-rel", with_run(qrels_lines=["q1 0 d11 nan"]), ("qrels.txt:1", "relevance")),
    Bad(
        "qrels:duplicate-judgment",
        with_run(qrels_lines=["q1 0 d11 1", "q2 0 d22 1", "q1 0 d11 0"]),
        ("qrels.txt:3", "d11"),
    ),
    Bad(
        "qrels:beir-header-wrong-columns",
        with_run(qrels_lines=["query-id\tcorpus-id\tscore", "q1\td11"]),
        ("qrels.txt:2",),
    ),
    Bad("qrels:non-utf8", with_run(qrels_bytes=b"q1 0 d11 1\nq2 0 d\xff2 1\n"), ("qrels.txt:2", "UTF-8")),
    # ---------------------------------------------------------------- BEIR folders
    Bad("beir:missing-queries", with_beir(lambda f: (f / "queries.jsonl").unlink()), ("queries.jsonl",)),
    Bad("beir:empty-corpus", with_beir(docs=[]), ("corpus.jsonl",)),
    Bad(
        "beir:malformed-json",
        with_beir(docs=[json.dumps(BEIR_DOCS[0]), '{"_id": "d2", "text": ']),
        ("corpus.jsonl:2", "malformed JSON"),
    ),
    Bad("beir:not-an-object", with_beir(queries=[json.dumps(BEIR_QUERIES[0]), "[1, 2]"]), ("queries.jsonl:2",)),
    Bad(
        "beir:missing-_id",
        with_beir(docs=[json.dumps(BEIR_DOCS[0]), json.dumps({"text": "x"})]),
        ("corpus.jsonl:2", "_id"),
    ),
    Bad("beir:bool-_id", with_beir(docs=[json.dumps({"_id": True, "text": "x"})]), ("corpus.jsonl:1", "_id")),
    Bad("beir:number-text", with_beir(queries=[json.dumps({"_id": "q1", "text": 5})]), ("queries.jsonl:1", "text")),
    Bad(
        "beir:duplicate-doc",
        with_beir(docs=[json.dumps(d) for d in BEIR_DOCS] + [json.dumps(BEIR_DOCS[2])]),
        ("corpus.jsonl:9", "d3"),
    ),
    Bad(
        "beir:duplicate-query",
        with_beir(queries=[json.dumps(q) for q in BEIR_QUERIES] + [json.dumps(BEIR_QUERIES[0])]),
        ("queries.jsonl:6", "q1"),
    ),
    Bad(
        "beir:non-utf8",
        with_beir(lambda f: (f / "corpus.jsonl").write_bytes(b'{"_id": "d1", "text": "caf\xe9"}\n')),
        ("corpus.jsonl:1", "UTF-8"),
    ),
    Bad("beir:no-relevant", with_beir(qrels=["query-id\tcorpus-id\tscore", "q1\td1\t0"]), ("test.tsv",)),
    Bad(
        "beir:qrels-bad-rel",
        with_beir(qrels=["query-id\tcorpus-id\tscore", "q1\td1\thigh"]),
        ("test.tsv:2", "relevance"),
    ),
    # ---------------------------------------------------------------- BFCL files (SHORTLIST_BFCL_DIR)
    _bfcl_case(
        "bfcl:missing-answers",
        ("possible_answer",),
        mutate=lambda f: (f / "possible_answer" / "BFCL_v4_simple_python.json").unlink(),
    ),
    _bfcl_case("bfcl:empty-questions", ("BFCL_v4_simple_python.json", "no entries"), questions=[]),
    _bfcl_case(
        "bfcl:malformed-json",
        ("BFCL_v4_simple_python.json:3", "malformed JSON"),
        questions=_replace(_GQ, 2, '{"id": "q2", "question": [['),
    ),
    _bfcl_case("bfcl:truncated-last-line", ("BFCL_v4_simple_python.json:6",), questions=[*_GQ[:5], _GQ[5][:40]]),
    _bfcl_case(
        "bfcl:non-utf8",
        ("BFCL_v4_simple_python.json", "UTF-8"),
        questions=("\n".join(_GQ[:2]) + "\n").encode() + b'{"id": "q\xff"}\n',
    ),
    _bfcl_case("bfcl:duplicate-id", ("BFCL_v4_simple_python.json:7", "q0"), questions=[*_GQ, _GQ[0]]),
    _bfcl_case(
        "bfcl:function-not-a-list",
        ("BFCL_v4_simple_python.json:2", "function"),
        questions=_replace(_GQ, 1, json.dumps({**json.loads(_GQ[1]), "function": {"name": "beta"}})),
    ),
    _bfcl_case(
        "bfcl:gold-not-in-entry",
        ("q1",),
        answers=_replace(_GA, 1, json.dumps({"id": "q1", "ground_truth": [{"zeta": {}}]})),
    ),
    _bfcl_case("bfcl:no-ground-truth", ("q5",), answers=_GA[:5]),
    _bfcl_case(
        "bfcl:id-not-a-scalar",
        ("BFCL_v4_simple_python.json:1",),
        questions=[json.dumps({**json.loads(_GQ[0]), "id": ["q0"]}), *_GQ[1:]],
    ),
    # ---------------------------------------------------------------- pinned data files (MetaTool / ToolBench)
    Bad(
        "data:metatool-tampered",
        with_data_dir("metatool", "metatool/dataset/plugin_des.json", b'{"a": "b"}'),
        ("plugin_des.json", "sha256 mismatch"),
    ),
    Bad(
        "data:metatool-truncated",
        with_data_dir("metatool", "metatool/dataset/plugin_des.json", b'{"a": '),
        ("plugin_des.json", "sha256 mismatch"),
    ),
    Bad(
        "data:metatool-is-a-directory",
        with_data_dir("metatool", "metatool/dataset/plugin_des.json", None),
        ("plugin_des.json", "not a regular file"),
    ),
    Bad(
        "data:toolbench-tampered-registry",
        with_data_dir("toolbench", "toolbench/anytool/tool_details.json", b"{}"),
        ("tool_details.json", "sha256 mismatch"),
    ),
]

# ---------------------------------------------------------------- run configs and saved agents (evaluate)


def _cfg_edit(**changes: object) -> Callable[[Path], None]:
    def mutate(run: Path) -> None:
        cfg = json.loads((run / "config.json").read_text())
        for key, value in changes.items():
            if value is ...:
                cfg.pop(key)
            else:
                cfg[key] = value
        (run / "config.json").write_text(json.dumps(cfg))

    return mutate


def _agent_edit(**changes: object) -> Callable[[Path], None]:
    def mutate(run: Path) -> None:
        payload = json.loads((run / "agent.json").read_text())
        for key, value in changes.items():
            if value is ...:
                payload.pop(key)
            else:
                payload[key] = value
        (run / "agent.json").write_text(json.dumps(payload))

    return mutate


def _write(name: str, content: bytes | str | None) -> Callable[[Path], None]:
    def mutate(run: Path) -> None:
        if content is None:
            (run / name).unlink()
        else:
            (run / name).write_bytes(content if isinstance(content, bytes) else content.encode())

    return mutate


def _truncate(name: str, keep: int) -> Callable[[Path], None]:
    def mutate(run: Path) -> None:
        (run / name).write_bytes((run / name).read_bytes()[:keep])

    return mutate


#: (id, which trained run to copy: "tabular" | "dqn" | "fixed", mutation, needles)
EVAL_CASES: list[tuple[str, str, Callable[[Path], None], tuple[str, ...]]] = [
    ("run-config:missing", "tabular", _write("config.json", None), ("config.json",)),
    ("run-config:empty", "tabular", _write("config.json", ""), ("config.json",)),
    ("run-config:not-json", "tabular", _write("config.json", "{not json"), ("config.json",)),
    ("run-config:truncated", "tabular", _truncate("config.json", 60), ("config.json",)),
    ("run-config:top-level-list", "tabular", _write("config.json", "[1, 2]"), ("config.json",)),
    ("run-config:non-utf8", "tabular", _write("config.json", b'{"agent": "tab\xffular"}'), ("config.json",)),
    ("run-config:no-seed", "tabular", _cfg_edit(seed=...), ("config.json", "seed")),
    ("run-config:no-benchmark", "tabular", _cfg_edit(benchmark=...), ("config.json", "benchmark")),
    ("run-config:no-method", "tabular", _cfg_edit(method=...), ("config.json", "method")),
    ("run-config:unknown-agent", "tabular", _cfg_edit(agent="ppo"), ("config.json", "ppo")),
    ("run-config:unknown-benchmark", "tabular", _cfg_edit(benchmark="nope"), ("config.json", "nope")),
    (
        "run-config:episode-nan-step-cost",
        "tabular",
        _cfg_edit(episode={"reward": "bor", "step_cost": float("nan"), "gamma": 0.95, "max_depth": None}),
        ("config.json", "step_cost"),
    ),
    ("run-config:episode-unknown-key", "tabular", _cfg_edit(episode={"reward": "bor", "zzz": 1}), ("config.json",)),
    ("run-config:split-seed-not-int", "tabular", _cfg_edit(split_seed="abc"), ("config.json", "split_seed")),
    ("run-config:fixed-k-null", "fixed", _cfg_edit(k=None), ("config.json", "k")),
    ("saved-agent:tabular-missing", "tabular", _write("agent.json", None), ("agent.json",)),
    ("saved-agent:tabular-not-json", "tabular", _write("agent.json", "{"), ("agent.json",)),
    ("saved-agent:tabular-truncated", "tabular", _truncate("agent.json", 1000), ("agent.json",)),
    ("saved-agent:tabular-non-utf8", "tabular", _write("agent.json", b"\xff\xfe"), ("agent.json",)),
    ("saved-agent:tabular-top-level-list", "tabular", _write("agent.json", "[]"), ("agent.json",)),
    ("saved-agent:tabular-no-reward", "tabular", _agent_edit(reward=...), ("agent.json",)),
    ("saved-agent:tabular-unknown-setting", "tabular", _agent_edit(settings={"zzz": 1}), ("agent.json",)),
    ("saved-agent:tabular-settings-list", "tabular", _agent_edit(settings=[1]), ("agent.json",)),
    ("saved-agent:tabular-wrong-shape", "tabular", _agent_edit(q=[[0, 0]]), ("agent.json", "Q-table")),
    ("saved-agent:tabular-nan", "tabular", _agent_edit(q_coarse=[[float("nan"), 0.0]] * 13), ("agent.json", "NaN")),
    ("saved-agent:tabular-strings", "tabular", _agent_edit(q="abc"), ("agent.json",)),
    ("saved-agent:dqn-missing", "dqn", _write("agent.zip", None), ("agent.zip",)),
    ("saved-agent:dqn-empty", "dqn", _write("agent.zip", b""), ("agent.zip",)),
    ("saved-agent:dqn-not-a-zip", "dqn", _write("agent.zip", b"PK\x03\x04" + b"garbage" * 50), ("agent.zip",)),
    ("saved-agent:dqn-truncated", "dqn", _truncate("agent.zip", 2000), ("agent.zip",)),
]


@pytest.fixture(scope="module")
def trained_runs(tmp_path_factory: pytest.TempPathFactory, cache_dir: str) -> dict[str, Path]:
    """One tabular, one DQN and one fixed-K run directory on BFCL + BM25 (tiny budgets)."""
    out = tmp_path_factory.mktemp("trained")
    get_condition.cache_clear()
    common = ["--seeds", "1", "--out", str(out), "--cache-dir", cache_dir, "--no-progress"]
    assert main(["train", "--agent", "tabular", "--set", "tabular.episodes=200", *common]) == 0
    assert main(["train", "--agent", "dqn", *TINY_DQN, *common]) == 0
    assert main(["train", "--agent", "fixed", "--k", "3", *common]) == 0
    runs = out / "runs"
    return {
        "tabular": runs / "bfcl-bm25__bor-tabular__s1",
        "dqn": runs / "bfcl-bm25__bor-dqn__s1",
        "fixed": runs / "bfcl-bm25__fixed-3__s1",
    }


def _check_user_error(res: CliResult, case_id: str, needles: tuple[str, ...], argparse_error: bool) -> None:
    if res.uncaught is not None:
        pytest.fail(
            f"{case_id}: {type(res.uncaught).__name__} escaped main() (the user sees a traceback): {res.uncaught}"
        )
    assert "Traceback" not in res.err, res.err
    assert res.code == 2, f"{case_id}: exit status {res.code}, expected 2 (stderr: {res.err!r})"
    lines = res.err_lines
    if argparse_error:
        assert lines and re.match(r"^shortlist( \w+)?: error: ", lines[-1]), lines
        line = lines[-1]
    else:
        assert len(lines) == 1, f"{case_id}: expected one stderr line, got {lines}"
        line = lines[0]
        assert line.startswith("shortlist: error: "), line
    missing = [n for n in needles if n not in line]
    assert not missing, f"{case_id}: the error does not name {missing}: {line!r}"


@pytest.mark.parametrize("case", CLI_CASES, ids=[c.id for c in CLI_CASES])
def test_cli_user_error(
    case: Bad,
    tmp_path: Path,
    cache_dir: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """Exit 2, one line naming the input and position, no traceback, no output folder."""
    work = tmp_path / "in"
    work.mkdir()
    argv = case.build(work)
    if argv and argv[0] == "evaluate" and "RUN:tabular" in argv:
        argv[argv.index("RUN:tabular")] = str(request.getfixturevalue("trained_runs")["tabular"])
    for key, value in (case.env(work) if case.env else {}).items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "out"
    extra = [] if "--out" in argv else ["--out", str(out)]
    if argv and argv[0] in ("train", "reproduce", "evaluate") and "--cache-dir" not in argv:
        extra += ["--cache-dir", cache_dir]
    if argv and argv[0] in ("train", "reproduce"):
        extra += ["--no-progress"]
    res = run_cli([*argv, *extra], capsys)
    _check_user_error(res, case.id, case.needles, case.argparse)
    assert not out.exists(), f"{case.id}: output left behind: {sorted(p.name for p in out.rglob('*'))}"


@pytest.mark.parametrize(("case_id", "which", "mutate", "needles"), EVAL_CASES, ids=[c[0] for c in EVAL_CASES])
def test_evaluate_user_error(
    case_id: str,
    which: str,
    mutate: Callable[[Path], None],
    needles: tuple[str, ...],
    trained_runs: dict[str, Path],
    tmp_path: Path,
    cache_dir: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A damaged run directory (config or saved agent) is a user error naming the file."""
    run = tmp_path / trained_runs[which].name
    shutil.copytree(trained_runs[which], run)
    mutate(run)
    out = tmp_path / "eval-out"
    res = run_cli(["evaluate", "--run-dir", str(run), "--out", str(out), "--cache-dir", cache_dir], capsys)
    _check_user_error(res, case_id, needles, False)
    assert not out.exists()


# ---------------------------------------------------------------- duplicates in CLI lists


@pytest.mark.parametrize(
    "extra",
    [["--agent", "fixed", "--k", "1", "--seeds", "1", "1"], ["--agent", "fixed", "--k", "3", "3", "--seeds", "1"]],
    ids=["duplicate-seeds", "duplicate-k"],
)
def test_duplicate_list_values_never_duplicate_result_rows(
    extra: list[str], tmp_path: Path, cache_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--seeds 1 1`` / ``--k 3 3``: either a user error naming the flag, or each cell once.

    Today both cells (the same run directory) are collected twice, so per_query.csv holds every
    row twice and summary.csv reports n_queries = 240 for 120 test queries.
    """
    out = tmp_path / "o"
    res = run_cli(["train", *extra, "--out", str(out), "--cache-dir", cache_dir, "--no-progress"], capsys)
    assert res.uncaught is None, res.uncaught
    if res.code == 2:
        assert len(res.err_lines) == 1 and ("--seeds" in res.err or "--k" in res.err), res.err
        assert not out.exists()
        return
    assert res.code == 0, res.err
    import pandas as pd

    pq = pd.read_csv(out / "per_query.csv", dtype={"qid": str})
    dup = pq.duplicated(["condition", "method", "seed", "qid"])
    assert not dup.any(), f"{int(dup.sum())} duplicated per-query rows"
    assert (pd.read_csv(out / "summary.csv")["n_queries"] == 120).all()


def test_reproduce_duplicate_only_lists_each_cell_once(capsys: pytest.CaptureFixture[str], cache_dir: str) -> None:
    res = run_cli(
        ["reproduce", "--only", "bfcl-bm25", "bfcl-bm25", "--seeds", "1", "--dry-run", "--cache-dir", cache_dir], capsys
    )
    if res.code == 2:
        assert "bfcl-bm25" in res.err
        return
    assert res.code == 0
    ids = [ln.split("\t")[0] for ln in res.out.splitlines() if "\t" in ln]
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} duplicated cells"


# ---------------------------------------------------------------- cache files (not errors: recomputed)


def test_corrupt_score_cache_is_recomputed_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every cache entry truncated, replaced by garbage or by a pickled object array: the CLI
    recomputes and writes results byte-identical to a clean run (never unpickles, never fails)."""
    cache = tmp_path / "cache"
    argv = ["train", "--agent", "fixed", "--k", "1", "5", "--seeds", "1", "--no-progress", "--cache-dir", str(cache)]
    assert run_cli([*argv, "--out", str(tmp_path / "clean")], capsys).code == 0
    entries = sorted((cache / "scores").glob("*.npy"))
    assert entries
    import numpy as np

    marker = tmp_path / "unpickled"
    for i, e in enumerate(entries):
        if i % 3 == 0:
            e.write_bytes(e.read_bytes()[: e.stat().st_size // 2])
        elif i % 3 == 1:
            e.write_bytes(b"\x93NUMPY garbage" * 10)
        else:
            np.save(e, np.array([_Touch(str(marker))], dtype=object), allow_pickle=True)
    get_condition.cache_clear()
    assert run_cli([*argv, "--out", str(tmp_path / "again")], capsys).code == 0
    assert not marker.exists(), "a cached object array was unpickled"
    for t in ("per_query.csv", "summary.csv", "buckets.csv"):
        assert (tmp_path / "clean" / t).read_bytes() == (tmp_path / "again" / t).read_bytes(), t


class _Touch:
    """Unpickling this creates ``path`` (a harmless stand-in for code execution)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (Path.touch, (Path(self.path),))


# ============================================================================ loader-level cases


def _loader_metatool_plugin(text: bytes) -> Callable[[Path], object]:
    from benchmarks.metatool import read_plugin_des

    def call(tmp: Path) -> object:
        (tmp / "plugin_des.json").write_bytes(text)
        return read_plugin_des(tmp / "plugin_des.json")

    return call


def _loader_metatool_csv(text: bytes) -> Callable[[Path], object]:
    from benchmarks.metatool import load_metatool_files

    def call(tmp: Path) -> object:
        (tmp / "plugin_des.json").write_text(json.dumps({"alpha": "does a", "beta": "does b"}))
        (tmp / "all_clean_data.csv").write_bytes(text)
        return load_metatool_files(tmp / "plugin_des.json", tmp / "all_clean_data.csv")

    return call


def _loader_toolbench_registry(text: bytes) -> Callable[[Path], object]:
    from benchmarks.toolbench import read_registry

    def call(tmp: Path) -> object:
        (tmp / "tool_details.json").write_bytes(text)
        return read_registry(tmp / "tool_details.json")

    return call


def _loader_toolbench_queries(text: bytes) -> Callable[[Path], object]:
    from benchmarks.toolbench import read_queries

    def call(tmp: Path) -> object:
        (tmp / "G1_tool.json").write_bytes(text)
        return read_queries(tmp / "G1_tool.json")

    return call


ARCHIVE_PREFIX = "tools/toolenv2404_filtered/Cat"
GOOD_MEMBER = json.dumps({"tool_name": "A", "tool_description": "d", "api_list": [{"name": "x"}]}).encode()


def _tar(
    members: list[tarfile.TarInfo | tuple[str, bytes]], fmt: int = tarfile.PAX_FORMAT, compression: str = "xz"
) -> bytes:
    buf = io.BytesIO()
    mode: Literal["w:xz", "w:gz"] = "w:gz" if compression == "gz" else "w:xz"
    with tarfile.open(fileobj=buf, mode=mode, format=fmt) as tf:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tf.addfile(m)
            else:
                ti = tarfile.TarInfo(m[0])
                ti.size = len(m[1])
                tf.addfile(ti, io.BytesIO(m[1]))
    return buf.getvalue()


def _pax_member(path: str, raw: bytes) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(f"{ARCHIVE_PREFIX}/innocent.json")
    ti.pax_headers = {"path": path}
    ti.size = len(raw)
    return ti


def _tar_pax_traversal() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz", format=tarfile.PAX_FORMAT) as tf:
        ti = _pax_member("../../outside.json", GOOD_MEMBER)
        tf.addfile(ti, io.BytesIO(GOOD_MEMBER))
    return buf.getvalue()


def _tar_gnu_longname_traversal() -> bytes:
    name = "a/" * 60 + "../" * 70 + "outside.json"  # > 100 chars: stored as a GNU long name
    return _tar([(name, GOOD_MEMBER)], fmt=tarfile.GNU_FORMAT)


def _tar_bitflip() -> bytes:
    raw = bytearray(_tar([(f"{ARCHIVE_PREFIX}/t{i}.json", GOOD_MEMBER * 20) for i in range(20)]))
    raw[len(raw) // 2] ^= 0xFF
    return bytes(raw)


def _tar_symlink_then_file() -> bytes:
    link = tarfile.TarInfo(f"{ARCHIVE_PREFIX}/a.json")
    link.type = tarfile.SYMTYPE
    link.linkname = "../../../../etc/passwd"
    return _tar([link, (f"{ARCHIVE_PREFIX}/a.json", GOOD_MEMBER)])


def _tar_windows_traversal() -> bytes:
    return _tar([("tools\\..\\..\\outside.json", GOOD_MEMBER)])


def _loader_archive(raw: Callable[[], bytes]) -> Callable[[Path], object]:
    from benchmarks.toolbench import read_archive

    def call(tmp: Path) -> object:
        (tmp / "a.tar.xz").write_bytes(raw())
        return read_archive(tmp / "a.tar.xz")

    return call


#: (id, call(tmp) -> result, needles in the DataError message)
LOADER_CASES: list[tuple[str, Callable[[Path], object], tuple[str, ...]]] = [
    ("metatool-registry:top-level-array-of-numbers", _loader_metatool_plugin(b"[1, 2]"), ("plugin_des.json",)),
    (
        "metatool-registry:top-level-array-of-pairs",
        _loader_metatool_plugin(b'[["alpha", "does a"]]'),
        ("plugin_des.json",),
    ),
    (
        "metatool-registry:top-level-array-of-objects",
        _loader_metatool_plugin(b'[{"alpha": "does a"}]'),
        ("plugin_des.json",),
    ),
    ("metatool-registry:array-of-empty-arrays", _loader_metatool_plugin(b"[[]]"), ("plugin_des.json",)),
    ("metatool-registry:empty-object", _loader_metatool_plugin(b"{}"), ("plugin_des.json",)),
    ("metatool-registry:null", _loader_metatool_plugin(b"null"), ("plugin_des.json",)),
    (
        "metatool-registry:description-not-string",
        _loader_metatool_plugin(b'{\n"a": "x",\n"b": 3\n}'),
        ("plugin_des.json:3", "'b'"),
    ),
    ("metatool-registry:non-utf8", _loader_metatool_plugin(b'{"caf\xe9": "x"}'), ("plugin_des.json", "UTF-8")),
    ("metatool-queries:header-only", _loader_metatool_csv(b"Query,Tool\n"), ("all_clean_data.csv", "no data rows")),
    ("metatool-queries:empty", _loader_metatool_csv(b""), ("all_clean_data.csv:1", "header")),
    (
        "metatool-queries:unclosed-quote",
        _loader_metatool_csv(b'Query,Tool\nfind a,alpha\n"never closed,beta\n'),
        ("all_clean_data.csv:",),
    ),
    (
        "metatool-queries:non-utf8",
        _loader_metatool_csv(b"Query,Tool\ncaf\xe9,alpha\n"),
        ("all_clean_data.csv", "UTF-8"),
    ),
    ("toolbench-registry:non-utf8", _loader_toolbench_registry(b'{"caf\xe9": {}}'), ("tool_details.json", "UTF-8")),
    ("toolbench-registry:top-level-list", _loader_toolbench_registry(b'[["a", {}]]'), ("tool_details.json",)),
    ("toolbench-queries:entry-not-object", _loader_toolbench_queries(b"[1]"), ("G1_tool.json", "entry 0")),
    (
        "toolbench-queries:query-id-bool",
        _loader_toolbench_queries(b'[{"query_id": true, "query": "x", "relevant APIs": []}]'),
        ("G1_tool.json:1", "query_id"),
    ),
    ("toolbench-queries:non-utf8", _loader_toolbench_queries(b'[{"query": "caf\xe9"}]'), ("G1_tool.json", "UTF-8")),
    ("toolbench-archive:pax-path-traversal", _loader_archive(_tar_pax_traversal), ("a.tar.xz", "..")),
    ("toolbench-archive:gnu-longname-traversal", _loader_archive(_tar_gnu_longname_traversal), ("a.tar.xz", "..")),
    ("toolbench-archive:windows-traversal", _loader_archive(_tar_windows_traversal), ("a.tar.xz", "..")),
    ("toolbench-archive:symlink-then-file", _loader_archive(_tar_symlink_then_file), ("a.tar.xz", "link")),
    ("toolbench-archive:bit-flip", _loader_archive(_tar_bitflip), ("a.tar.xz", "corrupt")),
    (
        "toolbench-archive:gzip-not-xz",
        _loader_archive(lambda: _tar([(f"{ARCHIVE_PREFIX}/a.json", GOOD_MEMBER)], compression="gz")),
        ("a.tar.xz",),
    ),
    ("toolbench-archive:xz-of-garbage", _loader_archive(lambda: lzma.compress(b"not a tar" * 100)), ("a.tar.xz",)),
    ("toolbench-archive:empty-file", _loader_archive(lambda: b""), ("a.tar.xz",)),
    (
        "toolbench-archive:member-non-utf8",
        _loader_archive(lambda: _tar([(f"{ARCHIVE_PREFIX}/a.json", b'{"x": "\xff"}')])),
        ("a.json", "UTF-8"),
    ),
]


@pytest.mark.parametrize(("case_id", "call", "needles"), LOADER_CASES, ids=[c[0] for c in LOADER_CASES])
def test_loader_user_error(
    case_id: str, call: Callable[[Path], object], needles: tuple[str, ...], tmp_path: Path
) -> None:
    """The loader raises DataError (CLI: exit 2) naming the file and position, nothing else."""
    before = set(tmp_path.parent.iterdir())
    try:
        result = call(tmp_path)
    except DataError as e:
        missing = [n for n in needles if n not in str(e)]
        assert not missing, f"{case_id}: the error does not name {missing}: {e}"
        assert "\n" not in str(e)
    except Exception as e:  # noqa: BLE001
        pytest.fail(
            f"{case_id}: {type(e).__name__} instead of DataError (the user sees a traceback "
            f"or an error that names no file): {e}"
        )
    else:
        pytest.fail(f"{case_id}: accepted as valid: {str(result)[:200]}")
    assert set(tmp_path.parent.iterdir()) == before, "the loader wrote outside its input folder"


# ============================================================================ covered elsewhere

#: Input variants already tested by the loader / CLI test modules (not repeated above).
COVERED_ELSEWHERE: list[tuple[str, str]] = [
    (
        "cli: unknown scorer / agent / reward / benchmark, --max-depth 0 or > N, --step-cost nan, --gamma 1.5",
        "test_experiments_cli.py::test_bad_input_exits_2_and_writes_nothing",
    ),
    (
        "cli: evaluate on a folder without config.json",
        "test_experiments_cli.py::test_evaluate_bad_run_dir",
    ),
    (
        "cli: reproduce --only unknown condition",
        "test_experiments_cli.py::test_reproduce_unknown_condition",
    ),
    (
        "trec run: wrong column count, bad rank, bad/NaN/inf score",
        "test_benchmarks_trec.py::test_read_run_malformed",
    ),
    (
        "trec run: duplicate (qid, docid) names the first line",
        "test_benchmarks_trec.py::test_read_run_duplicate_names_first_line",
    ),
    (
        "trec run: not UTF-8",
        "test_benchmarks_trec.py::test_read_run_not_utf8",
    ),
    (
        "trec run: empty",
        "test_benchmarks_trec.py::test_read_run_empty",
    ),
    (
        "qrels: malformed lines",
        "test_benchmarks_trec.py::test_read_qrels_malformed",
    ),
    (
        "qrels: not UTF-8 / empty",
        "test_benchmarks_trec.py::test_read_qrels_not_utf8",
    ),
    (
        "run + qrels: n_candidates smaller than a list or than R",
        "test_benchmarks_trec.py::test_truncated_run_errors_name_qid",
    ),
    (
        "beir: malformed files name file and line",
        "test_benchmarks_beir.py::test_malformed_names_file_and_line",
    ),
    (
        "beir: unknown qrels ids (strict)",
        "test_benchmarks_beir.py::test_unknown_qrels_ids_strict",
    ),
    (
        "beir: missing or empty file",
        "test_benchmarks_beir.py::test_missing_or_empty_file",
    ),
    (
        "bfcl: malformed JSON lines, ids, ground truth, function, question",
        "test_benchmarks_bfcl.py::test_malformed_function_field",
    ),
    (
        "bfcl: duplicate ids",
        "test_benchmarks_bfcl.py::test_duplicate_query_id",
    ),
    (
        "bfcl: non-UTF-8",
        "test_benchmarks_bfcl.py::test_non_utf8_bytes",
    ),
    (
        "metatool: header, column count, empty fields, CSV syntax",
        "test_benchmarks_metatool.py::test_wrong_column_count_names_line",
    ),
    (
        "metatool: registry duplicate key / empty name / bad description",
        "test_benchmarks_metatool.py::test_registry_errors",
    ),
    (
        "toolbench: registry errors",
        "test_benchmarks_toolbench.py::test_registry_errors",
    ),
    (
        "toolbench: query errors name file and line",
        "test_benchmarks_toolbench.py::test_query_errors_name_file_and_line",
    ),
    (
        "toolbench archive: truncated / not xz",
        "test_benchmarks_toolbench.py::test_truncated_archive",
    ),
    (
        "toolbench archive: absolute and '..' member paths",
        "test_benchmarks_toolbench.py::test_unsafe_member_paths",
    ),
    (
        "toolbench archive: symlink, hard link, fifo, device",
        "test_benchmarks_toolbench.py::test_non_regular_members",
    ),
    (
        "toolbench archive: bad member JSON, duplicate member, no JSON member",
        "test_benchmarks_toolbench.py::test_bad_member_content",
    ),
    (
        "toolbench archive index cache: stale / unwritable",
        "test_benchmarks_toolbench.py::test_unwritable_cache_only_warns",
    ),
    (
        "pinned data: present file with a wrong digest",
        "test_benchmarks_data.py::test_present_file_with_wrong_digest_refused",
    ),
    (
        "pinned data: corrupted / cut-short / 404 download",
        "test_benchmarks_data.py::test_download_corrupted_file_not_kept",
    ),
    (
        "score cache: corrupt entries recomputed",
        "test_benchmarks_scorers.py::test_corrupt_entry_is_recomputed",
    ),
    (
        "score cache: object arrays never unpickled",
        "test_benchmarks_scorers.py::test_object_array_is_not_unpickled",
    ),
    (
        "score cache: NaN / wrong shape from a scorer",
        "test_benchmarks_scorers.py::test_non_finite_scores_raise_and_write_nothing",
    ),
    (
        "p_random: negative / non-integer / NaN / k > n / r > n",
        "test_rewards_bor.py::test_p_random_rejects_bad_counts",
    ),
    (
        "bor_aggregate: empty, found outside {0, 1}",
        "test_rewards_bor.py::test_bor_aggregate_errors",
    ),
    (
        "RankedQuery / env: NaN scores, unsorted, ranks out of range",
        "test_envs_shortlist.py",
    ),
]


def test_covered_elsewhere_references_exist() -> None:
    for what, ref in COVERED_ELSEWHERE:
        file, _, func = ref.partition("::")
        text = (TESTS / file).read_text(encoding="utf-8")
        if func:
            assert re.search(rf"^def {re.escape(func)}\(", text, re.M), f"{what}: {ref} no longer exists"


# ============================================================================ safe data handling


def _malicious_sb3_zip(good: Path, dest: Path, marker: Path) -> None:
    """An SB3 zip whose ``data`` entry carries a cloudpickled object that touches ``marker``."""
    with zipfile.ZipFile(good) as zin:
        members = {n: zin.read(n) for n in zin.namelist()}
    doc = json.loads(members["data"])
    payload = base64.b64encode(pickle.dumps(_Touch(str(marker)))).decode()
    doc["observation_space"] = {":type:": "<class 'x'>", ":serialized:": payload}
    members["data"] = json.dumps(doc).encode()
    with zipfile.ZipFile(dest, "w") as zout:
        for name, raw in members.items():
            zout.writestr(name, raw)


def test_saved_dqn_agent_from_a_foreign_folder_never_executes_code(
    trained_runs: dict[str, Path], tmp_path: Path, cache_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``shortlist evaluate --run-dir`` accepts any folder holding a config.json, e.g. one
    downloaded from a colleague; SB3 zips carry cloudpickled objects that ``DQN.load`` unpickles.
    Loading a saved agent must never run code from the file: today it does."""
    run = tmp_path / "downloaded-run"
    shutil.copytree(trained_runs["dqn"], run)
    marker = tmp_path / "code-was-executed"
    _malicious_sb3_zip(trained_runs["dqn"] / "agent.zip", run / "agent.zip", marker)
    run_cli(
        ["evaluate", "--run-dir", str(run), "--out", str(tmp_path / "ev"), "--cache-dir", cache_dir],
        capsys,
    )
    assert not marker.exists(), "loading agent.zip from a user-supplied folder executed pickled code"


def test_no_pickle_loader_in_package_source() -> None:
    """No pickle, unrestricted torch.load, allow_pickle=True or joblib anywhere in the package;
    the only SB3 zip loader is DQNAgent.load (whose callers are checked above)."""
    offenders = []
    patterns = [
        r"\bpickle\.loads?\(",
        r"cloudpickle",
        r"\bdill\b",
        r"joblib",
        r"allow_pickle\s*=\s*True",
        r"\bpd\.read_pickle",
        r"\bshelve\b",
        r"\bmarshal\.loads?\(",
        r"(?<![.\w])eval\(",
        r"(?<![.\w])exec\(",
    ]
    sb3_load = re.compile(r"\b(DQN|PPO|A2C|SAC|TD3|BaseAlgorithm)\.load\(")
    for pkg in PACKAGES:
        for f in (REPO / pkg).rglob("*.py"):
            text = f.read_text(encoding="utf-8")
            for pat in patterns:
                for m in re.finditer(pat, text):
                    offenders.append(f"{f.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {pat}")
            for m in re.finditer(r"\btorch\.load\(", text):
                if "weights_only=True" not in text[m.end() : m.end() + 300].replace(" ", ""):
                    offenders.append(f"{f.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: torch.load")
            if sb3_load.search(text) and f.relative_to(REPO).as_posix() != "agents/dqn.py":
                offenders.append(f"{f.relative_to(REPO)}: loads an SB3 zip")
    assert not offenders, offenders


def test_downloads_only_from_pinned_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``shortlist data fetch`` asks only for the pinned raw URLs (commit sha in the path), over HTTPS."""
    asked: list[str] = []

    def fake_urlopen(url: str, timeout: float = 0) -> object:
        asked.append(url if isinstance(url, str) else url.full_url)
        raise urllib.error.URLError("offline test")

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    with pytest.raises(DataError):
        data.fetch("metatool", tmp_path)
    pinned = {e.url for e in data.DATASETS["metatool"].values()}
    assert asked and set(asked) <= pinned
    for url in asked:
        assert re.fullmatch(r"https://raw\.githubusercontent\.com/[\w.-]+/[\w.-]+/[0-9a-f]{40}/.+", url), url
    assert not any(p.is_file() for p in tmp_path.rglob("*")), "a file was left after a failed download"


def test_download_verified_before_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A download whose bytes do not match the pinned sha256 is never placed under the final name."""
    served = b'{"alpha": "does a"}'

    class Resp(io.BytesIO):
        headers: dict[str, str] = {}

        def __enter__(self) -> Resp:
            return self

        def __exit__(self, *a: object) -> None:
            self.close()

    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout=0: Resp(served))
    with pytest.raises(DataError, match="sha256"):
        data.ensure_file("metatool", "metatool/dataset/plugin_des.json", tmp_path)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_tampered_archive_in_data_dir_is_refused(tmp_path: Path) -> None:
    """A ToolBench archive whose bytes differ from the pinned sha256 is refused before it is opened."""
    from benchmarks.toolbench import ARCHIVE

    target = tmp_path / ARCHIVE
    target.parent.mkdir(parents=True)
    target.write_bytes(_tar([(f"{ARCHIVE_PREFIX}/a.json", GOOD_MEMBER)]))
    with pytest.raises(DataError, match="sha256 mismatch"):
        data.ensure_file("toolbench", ARCHIVE, tmp_path)


def test_archive_is_never_extracted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Members are read in memory one by one: no extract/extractall call, nothing written."""
    from benchmarks import toolbench

    calls: list[str] = []
    monkeypatch.setattr(tarfile.TarFile, "extract", lambda *a, **k: calls.append("extract"))
    monkeypatch.setattr(tarfile.TarFile, "extractall", lambda *a, **k: calls.append("extractall"))
    (tmp_path / "a.tar.xz").write_bytes(
        _tar([(f"{ARCHIVE_PREFIX}/a.json", GOOD_MEMBER), (f"{ARCHIVE_PREFIX}/b.json", GOOD_MEMBER)])
    )
    before = sorted(tmp_path.rglob("*"))
    tools = toolbench.read_archive(tmp_path / "a.tar.xz")
    assert [t.tool_name for t in tools] == ["A", "A"]
    assert calls == [] and sorted(tmp_path.rglob("*")) == before


def test_tabular_agent_is_plain_json(trained_runs: dict[str, Path]) -> None:
    """Tabular agents are stored as JSON (no code can run when they are loaded)."""
    raw = (trained_runs["tabular"] / "agent.json").read_bytes()
    payload = json.loads(raw)
    assert set(payload) >= {"reward", "settings", "q", "q_coarse", "tried"}
    assert not os.path.exists(trained_runs["tabular"] / "agent.zip")
