"""What making a results folder's runs cost, kept when its report is remade from those runs.

A ``reproduce`` or ``compare`` run again on finished runs (to remake a report after a change to the report code)
runs none of them. Its manifest then carries the invocation that did as ``produced_by`` (:func:`produced_by`), and
the readers of a manifest's times (``shortlist bench``, the overview's list of parts) take them from it
(:func:`carried`), so what the results cost to compute is not lost and never borrowed by other runs or code.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.io import FLOAT_FORMAT, code_fingerprint

PRODUCED_BY = ("command", "cells_run", "runs_reused", "runs_folder", "timings_seconds", "git_sha", "git_dirty",
               "code_fingerprint", "finished_utc", "machine")  # fmt: skip
"""The fields of a folder's manifest that say what making its runs cost, carried as ``produced_by``."""


def produced_by(out: Path, there: Mapping[str, Any] | None, index: pd.DataFrame, ran: int | None) -> dict | None:
    """What making the runs of a rerun that ran none of them cost: the :data:`PRODUCED_BY` fields of the invocation
    that ran them (``cells_run`` above 0), from ``there``, the manifest the folder ``out`` holds (its own fields, or
    the ``produced_by`` it carries), recorded in the new manifest as ``produced_by``; None when this invocation ran
    some of its runs (its own times say it) or does not count them (``ran`` None: ``shortlist shift`` evaluates
    every time).

    ``there`` is the folder's manifest as :func:`experiments.pipeline.check_out_is_ours` read it (this command's,
    or None when the folder has none). Carried only when the runs are the ones that invocation made: ``there`` was
    written at this code fingerprint (the code of the cells, :func:`experiments.io.code_fingerprint`; the report's own
    code may differ, which is what a rerun is for), and the folder's ``runs.csv`` equals ``index`` (this
    invocation's run index: the same runs, their config hashes, score digests and table hashes) on every column but
    ``float_path`` (the rerun may be on another machine; the record keeps the one the runs were made on). So a folder
    whose runs or cell code changed never borrows a time it did not pay."""
    if ran != 0 or index.empty or there is None or there.get("code_fingerprint") != code_fingerprint():
        return None
    try:
        before = pd.read_csv(out / "runs.csv", dtype=str, keep_default_na=False)
    except (OSError, ValueError):
        return None
    written = index.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n")  # as write_tables writes it
    now = pd.read_csv(io.StringIO(written), dtype=str, keep_default_na=False)
    if not before.drop(columns="float_path", errors="ignore").equals(now.drop(columns="float_path", errors="ignore")):
        return None
    if isinstance(there.get("produced_by"), dict):
        return dict(there["produced_by"])
    if not there.get("cells_run"):  # it ran none of them either, or did not say
        return None
    return {k: there[k] for k in PRODUCED_BY if k in there}


def carried(manifest: Mapping[str, Any]) -> dict | None:
    """The ``produced_by`` record that stands for a folder manifest's times, or None: the manifest's own invocation
    ran none of its runs (``cells_run`` 0), and the record ran some, at the same code fingerprint."""
    made = manifest.get("produced_by")
    if (
        isinstance(made, dict)
        and manifest.get("cells_run") == 0
        and made.get("code_fingerprint") == manifest.get("code_fingerprint")
        and made.get("cells_run")
    ):
        return made
    return None


def other_code(manifest: Mapping[str, Any]) -> str | None:
    """The code fingerprint a folder's manifest names when it is not this checkout's (the folder was made by other
    code, so rerunning its command may give other numbers), else None; None too for a manifest that names none."""
    made = manifest.get("code_fingerprint")
    return str(made) if made and made != code_fingerprint() else None
