"""The bodies of ``shortlist train | evaluate | reproduce | data``: options in, files out.

``compare``, ``bench`` and ``tune`` live beside their computations (:mod:`experiments.compare`,
:mod:`experiments.bench`, :mod:`experiments.tune`); :mod:`experiments.cli` only dispatches.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from agents import registry
from agents.method import MethodSpec
from benchmarks.names import DEFAULT_TRAIN_FRAC
from experiments.io import write_manifest, write_tables
from experiments.options import (
    CommonArgs,
    DataFetchArgs,
    DataListArgs,
    EvaluateArgs,
    FolderArgs,
    LearnArgs,
    PredictArgs,
    ReproduceArgs,
    SourceArgs,
    TrainArgs,
    source_options,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from benchmarks.conditions import Condition


def cmd_train(ta: TrainArgs, la: LearnArgs, ca: CommonArgs, command: str) -> int:
    """Train one condition's policies (one run per seed), evaluate them and write the tables."""
    from experiments.pipeline import USER_SOURCES, check_split, fixed_within_lists, inputs_label, run_with
    from experiments.plan import FIXED_KS, PLANS, base_plan, cells_for
    from experiments.runner import collect_runs, run_index

    options = source_options(ta)
    cid = ta.condition_id
    plan = PLANS.get(cid.name) or base_plan(cid)
    kind = registry.get(ta.agent)
    methods = [MethodSpec(ta.agent, "bor", k) for k in ta.k] if kind.name_field else [MethodSpec(ta.agent, ta.reward)]
    seeds = la.seeds if kind.stochastic else la.seeds[:1]
    learning = la.learning(ta.agent)
    cells = cells_for([plan], seeds, {plan.name: methods}, learning=learning, buckets=ta.buckets, options=options)
    cells = fixed_within_lists(plan, methods, cells, ca, refuse=tuple(ta.k) != tuple(FIXED_KS))  # --k named
    if cid.benchmark in USER_SOURCES and kind.min_train > 1:  # (auto on a 2-request log: before anything is written)
        check_split(cells[0], ca, inputs_label(ta, cid.name), f"--agent {ta.agent}", kind.min_train, 1)
    out = Path(ta.out)
    _refuse_a_manifest(out, "train")
    runs = run_with(cells, out, ca, command)
    per_query, summary, buckets = collect_runs(runs)
    tables = {"per_query.csv": per_query, "summary.csv": summary, "buckets.csv": buckets, "runs.csv": run_index(runs)}
    write_tables(out, tables)
    cols = [
        "condition",
        "method",
        "seed",
        "mean_reward_net",
        "found_pct",
        "mean_k",
        "median_k",
        "p90_k",
        "bor_bits",
        "mean_reward",
    ]  # the judged net reward first; the depth's spread beside its mean
    print(summary[cols].to_string(index=False, float_format=lambda x: f"{x:.2f}", na_rep="n/a"))
    print(f"wrote {len(runs)} run(s) under {out / 'runs'}; {out}/summary.csv holds this command's runs only")
    if ta.source in ("run", "beir"):  # the user's own data: say what was skipped and how small the test set is
        sys.stdout.flush()  # the notes (stderr) after the table they qualify
        _print_data_notes(json.loads((runs[0] / "manifest.json").read_text(encoding="utf-8"))["condition"])
    return 0


def _print_data_notes(meta: dict, n_evaluated: int | None = None, split: str = "test") -> None:
    """:func:`benchmarks.conditions.data_notes` on the console (stderr), one ``shortlist: ...`` line each."""
    from benchmarks.conditions import data_notes

    n = int(meta.get("n_test", 0)) if n_evaluated is None else n_evaluated
    for line in data_notes(meta, n, split):
        print(f"shortlist: {line}", file=sys.stderr)


