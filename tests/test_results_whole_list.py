"""No learned policy shows the whole candidate list, in-domain or under shift, in the committed results.

Reads the aggregate tables that ``shortlist reproduce`` (the full study, results/), ``shortlist
compare`` (results/peers, results/peers-topn and, on the strict observation set, results/strict),
the README main job (results/bfcl) and ``shortlist shift`` (results/shift) wrote (every folder that
commits a manifest and an aggregate.csv), and checks that every learned method
(registry group ``agent``: DQN, tabular Q, the expected-reward cut-off, any reward, any observation
set) has a whole-list rate (K = N) of exactly 0 on every condition, shifted or not. Each table must
come from a commit that has the break-even bound (so an old table cannot pass by accident) and
carry the ``break_even_pct`` column that reports how often the bound decided.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from agents.method import method_group

REPO = Path(__file__).resolve().parents[1]
#: The commit that introduced the break-even bound of the learned agents.
BOUND_COMMIT = "ad2d1a0b"
#: Folders that must be among those read (the study, compare, strict, main job and shift reports).
REQUIRED = ("results", "results/peers", "results/strict", "results/bfcl", "results/shift")


def _committed_tables() -> tuple[str, ...]:
    """Every results folder that commits both a manifest and an aggregate table, so a new report
    folder (e.g. results/peers-topn) is read without being listed here."""
    ls = subprocess.run(["git", "ls-files", "results"], cwd=REPO, capture_output=True, text=True, check=False)
    tracked = set(ls.stdout.split())
    folders = {str(Path(p).parent) for p in tracked if Path(p).name == "aggregate.csv"}
    return tuple(sorted(f for f in folders if f"{f}/manifest.json" in tracked))


TABLES = _committed_tables()


def _is_ancestor(old: str, new: str) -> bool:
    return (
        subprocess.run(
            ["git", "merge-base", "--is-ancestor", old, new], cwd=REPO, capture_output=True, check=False
        ).returncode
        == 0
    )


def test_every_report_folder_is_read() -> None:
    missing = sorted(set(REQUIRED) - set(TABLES))
    assert not missing, f"not committed with a manifest and aggregate.csv (or not a git checkout): {missing}"


@pytest.mark.parametrize("folder", TABLES)
def test_no_learned_policy_shows_the_whole_list(folder: str) -> None:
    manifest = json.loads((REPO / folder / "manifest.json").read_text(encoding="utf-8"))
    commit = manifest["git_sha"]
    assert not manifest["git_dirty"], f"{folder} was made from a dirty tree"
    assert _is_ancestor(BOUND_COMMIT, commit), f"{folder} was made at {commit}, before the break-even bound"
    agg = pd.read_csv(REPO / folder / "aggregate.csv")
    learned = agg[[method_group(m) == "agent" for m in agg["method"]]]
    assert len(learned) > 0, f"{folder}: no learned method in aggregate.csv"
    assert "break_even_pct" in agg.columns, f"{folder}: aggregate.csv predates the break_even_pct column"
    shown = learned[learned["whole_list_pct"] > 0]
    assert shown.empty, f"{folder}: whole-list episodes of learned policies:\n" + shown[
        ["condition", "method", "whole_list_pct"]
    ].to_string(index=False)
