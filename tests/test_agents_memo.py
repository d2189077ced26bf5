"""Fits shared between cells (agents/memo.py): the P(found) stop reuses the cut-off's stored network instead of
training it again, with the very same result as its own fit; the store's keys name everything the fit reads; a
damaged store is an error naming the file; the runner runs the reusing cells after the fits they reuse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import stepped_lists

from agents.cutoff import CutoffConfig, ExpectedRewardCutoff
from agents.memo import FitMemo, active_fit_memo, fit_memo, fitted_once
from agents.pfound import PFoundStop
from benchmarks.atomic import FILE_MODE
from envs import EpisodeConfig


def test_keys_name_the_salt_and_every_part(tmp_path: Path) -> None:
    memo = FitMemo(tmp_path, "code-a")
    base = memo.key("net", b"\x00\x01")
    assert base == FitMemo(tmp_path / "elsewhere", "code-a").key("net", b"\x00\x01")  # the folder is not in it
    assert len({base, FitMemo(tmp_path, "code-b").key("net", b"\x00\x01"), memo.key("net", b"\x00\x02"),
                memo.key("net", b"\x00", b"\x01"), memo.key("ne", b"t\x00\x01")}) == 5  # fmt: skip
    assert memo.load(base) is None
    memo.store(base, {"w": torch.arange(3.0), "loss": torch.tensor(0.5)})
    back = memo.load(base)
    assert back is not None and torch.equal(back["w"], torch.arange(3.0)) and float(back["loss"]) == 0.5
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{base}.pt"]  # no temporary left behind
    assert memo.path(base).stat().st_mode & 0o777 == FILE_MODE  # the project's atomic writer: ordinary permissions
    memo.path(base).write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match=f"{base}.pt: unreadable fitted network"):
        memo.load(base)


def test_blocks_nest_and_none_turns_the_memo_off(tmp_path: Path) -> None:
    assert active_fit_memo() is None
    never = lambda: pytest.fail("outside a memo nothing is keyed")  # noqa: E731
    assert fitted_once(never, lambda: {"w": torch.ones(1)})["w"].item() == 1.0
    assert not any(tmp_path.iterdir())
    with fit_memo(tmp_path, "s") as outer:
        assert active_fit_memo() is outer
        with fit_memo(None, "s"):
            assert active_fit_memo() is None
        assert active_fit_memo() is outer
    assert active_fit_memo() is None


def test_the_pfound_stop_reuses_the_cutoffs_network_with_the_same_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    qs = stepped_lists(2)
    cfg = EpisodeConfig(step_cost=0.02)
    settings = CutoffConfig(epochs=40)
    alone = PFoundStop("bor", settings).fit(qs, cfg, 3)  # no memo: its own fit
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
    with fit_memo(tmp_path / "fits", "code"):
        cutoff = ExpectedRewardCutoff("bor", settings).fit(qs, cfg, 3)
        (stored,) = (tmp_path / "fits").iterdir()
        with monkeypatch.context() as m:  # a hit trains nothing
            m.setattr(torch.optim, "Adam", lambda *a, **k: pytest.fail("the stored network was trained again"))
            shared = PFoundStop("bor", settings).fit(list(reversed(qs)), cfg, 3)
        assert [p.name for p in (tmp_path / "fits").iterdir()] == [stored.name]
        PFoundStop("bor", settings).fit(qs, cfg, 4)  # another seed is another network
        PFoundStop("bor", CutoffConfig(epochs=41)).fit(qs, cfg, 3)  # and other settings another
        assert len(list((tmp_path / "fits").iterdir())) == 3
    for a, b, c in zip(alone.net.parameters(), shared.net.parameters(), cutoff.net.parameters(), strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)
    assert shared.level == alone.level and shared.final_loss == alone.final_loss
    np.testing.assert_array_equal(shared.depths(qs, cfg), alone.depths(qs, cfg))
    shared.save(tmp_path / "shared.json")
    alone.save(tmp_path / "alone.json")
    assert json.loads((tmp_path / "shared.json").read_text()) == json.loads((tmp_path / "alone.json").read_text())


def test_the_runner_runs_the_reusing_cells_last_and_their_runs_match_a_fit_alone(
    tmp_path: Path, shared_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pfound listed first still runs after the cut-off and loads its network (one stored network per split); its
    run's tables and agent are those of the pfound cell run on its own, with nothing stored."""
    import experiments.runner as runner
    from agents.method import MethodSpec
    from experiments.plan import PLANS, Learning, cells_for

    learning = Learning(settings={"cutoff": CutoffConfig(epochs=20), "pfound": CutoffConfig(epochs=20)},
                        split_seeds=(0, 1))  # fmt: skip
    specs = {"bfcl-bm25": [MethodSpec("pfound", "bor"), MethodSpec("cutoff", "bor")]}
    cells = cells_for([PLANS["bfcl-bm25"]], (7,), specs, learning=learning)
    assert [c.method.kind.name for c in cells] == ["pfound", "pfound", "cutoff", "cutoff"]
    loads: list[tuple[str, bool]] = []
    real = FitMemo.load

    def logged(self: FitMemo, key: str) -> dict | None:
        out = real(self, key)
        loads.append((key, out is not None))
        return out

    monkeypatch.setattr(FitMemo, "load", logged)
    monkeypatch.setattr(runner, "code_fingerprint", lambda: "a code of this test's own")  # a store of its own
    where: dict[str, Any] = {"data_dir": None, "cache_dir": str(shared_cache), "command": "t", "progress": False}
    made = runner.run_cells(cells, tmp_path / "o", **where)
    assert [hit for _, hit in loads] == [False, False, True, True]  # the two cut-offs store, the two stops load
    assert {p.name for p in (tmp_path / "o" / "runs").iterdir()} == {c.run_id for c in cells}  # runs only
    stored = {key for key, _ in loads}
    assert {p.stem for p in (shared_cache / runner.FIT_MEMO).glob("*.pt")} >= stored and len(stored) == 2
    monkeypatch.setattr(runner, "code_fingerprint", lambda: "another code")  # nothing stored for it: own fits
    stops = [c for c in cells if c.method.kind.name == "pfound"]
    alone = runner.run_cells(stops, tmp_path / "a", **where)
    assert [hit for _, hit in loads[4:]] == [False, False]
    for a in alone:
        (shared,) = [p for p in made if p.name == a.name]
        for f in ("per_query.csv", "summary.csv", "buckets.csv", "agent.json"):
            assert (shared / f).read_bytes() == (a / f).read_bytes(), f


def test_the_kind_says_whose_fit_it_shares(capsys: pytest.CaptureFixture[str]) -> None:
    from agents import registry
    from experiments.cli import main

    assert registry.KINDS["pfound"].shares_fit == "cutoff" and registry.KINDS["cutoff"].shares_fit == ""
    assert main(["kinds", "pfound"]) == 0
    assert "shares its fitted network with cutoff" in capsys.readouterr().out
    assert main(["kinds", "cutoff"]) == 0
    assert "shares its fitted network" not in capsys.readouterr().out
    with pytest.raises(ValueError, match="shares_fit names no registered kind: 'nothing'"):
        registry.register("x-share", lambda r, s: None, group="peer", stochastic=False, uses_reward=False,
                          description="x", shares_fit="nothing")  # fmt: skip
    assert "x-share" not in registry.KINDS