def cmd_reproduce(ra: ReproduceArgs, la: LearnArgs, ca: CommonArgs, command: str) -> int:
    """Run (or resume) the study and write its tables, figures, README, manifest and HTML index."""
    from experiments.pipeline import Pipeline, Produced, cells_plan, cells_producer, run_pipeline
    from experiments.plan import MULTI_PLANS, all_methods_for, left_out_note, plan_splits, resolve_plans, study_cells
    from experiments.report.study import write_study_report

    plans = resolve_plans(ra.only)
    cells = study_cells(plans, la.seeds, la.learning())
    if note := left_out_note(plans, all_methods_for):
        print(note, flush=True)
    out = Path(ra.out)
    first_split = plan_splits(MULTI_PLANS[0], la.split_seeds)[0]  # the split the multi-tool suite runs on

    def report(tmp: Path, p: Produced) -> dict:
        write_study_report(
            tmp,
            p.per_query,
            p.summary,
            p.buckets,
            ca.data_dir,
            ca.cache_dir,
            split_seed=first_split,
            observation=la.observation,
            source=out,
        )
        return {"observation": la.observation}

    pipeline = Pipeline(
        "reproduce",
        out,
        command,
        plan=cells_plan(cells, out),
        produce=cells_producer(cells, out, ca, command, None, la.observation),
        report=report,
        index="own",
    )
    return run_pipeline(pipeline, ra.dry_run)


