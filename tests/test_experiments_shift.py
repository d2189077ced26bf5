"""``shortlist shift``: trained runs evaluated unchanged under scorer, benchmark and query shift.

The study shifted here (``shifted``) goes onto every target of bfcl-bm25 but ToolBench's: ToolBench's
candidate sets need MiniLM embeddings of all 3,406 of its tools (minutes on 2 cores). The slow test at the
end shifts the same runs onto the real target list and checks that the six shared targets give the same
rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.corpus import sha256_file
from experiments import shift as shift_module
from experiments.cli import main
from experiments.shift import shift_targets

#: The targets the default suite shifts onto (see the module docstring).
TARGETS = [(kind, target) for kind, target in shift_targets("bfcl-bm25") if not target.startswith("toolbench-")]
METHODS = ("bor-tabular", "bor-cutoff", "gap", "bor-threshold")


def test_shift_targets_per_source() -> None:
    assert shift_targets("bfcl-bm25") == [
        ("none", "bfcl-bm25"),
        ("scorer", "bfcl-minilm"),
        ("benchmark", "metatool-bm25"),
        ("benchmark", "toolbench-bm25"),
        ("query", "bfcl-bm25-qnotools"),
        ("query", "bfcl-bm25-qtrunc20"),
        ("query", "bfcl-bm25-qdrop30"),
    ]
    for bad in ("bfcl-bm25-hybrid", "synthetic-gen-n100", "bfcl-fused"):
        with pytest.raises(ValueError, match="shift source"):
            shift_targets(bad)


def shift_cmd(runs: Path, out: Path, cache: Path, *extra: str) -> list[str]:
    return ["shift", "--only", "bfcl-bm25", "--runs-dir", str(runs), "--out", str(out), "--cache-dir", str(cache),
            *extra]  # fmt: skip


@pytest.fixture(scope="module")
def shifted(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("shift")
    out = root / "study"
    agents = (["tabular", "--set", "tabular.episodes=300"], ["cutoff", "--set", "cutoff.epochs=10"], ["gap"],
              ["threshold"])  # fmt: skip
    for agent in agents:
        argv = ["train", "--agent", *agent, "--seeds", "3", "--out", str(out), "--cache-dir", str(shared_cache)]
        assert main(argv) == 0
    res = root / "shift"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(shift_module, "shift_targets", lambda source: TARGETS if source == "bfcl-bm25" else [])
        assert main(shift_cmd(out / "runs", res, shared_cache, "--methods", "all")) == 0
    return out, res


def test_shift_rows_cover_every_target_and_none_reproduces_the_runs(shifted: tuple[Path, Path]) -> None:
    study, res = shifted
    pq = pd.read_csv(res / "per_query.csv", dtype={"qid": str})
    assert set(pq["target"]) == {t for _, t in TARGETS} and len(TARGETS) == 6
    assert set(pq["method"]) == set(METHODS)
    for method in ("bor-tabular", "bor-cutoff", "gap"):
        own = pd.read_csv(study / "runs" / f"bfcl-bm25__{method}__s3" / "per_query.csv", dtype={"qid": str})
        none = pq[(pq["shift"] == "none") & (pq["method"] == method)].set_index("qid")
        assert sorted(none.index) == sorted(own["qid"])
        none = none.loc[own["qid"]]
        assert none["k"].tolist() == own["k"].tolist()
        assert none["reward"].tolist() == pytest.approx(own["reward"].tolist())
    q = pq[pq["target"] == "metatool-bm25"]
    assert (q["n"] == 100).all() and q["qid"].str.startswith("metatool").all()  # the target's own test split


def test_shift_report_compares_the_best_agent_with_the_gap_rule(shifted: tuple[Path, Path]) -> None:
    study, res = shifted
    vg = pd.read_csv(res / "versus_gap.csv")
    agg = pd.read_csv(res / "aggregate.csv")
    assert len(vg) == len(TARGETS) and set(vg["shift"]) == {"none", "scorer", "benchmark", "query"}
    for _, r in vg.iterrows():
        a = agg[agg["condition"] == f"{r['source']}@{r['target']}"].set_index("method")
        assert r["best_agent"] == max(("bor-tabular", "bor-cutoff"), key=lambda m: a.loc[m, "mean_reward_net"])
        assert r["gap_mean_reward_net"] == pytest.approx(a.loc["gap", "mean_reward_net"])
        assert r["diff_lo"] <= r["diff"] <= r["diff_hi"]
        assert bool(r["at_least_gap"]) == bool(r["mean_reward_net"] >= r["gap_mean_reward_net"])
    readme = (res / "README.md").read_text()
    vp = pd.read_csv(res / "versus_peers.csv")  # the fitted peer (bor-threshold) under every shift, as the gap rule
    assert len(vp) == len(TARGETS) and set(vp["peer"]) == {"bor-threshold"}
    for _, r in vp.iterrows():
        a = agg[agg["condition"] == f"{r['source']}@{r['target']}"].set_index("method")
        assert r["peer_mean_reward_net"] == pytest.approx(a.loc["bor-threshold", "mean_reward_net"])
        assert bool(r["at_least_peer"]) == bool(r["mean_reward_net"] >= r["peer_mean_reward_net"])
        assert r["diff_lo"] <= r["diff"] <= r["diff_hi"]
    own = vp[vp["shift"] == "none"].iloc[0]  # every row carries the source's own-test comparison with its peer
    assert (vp["own_diff"] == own["diff"]).all() and (vp["own_best_agent"] == own["best_agent"]).all()
    transfer = pd.read_csv(res / "transfer.csv")  # one source: no target was trained on, nothing to compare with
    assert transfer.empty and "diff_lo" in transfer.columns
    assert "## What moving a policy costs" in readme and "Nothing to compare" in readme
    met = int(vp[vp["shift"] != "none"]["at_least_peer"].sum())
    assert "**Against every fitted peer.**" in readme
    assert f"Met on {met} of {len(TARGETS) - 1} (source, shifted target)" in readme
    assert (
        "## Against the largest-gap rule" in readme
        and f"of {len(TARGETS) - 1} (source, shifted target) pairs" in readme
    )
    man = json.loads((res / "manifest.json").read_text())
    assert man["sources"] == ["bfcl-bm25"] and man["n_runs"] == len(METHODS) * len(TARGETS)
    index = pd.read_csv(res / "runs.csv")  # the evaluated runs, with the sha256 of their own tables
    assert sorted(index["run_id"]) == sorted(man["runs"]) == sorted(f"bfcl-bm25__{m}__s3" for m in METHODS)
    run = index.set_index("run_id").loc["bfcl-bm25__gap__s3"]
    assert run["sha256_per_query"] == sha256_file(str(study / "runs" / "bfcl-bm25__gap__s3" / "per_query.csv"))


def test_shift_refuses_missing_runs(tmp_path: Path) -> None:
    assert main(["shift", "--runs-dir", str(tmp_path / "none"), "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()


def test_shift_builds_the_untrained_gap_rule_when_no_run_has_it(
    shifted: tuple[Path, Path], tmp_path: Path, shared_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    study, res = shifted
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copytree(study / "runs" / "bfcl-bm25__bor-tabular__s3", runs / "bfcl-bm25__bor-tabular__s3")
    out = tmp_path / "shift"
    monkeypatch.setattr(shift_module, "shift_targets", lambda source: TARGETS if source == "bfcl-bm25" else [])
    assert main(shift_cmd(runs, out, shared_cache)) == 0
    pq = pd.read_csv(out / "per_query.csv", dtype={"qid": str})
    assert set(pq["method"]) == {"bor-tabular", "gap"}
    full = pd.read_csv(res / "per_query.csv", dtype={"qid": str})
    keys = ["target", "qid"]
    built = pq[pq["method"] == "gap"].set_index(keys)["k"].sort_index()
    trained = full[full["method"] == "gap"].set_index(keys)["k"].sort_index()
    assert built.equals(trained)  # the same depths as the gap run of the study


def test_shift_leaves_out_learners_on_a_named_observation_set(tmp_path: Path) -> None:
    """A strict comparison's runs (``bor-tabular@strict``) sit in the same runs folder under the same
    method name; shift evaluates the default runs only, never both as one method."""
    from experiments.shift import shifted_runs

    for run_id, obs in (("bfcl-bm25__bor-tabular__s3", "auto"), ("bfcl-bm25__bor-tabular@strict__s3", "strict")):
        fake_run(tmp_path / run_id, obs)
    groups = shifted_runs(tmp_path, ("bfcl-bm25",))
    assert [run.name for run, _ in groups[("bfcl-bm25", 0)]] == ["bfcl-bm25__bor-tabular__s3"]


def fake_run(folder: Path, observation: str = "auto", fingerprint: str | None = None) -> None:
    """A run directory's config and manifest (what :func:`shifted_runs` reads), made by the current
    code unless ``fingerprint`` names another."""
    from experiments.io import code_fingerprint

    folder.mkdir()
    cfg = {"condition": "bfcl-bm25", "method": "bor-tabular", "seed": 3, "split_seed": 0, "episode": {}}
    cfg["episode"] = {"observation": observation, "step_cost": 0.01, "gamma": 0.99}
    extra = {"benchmark": "bfcl", "scorer": "bm25", "agent": "tabular", "train_reward": "bor"}
    (folder / "config.json").write_text(json.dumps({**cfg, **extra}))
    (folder / "manifest.json").write_text(json.dumps({"code_fingerprint": fingerprint or code_fingerprint()}))


def test_shift_passes_over_runs_made_by_other_code(tmp_path: Path) -> None:
    """A stale run (another code fingerprint) left in a shared runs folder is never shifted beside
    current ones; when no run is current the error says why."""
    from experiments.shift import shifted_runs

    fake_run(tmp_path / "bfcl-bm25__bor-tabular__s3")
    fake_run(tmp_path / "bfcl-bm25__bor-tabular__s3__split1", fingerprint="0" * 64)
    groups = shifted_runs(tmp_path, ("bfcl-bm25",))
    assert [run.name for run, _ in groups[("bfcl-bm25", 0)]] == ["bfcl-bm25__bor-tabular__s3"]
    (tmp_path / "bfcl-bm25__bor-tabular__s3" / "manifest.json").unlink()  # unreadable: not current either
    with pytest.raises(ValueError, match="2 made by other code"):
        shifted_runs(tmp_path, ("bfcl-bm25",))


@pytest.mark.slow
def test_shift_onto_the_real_targets_toolbench_included(shifted: tuple[Path, Path], shared_cache: Path) -> None:
    """The same runs shifted onto bfcl-bm25's real target list (ToolBench's main condition included):
    every target is covered, and the six targets of the default suite give the very rows it checked."""
    study, res = shifted
    full = study.parent / "shift-full"
    assert main(shift_cmd(study / "runs", full, shared_cache, "--methods", "all")) == 0
    pq = pd.read_csv(full / "per_query.csv", dtype={"qid": str})
    targets = shift_targets("bfcl-bm25")
    assert set(pq["target"]) == {t for _, t in targets} and len(targets) == 7
    assert ("benchmark", "toolbench-bm25") in targets
    assert set(pq["method"]) == set(METHODS)
    tb = pq[pq["target"] == "toolbench-bm25"]
    assert (tb["n"] == 50).all() and tb["qid"].str.startswith("G1_").all() and len(tb) == len(METHODS) * 142
    shared = pq[pq["target"] != "toolbench-bm25"].reset_index(drop=True)
    pd.testing.assert_frame_equal(shared, pd.read_csv(res / "per_query.csv", dtype={"qid": str}))
    assert len(pd.read_csv(full / "versus_gap.csv")) == 7
    man = json.loads((full / "manifest.json").read_text())
    assert man["n_runs"] == len(METHODS) * 7 and man["targets"]["bfcl-bm25"] == [t for _, t in targets]
    assert "of 6 (source, shifted target) pairs" in (full / "README.md").read_text()


def test_shift_builds_each_target_once_for_the_sources_that_share_it(
    shifted: tuple[Path, Path], shared_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sources shifting onto the same targets on the same split: each (target, split) condition is built once
    and both sources get the same rows (sources of one benchmark share every target but their own)."""
    from experiments.options import FolderArgs
    from experiments.shift import shift_rows, shifted_runs

    study, _ = shifted
    (key, runs), *_ = shifted_runs(study / "runs", ("bfcl-bm25",), ("all",)).items()
    built: list[tuple[str, str, str, int]] = []
    real = shift_module.get_condition

    def counted(benchmark: str, scorer: str, variant: str, split: int, *args: object) -> object:
        built.append((benchmark, scorer, variant, split))
        return real(benchmark, scorer, variant, split, *args)

    monkeypatch.setattr(shift_module, "get_condition", counted)
    monkeypatch.setattr(shift_module, "shift_targets", lambda source: TARGETS[:2])
    groups = {("bfcl-bm25", key[1]): runs, ("bfcl-minilm", key[1]): runs}
    pq = shift_rows(groups, FolderArgs(cache_dir=str(shared_cache)))
    assert sorted(built) == sorted({(t.split("-")[0], t.split("-")[1], "", key[1]) for _, t in TARGETS[:2]})
    assert len(built) == 2
    a, b = (pq[pq["source"] == s].drop(columns=["condition", "source"]).reset_index(drop=True)
            for s in ("bfcl-bm25", "bfcl-minilm"))  # fmt: skip
    pd.testing.assert_frame_equal(a, b)
