"""Condition names: the one place that builds and parses ``<benchmark>-<scorer>[-<variant>]``."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath

#: The train fraction of a user's run when none is given (the split of every condition).
DEFAULT_TRAIN_FRAC = 0.7


@dataclass(frozen=True)
class ConditionId:
    """A condition's identity.

    Attributes:
        benchmark: ``bfcl``, ``metatool``, ``toolbench``, ``beir``, ``run`` (a user's TREC run), ...
        scorer: ``bm25``, ``minilm`` or a sentence-transformers model; ``run`` for user runs.
        variant: candidate-set variant (``top50``, ``full``, ``sub200``, ...; may contain ``-``);
            for user runs, the run file's stem and a hash of the inputs (:func:`run_condition_name`).
    """

    benchmark: str
    scorer: str
    variant: str = ""

    def __post_init__(self) -> None:
        if not self.benchmark or "-" in self.benchmark:
            raise ValueError(f"benchmark name must be non-empty without '-', got {self.benchmark!r}")
        if not self.scorer:
            raise ValueError("scorer name must be non-empty")

    @property
    def name(self) -> str:
        """``bfcl-bm25``, ``metatool-minilm-top50``; ``run-<stem>`` for a user's run."""
        if self.benchmark == "run":
            return f"run-{self.variant}"
        return "-".join(p for p in (self.benchmark, self.scorer, self.variant) if p)

    @property
    def base(self) -> ConditionId:
        """The same benchmark and scorer without a variant."""
        return ConditionId(self.benchmark, self.scorer)

    @classmethod
    def parse(cls, name: str) -> ConditionId:
        """Inverse of :attr:`name` (the scorer must not contain ``-``)."""
        head, _, rest = name.partition("-")
        if head == "run" and rest:
            return cls("run", "run", rest)
        scorer, _, variant = rest.partition("-")
        if not head or not scorer:
            raise ValueError(f"bad condition name {name!r}: expected <benchmark>-<scorer>[-<variant>]")
        return cls(head, scorer, variant)

    def __str__(self) -> str:
        return self.name


def run_stem(path: str) -> str:
    """The run file's name without its folder, a ``.gz`` suffix and its last suffix (``data/my.run.gz`` -> ``my``)."""
    name = PurePath(path).name
    return PurePath(name.removesuffix(".gz") or name).stem or name


def inputs_hash(run_sha256: str, qrels_sha256: str) -> str:
    """Six hex digits of the sha256 of the run's and the qrels' sha256: the contents, not the paths."""
    if not run_sha256 or not qrels_sha256:
        raise ValueError("a run condition's name needs the sha256 of both the run and the qrels")
    return hashlib.sha256(f"run {run_sha256}\nqrels {qrels_sha256}\n".encode()).hexdigest()[:6]


def run_condition_name(options: Mapping[str, str]) -> str:
    """The condition name of a user's run: ``run-<stem>-<hash>[-n<N>][-train<frac>]``.

    Read from the source options of the run (``run``, ``run_sha256``, ``qrels_sha256`` and, when
    given, ``n_candidates`` and ``train_frac``). ``<stem>`` is the run file's name (:func:`run_stem`)
    and ``<hash>`` six hex digits of the sha256 of the run's and the qrels' contents
    (:func:`inputs_hash`), so a run of other data never shares a name (and so a run directory) with
    an earlier one, while the same bytes get the same name wherever the files live. The settings that
    change the queries or their split follow in plain words: ``-n<N>`` for an explicit candidate-set
    size, ``-train<frac>`` for a train fraction other than :data:`DEFAULT_TRAIN_FRAC`. E.g.
    ``run-my-3fa2c1``, ``run-my-3fa2c1-n5000-train0.5``.

    Raises:
        ValueError: when an option it needs is missing.
    """
    try:
        parts = [run_stem(options["run"]), inputs_hash(options["run_sha256"], options["qrels_sha256"])]
    except KeyError as e:
        raise ValueError(f"a run condition's name needs the source option {e}") from e
    if options.get("n_candidates"):
        parts.append(f"n{int(options['n_candidates'])}")
    if options.get("train_frac") and float(options["train_frac"]) != DEFAULT_TRAIN_FRAC:
        parts.append(f"train{float(options['train_frac']):g}")
    return ConditionId("run", "run", "-".join(parts)).name


def log_condition_name(scorer: str, variant: str, options: Mapping[str, str]) -> str:
    """The condition name of a tool registry and a log of the agent's requests (:mod:`benchmarks.toollog`):
    ``log-<scorer>[-hybrid]-<log stem>-<hash>[-train<frac>]``, ``<hash>`` six hex digits of the sha256 of the
    tools file's and the log's contents (as :func:`run_condition_name` does for a run and its qrels).

    Raises:
        ValueError: when an option it needs is missing.
    """
    try:
        digest = hashlib.sha256(f"tools {options['tools_sha256']}\nlog {options['log_sha256']}\n".encode())
        parts = [scorer, variant, run_stem(options["log"]), digest.hexdigest()[:6]]
    except KeyError as e:
        raise ValueError(f"a log condition's name needs the source option {e}") from e
    if options.get("train_frac") and float(options["train_frac"]) != DEFAULT_TRAIN_FRAC:
        parts.append(f"train{float(options['train_frac']):g}")
    return "-".join(["log", *(p for p in parts if p)])


def beir_condition_name(scorer: str, variant: str, options: Mapping[str, str]) -> str:
    """The condition name of a BEIR folder (:mod:`benchmarks.beir`): ``beir-<scorer>[-<variant>]-<folder>-<hash>
    [-<split>]``, ``<folder>`` the folder's name and ``<hash>`` six hex digits of the sha256 of the split's name and of
    the contents of its ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv`` (as :func:`run_condition_name`
    does for a run and its qrels), so two folders, or one whose files changed, never share a name (and so a run
    directory), while the same bytes get the same name wherever the folder lives. ``-<split>`` follows for a split
    other than ``test``. E.g. ``beir-bm25-scifact-3fa2c1``, ``beir-minilm-scifact-9b01de-dev``.

    Read from ``options``: ``beir_folder``, ``split``, ``corpus_sha256``, ``queries_sha256``, ``qrels_sha256``.

    Raises:
        ValueError: when an option it needs is missing.
    """
    try:
        digest = hashlib.sha256(
            f"split {options['split']}\ncorpus {options['corpus_sha256']}\nqueries {options['queries_sha256']}\n"
            f"qrels {options['qrels_sha256']}\n".encode()
        )
        parts = [scorer, variant, options["beir_folder"], digest.hexdigest()[:6]]
    except KeyError as e:
        raise ValueError(f"a BEIR condition's name needs the source option {e}") from e
    if options["split"] != "test":
        parts.append(options["split"])
    return "-".join(["beir", *(p for p in parts if p)])


def beir_source_name(scorer: str, variant: str, options: Mapping[str, str]) -> str:
    """:func:`beir_condition_name` from a command's source options (``beir_dir``, ``split`` and the
    ``sha256:<file>`` digests :func:`experiments.options.source_options` takes), the name a cell's run directory
    carries before its condition is built; the built condition's is the same (the folder's resolved name and the
    same three digests)."""
    split = options.get("split", "test")
    try:
        named = {
            "beir_folder": Path(options["beir_dir"]).resolve().name,
            "split": split,
            "corpus_sha256": options["sha256:corpus.jsonl"],
            "queries_sha256": options["sha256:queries.jsonl"],
            "qrels_sha256": options[f"sha256:qrels/{split}.tsv"],
        }
    except KeyError as e:
        raise ValueError(f"a BEIR condition's name needs the source option {e}") from e
    return beir_condition_name(scorer, variant, named)