def _input_changes(run: Path, cond_meta: dict) -> list[str]:
    """Lines naming every input whose sha256 differs from the one the run's manifest recorded."""
    try:
        recorded = json.loads((run / "manifest.json").read_text(encoding="utf-8"))["condition"]["inputs_sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return [f"{run / 'manifest.json'}: no recorded input sha256 to compare with"]
    now = cond_meta.get("inputs_sha256") or {}
    out = []
    for name in sorted(set(recorded) | set(now)):
        if recorded.get(name) != now.get(name):
            out.append(f"{name}: trained on sha256 {recorded.get(name) or 'absent'}, now {now.get(name) or 'absent'}")
    return out


def _check_out(out: Path, run: Path) -> None:
    """Never write evaluation files into a run directory (committed results stay as they were made)."""
    o, r = out.resolve(), run.resolve()
    if o == r or r in o.parents:
        raise ValueError(f"--out {out}: inside the run directory {run}; evaluations go to a folder of their own")
    probe = o
    while probe != probe.parent:
        if (probe / "config.json").is_file() and (probe / "manifest.json").is_file():
            raise ValueError(f"--out {out}: inside the run directory {probe}; evaluations go to a folder of their own")
        probe = probe.parent


def _leakage(split: str, n_train: int, n_all: int) -> list[str]:
    """The warning for evaluating a policy on queries it was trained on (``--split train|all``)."""
    if split == "test":
        return []
    n = n_train if split == "train" else n_all
    return [
        f"shortlist: warning: --split {split}: {n_train} of these {n} queries were used in training this "
        "policy, so its numbers on them are optimistic (leakage); the default --split test holds none"
    ]


def _recorded_condition(run: Path) -> dict:
    """The condition a run's manifest recorded (empty when there is none to read)."""
    try:
        recorded = json.loads((run / "manifest.json").read_text(encoding="utf-8")).get("condition")
    except (OSError, ValueError, AttributeError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def _own_run_condition(
    ea: EvaluateArgs, cfg: dict, ca: FolderArgs, run: Path
) -> tuple[Condition, str, list[str], dict]:
    """The condition of ``--run/--qrels``, which of its queries to evaluate, the console lines saying why, and the
    manifest's record of the policy's training queries among them (:func:`_training_record`).

    On the data the policy was trained on, the run's own split (its train fraction and split seed) and by default
    its test queries; training queries only with ``--split train|all``, and then with a warning. The data are the
    trained ones when the run and qrels contents are (by sha256), or when, split as the policy's data were, they
    give the same queries (by the recorded digest of the test split's query ids, and the same number of training
    queries: the same run gzipped, reordered or with other line ends, or another retriever's run of the same
    queries). On other data, :func:`_other_data`: by default every query but those whose ids the policy was trained
    on. ``--n-candidates`` unset: the N the policy was trained with on its own data (said), each query's run length
    on other data.
    """
    from benchmarks.trec import same_inputs
    from experiments.runner import get_condition

    trained = (cfg.get("options") or {}) if cfg.get("benchmark") == "run" else {}
    trained_n = int(trained["n_candidates"]) if trained.get("n_candidates") else None
    base = [o for o in source_options(SourceArgs(run=ea.run, qrels=ea.qrels)) if o[0] != "train_frac"]  # (hashed once)

    def condition(frac: float, n: int | None) -> Condition:  # (the options in source_options' order)
        options = (*base, *([("n_candidates", str(n))] if n is not None else []), ("train_frac", str(float(frac))))
        return get_condition("run", "run", "", cfg.get("split_seed", 0), ca.data_dir, ca.cache_dir, options)

    own_n = ea.n_candidates if ea.n_candidates is not None else trained_n  # the N trained with, on its own data
    frac = float(trained.get("train_frac") or DEFAULT_TRAIN_FRAC) if trained else DEFAULT_TRAIN_FRAC
    cond, how = None, "are the data this policy was trained on"
    same = same_inputs(trained, dict(base))
    if not same and trained:  # the same queries in another file? split them as the policy's were
        recorded = _recorded_condition(run)
        candidate = condition(frac, own_n)
        meta = candidate.meta
        if recorded.get("test_qids_sha256") and (meta.get("test_qids_sha256"), meta.get("n_train")) == (
            recorded["test_qids_sha256"], recorded.get("n_train")):  # fmt: skip
            same, cond = True, candidate
            how = ("hold the queries this policy was trained on (the same query ids, split as they were; the files "
                   "differ by sha256)")  # fmt: skip
    if same and ea.train_frac is not None and ea.train_frac != frac:
        raise ValueError(
            f"--train-frac {ea.train_frac}: the policy was trained on this run with train fraction {frac}; another "
            "split would put its training queries among the test queries (every query: --split all)"
        )
    if same:
        cond = cond or condition(frac, own_n)
        split = ea.split or "test"
        notes = [f"shortlist: note: {ea.run} and {ea.qrels} {how}: its split (train fraction {frac:g}), {split} "
                 "queries"]  # fmt: skip
        if own_n != ea.n_candidates:
            notes.append(f"shortlist: note: N = {own_n} candidates per query, as the policy was trained (its "
                         "--n-candidates); give --n-candidates to change it")  # fmt: skip
        record = _training_record([q.qid for q in cond.train], split == "test")
        return cond, split, notes + _leakage(split, len(cond.train), len(cond.queries)), record
    cond, split, notes, record = _other_data(ea, cfg, ca, run, condition(ea.train_frac or DEFAULT_TRAIN_FRAC,
                                                                           ea.n_candidates))  # fmt: skip
    if trained_n and ea.n_candidates is None:
        notes.append(f"shortlist: note: the policy was trained with N = {trained_n} candidates per query; here N is "
                     f"each query's run length (give --n-candidates {trained_n} to keep it)")  # fmt: skip
    return cond, split, notes, record


def _other_data(
    ea: EvaluateArgs, cfg: dict, ca: FolderArgs, run: Path, cond: Condition
) -> tuple[Condition, str, list[str], dict]:
    """:func:`_own_run_condition` on data other than the policy's own (other files, a subset or a superset of its
    queries, another retriever's run): the policy's training queries among them, by query id
    (:func:`_policy_training_qids`), are left out by default and are the ``--split train`` queries (``--split all``:
    every query, with the leakage warning); none among them: every query by default, and ``--train-frac`` splits
    them. Training queries that cannot be looked for are said, never assumed absent."""
    files = f"{ea.run} and {ea.qrels}"
    trained, why = _policy_training_qids(cfg, run, ca)
    if trained is None:
        split = ea.split or "all"
        level = "warning" if cfg.get("benchmark") else "note"  # (a run that recorded its data, unreadable now)
        return cond, split, [
            f"shortlist: {level}: {files}: whether they hold this policy's training queries cannot be checked "
            f"({why}), so none is left out: {'every query' if split == 'all' else f'the {split} split'} is evaluated"
        ], {"checked": False, "why": why}  # fmt: skip
    among = [q.qid for q in cond.queries if q.qid in trained]
    if not among:
        split = ea.split or "all"
        return cond, split, [
            f"shortlist: note: {files} are not the data this policy was trained on and share no query id with its "
            f"{len(trained)} training queries: {'every query' if split == 'all' else f'the {split} split'} is "
            "evaluated"
        ], _training_record([], False)  # fmt: skip
    if ea.train_frac is not None:
        raise ValueError(f"--train-frac {ea.train_frac}: {files} hold {len(among)} of this policy's training queries "
                         "(by query id), which make the split; drop --train-frac")  # fmt: skip
    split = ea.split or "test"
    cond = _split_on(cond, frozenset(among))
    if split == "test" and not cond.test:
        raise ValueError(f"--run {ea.run}: all {len(among)} of its judged queries trained this policy (by query "
                         "id): none is left to evaluate (--split train or all evaluates them, with a leakage "
                         "warning)")  # fmt: skip
    said = (f"those {len(among)} are left out, the other {len(cond.test)} evaluated (--split all to include them)"
            if split == "test" else f"--split {split} evaluates them")  # fmt: skip
    notes = [f"shortlist: note: {files} are not the data this policy was trained on (sha256 differ) but hold "
             f"{len(among)} of its {len(trained)} training queries (by query id): {said}"]  # fmt: skip
    return cond, split, notes + _leakage(split, len(among), len(cond.queries)), _training_record(among, split == "test")


def _policy_training_qids(cfg: dict, run: Path, ca: FolderArgs) -> tuple[frozenset[str] | None, str]:
    """The ids of the queries the policy was trained on, rebuilt from what its run directory recorded (config.json:
    the benchmark, scorer, variant, source options and split seed), and checked against its manifest.json (the same
    input sha256, the same digest of the test split's query ids and the same number of training queries); None and
    why when they cannot be (a policy saved from Python names no data; data moved, changed or unreadable since)."""
    from experiments.runner import get_condition

    if not cfg.get("benchmark"):
        return None, f"{run / 'config.json'} names no training data (a policy saved from Python)"
    recorded = _recorded_condition(run)
    if not recorded.get("test_qids_sha256"):
        return None, f"{run / 'manifest.json'}: no recorded split to check its data against"
    options = tuple(sorted((cfg.get("options") or {}).items()))
    args = (cfg["benchmark"], cfg.get("scorer", ""), cfg.get("variant", ""), cfg.get("split_seed", 0))
    try:
        cond = get_condition(*args, ca.data_dir, ca.cache_dir, options)
    except (OSError, ValueError, KeyError) as e:  # (moved, deleted or unreadable since)
        return None, f"its training data cannot be read: {e}"
    meta = cond.meta
    if (meta.get("inputs_sha256"), meta.get("test_qids_sha256"), meta.get("n_train")) != (
        recorded.get("inputs_sha256"), recorded["test_qids_sha256"], recorded.get("n_train")):  # fmt: skip
        return None, f"its training data differ by sha256 from those {run / 'manifest.json'} recorded"
    return frozenset(q.qid for q in cond.train), ""


def _split_on(cond: Condition, train: frozenset[str]) -> Condition:
    """``cond`` split into the queries whose ids are in ``train`` and the rest, its manifest record saying so."""
    import dataclasses

    import numpy as np

    from benchmarks.split import sha_lines

    inside = np.array([q.qid in train for q in cond.queries], dtype=bool)
    train_idx, test_idx = np.flatnonzero(inside).astype(np.int64), np.flatnonzero(~inside).astype(np.int64)
    meta = {**cond.meta, "train_frac": None, "split_rule": "the policy's training queries (by query id), the rest",
            "n_train": len(train_idx), "n_test": len(test_idx),
            "test_qids_sha256": sha_lines([cond.queries[i].qid for i in test_idx])}  # fmt: skip
    return dataclasses.replace(cond, train_idx=train_idx, test_idx=test_idx, meta=meta)


def _training_record(qids: list[str], left_out: bool) -> dict:
    """The manifest's record of the policy's training queries among the evaluated data: how many, whether they were
    left out (the default) or evaluated (``--split train|all``), their ids and the sha256 of the sorted ids."""
    from benchmarks.split import sha_lines

    ids = sorted(qids)
    return {"checked": True, "n": len(ids), "left_out": left_out and bool(ids), "qids_sha256": sha_lines(ids),
            "qids": ids}  # fmt: skip


def _refuse_a_manifest(out: Path, command: str) -> None:
    """``shortlist train`` writes its tables into ``--out`` with no manifest: a folder with one holds another
    command's results (a study, a comparison, an evaluation), which its tables would replace."""
    path = out / "manifest.json"
    if not path.is_file():
        return
    try:
        made = json.loads(path.read_text(encoding="utf-8")).get("command", "another command")
    except (OSError, ValueError, AttributeError):
        made = "another command"
    raise ValueError(f"--out {out}: holds the results of `{made}`, which `shortlist {command}`'s tables would "
                     "replace; give another --out (it is left as it is)")  # fmt: skip


def _check_own_out(out: Path, run: Path, condition: dict, split: str) -> None:
    """Never replace an evaluation made from other inputs: ``--out`` may hold this one only (the same run, the same
    data, by the condition its manifest recorded, and the same split), rewritten; never another command's tables
    (a train folder's, which have no manifest, or a study's)."""
    try:
        there = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        if (out / "summary.csv").is_file() or (out / "runs").is_dir():
            raise ValueError(
                f"--out {out}: holds the tables of `shortlist train` (summary.csv, runs/), which this "
                "evaluation's would replace; give another --out (it is left as it is)"
            ) from None
        return
    except (OSError, ValueError) as e:
        raise ValueError(f"--out {out}: holds a manifest.json that cannot be read ({e}); give another --out") from e
    if "pipeline" in there or "run_dir" not in there:
        raise ValueError(f"--out {out}: holds the results of `{there.get('command', 'another command')}`, not an "
                         "evaluation; give another --out (it is left as it is)")  # fmt: skip
    if (there.get("run_dir"), there.get("condition"), there.get("split")) != (str(run.resolve()), condition, split):
        recorded = there.get("condition") or {}
        data = ", ".join(sorted(recorded.get("inputs_sha256") or {})) or recorded.get("benchmark")
        raise ValueError(
            f"--out {out}: holds another evaluation (run {there.get('run_dir')}, data {data}, split "
            f"{there.get('split')}); give another --out (this one is left as it is)"
        )


def cmd_evaluate(ea: EvaluateArgs, ca: FolderArgs, command: str) -> int:
    """Evaluate a trained run's policy: on its own test split, another scorer or benchmark, or your run + qrels.

    Writes per_query.csv, summary.csv (this evaluation only: rewritten each time), buckets.csv and
    manifest.json to ``--out`` (default ``evaluations/<run_id>/<condition>-<split>``).
    """
    from agents import bucket_table, summarise
    from agents.trained import load_run_policy, read_run_config
    from envs import EpisodeConfig
    from experiments.config import read_cell_config
    from experiments.runner import get_condition, labelled_rows

    run = Path(ea.run_dir)
    if ea.run:  # your own data: the policy alone is needed (one saved from Python names no condition)
        cfg = read_run_config(run)
    else:
        try:
            cfg = read_cell_config(run)
        except ValueError as e:
            if "missing" not in str(e):
                raise
            raise ValueError(f"{e}; a policy saved from Python names no data of its own: evaluate it on yours with "
                             "--run RUN --qrels QRELS") from e  # fmt: skip
    policy = load_run_policy(run, cfg)
    episode = EpisodeConfig(**cfg["episode"])
    training: dict
    if ea.run:
        cond, split, notes, training = _own_run_condition(ea, cfg, ca, run)
        changes: list[str] = []
    else:
        benchmark = ea.benchmark or cfg["benchmark"]
        scorer = ea.scorer or cfg["scorer"]
        same = benchmark == cfg["benchmark"]
        variant = ea.variant if ea.variant is not None else (cfg.get("variant", "") if same else "")
        options = tuple(sorted((cfg.get("options") or {}).items())) if same else ()
        cond = get_condition(benchmark, scorer, variant, cfg.get("split_seed", 0), ca.data_dir, ca.cache_dir, options)
        split = ea.split or "test"
        own = same and variant == cfg.get("variant", "")
        changes = _input_changes(run, cond.meta) if own else []
        notes = _leakage(split, len(cond.train), len(cond.queries)) if own else []
        training = {}  # (the run's own split: its manifest records it)
    target = _study_step_cost(cond.name)
    if target is not None and not math.isclose(target, episode.step_cost):
        notes.append(f"shortlist: note: the net reward charges the run's step cost {episode.step_cost:g} per extra "
                     f"item (as it was trained); the study judges {cond.name} at {target:g}")  # fmt: skip
    for line in changes:
        print(f"shortlist: note: the inputs differ from the run's: {line}", file=sys.stderr)
    for line in notes:
        print(line, file=sys.stderr)
    queries = {"test": cond.test, "train": cond.train, "all": cond.queries}[split]
    if cond.meta.get("benchmark") in ("run", "beir"):
        _print_data_notes(cond.meta, len(queries), split)
    out = Path(ea.out) if ea.out else Path("evaluations") / run.name / f"{cond.name}-{split}"
    _check_out(out, run)
    condition = {k: v for k, v in cond.meta.items() if not k.startswith("seconds") and k != "score_cache_hit"}
    _check_own_out(out, run, json.loads(json.dumps(condition, default=str)), split)
    labels = {"condition": cond.name, "method": cfg["method"], "seed": cfg.get("seed", 0)}
    buckets = cfg.get("buckets") or cond.buckets  # the run's own --buckets, when it was trained with one
    rows = labelled_rows(policy, queries, episode, buckets, **labels)
    summary = summarise(rows)
    write_tables(out, {"per_query.csv": rows, "summary.csv": summary, "buckets.csv": bucket_table(rows)})
    write_manifest(
        out / "manifest.json",
        command=command,
        run_dir=str(run.resolve()),
        method=cfg["method"],
        split=split,
        condition=condition,
        input_changes=changes,
        step_cost=episode.step_cost,
        buckets=buckets,
        **({"training_queries": training} if training else {}),
    )
    print(summary.to_string(index=False, float_format=lambda x: f"{x:.2f}", na_rep="n/a"))
    print(f"wrote {out}")
    return 0


def _study_step_cost(condition: str) -> float | None:
    """The step cost the study judges ``condition`` at (its plan's), None for a condition outside the study."""
    from experiments.plan import PLANS

    plan = PLANS.get(condition)
    return None if plan is None else float(plan.episode.step_cost)


def _predict_record(out: Path) -> Path:
    """The manifest ``shortlist predict`` writes beside a truncated run, ``<out>.json``: which policy wrote it (its
    :func:`servers.policy_id`, method and run directory), from which run, with which N and tag."""
    return out.with_name(f"{out.name}.json")


def _check_predict_out(out: Path, given: bool, pid: str) -> None:
    """Never replace a truncated run another policy wrote: an existing output is rewritten only when its
    :func:`_predict_record` names this policy (a rerun); otherwise (another policy's, or a file no record says this
    policy wrote) a one-line error naming it, and the file is left as it is."""
    if not out.exists():
        return
    where, record = f"--out {out}" if given else str(out), _predict_record(out)
    try:
        there = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        there = None
    if not isinstance(there, dict) or not there.get("policy_id"):
        raise ValueError(f"{where}: exists, and no {record} says this policy wrote it; give another --out or remove "
                         "it (it is left as it is)")  # fmt: skip
    if there["policy_id"] != pid:
        raise ValueError(f"{where}: holds the run of another policy ({there.get('method')}, id {there['policy_id']}, "
                         f"run dir {there.get('run_dir')}); give another --out or remove it (it is left as it "
                         "is)")  # fmt: skip


def cmd_predict(pa: PredictArgs, command: str) -> int:
    """Truncate a TREC run at each query's chosen depth (streamed: memory bounded by one query).

    Writes ``--out`` (default ``<run stem>.<method>.<policy id>.trec`` here, so two policies of one method never
    share a default name) and :func:`_predict_record` beside it; an existing output is replaced only when its record
    names this policy (:func:`_check_predict_out`).
    """
    from agents.trained import load_policy
    from benchmarks.corpus import STDIN, DataError
    from benchmarks.trec import truncate_run
    from servers import policy_id

    policy = load_policy(pa.run_dir)
    pid = policy_id(policy)
    stdin = pa.run == STDIN  # `--run -`: the run comes on the standard input, streamed as a file is
    out = Path(pa.out) if pa.out else Path(f"{'stdin' if stdin else Path(pa.run).stem}.{policy.method}.{pid}.trec")
    if not stdin and out.resolve() == Path(pa.run).resolve():
        raise ValueError(f"--out {out}: would overwrite the input run")
    if not stdin and _predict_record(out).resolve() == Path(pa.run).resolve():
        raise ValueError(f"--out {out}: its record {_predict_record(out)} would overwrite the input run")
    if not stdin and Path(pa.run).is_dir():
        raise ValueError(f"--run {pa.run}: is a folder; give the run file (or - to read it from the standard input)")
    if not stdin and not Path(pa.run).is_file():
        raise FileNotFoundError(f"--run {pa.run}: no such file (give - to read the run from the standard input)")
    _check_predict_out(out, bool(pa.out), pid)
    tag = pa.tag or f"shortlist-{policy.method}"
    n = pa.n_candidates
    trained_n = (policy.config.get("options") or {}).get("n_candidates")
    if n is None and trained_n:  # the N the policy was trained with: its depths are for lists of that pool
        n = int(trained_n)
        print(f"shortlist: note: N = {n} candidates per query, as the policy was trained (its --n-candidates); "
              "give --n-candidates to change it", file=sys.stderr)  # fmt: skip
    where = "stdin" if stdin else pa.run

    def depth(qid: str, scores: NDArray[np.float64]) -> int:
        try:
            return policy.depth(scores, n)
        except ValueError as e:  # (the policy's message names a list of its own: name the query and the file)
            said = str(e).split(": ", 1)[1] if str(e).startswith("query ") else str(e)
            flag = " (--n-candidates)" if n is not None and "n_candidates" in said else ""
            raise DataError(f"{where}: query {qid!r}: {said}{flag}") from e

    try:
        written = truncate_run(pa.run, out, depth, tag)
    except DataError as e:  # name the standard input as such, not as a file called "-"
        raise DataError(f"stdin{str(e)[1:]}" if stdin and str(e).startswith(f"{STDIN}:") else str(e)) from e
    write_manifest(
        _predict_record(out),
        command=command,
        policy_id=pid,
        method=policy.method,
        run_dir=str(Path(pa.run_dir).resolve()),
        run=STDIN if stdin else str(Path(pa.run).resolve()),
        n_candidates=n,
        tag=tag,
        n_queries=written.n_queries,
        n_docs=written.n_docs,
    )
    print(f"wrote {out}: {written.n_queries} queries, {written.n_docs} shortlisted documents (tag {tag}), and "
          f"{_predict_record(out).name} (policy {pid})")  # fmt: skip
    return 0


def cmd_data_list(da: DataListArgs) -> int:
    """Each dataset file: where it is, present, verified."""
    from benchmarks import data

    rows = data.status(da.data_dir, da.cache_dir)
    print(f"data dir: {data.resolve_data_dir(da.data_dir)}")
    for r in rows:
        state = "verified" if r.verified else ("PRESENT, sha256 MISMATCH" if r.present else "missing")
        print(f"{r.dataset:10s} {state:26s} {r.path}")
    return 0


def cmd_data_fetch(da: DataFetchArgs) -> int:
    """Download (pinned commit) and verify one dataset's files."""
    from benchmarks import data

    for p in data.fetch(da.name, da.data_dir, cache_dir=da.cache_dir):
        print(f"verified {p}")
    return 0
