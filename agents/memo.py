"""Fits shared between cells: a network fitted once serves every cell that fits the same network on the same data.

Two kinds fit the very same network: the P(found) stop (:mod:`agents.pfound`) is the expected-reward cut-off
(:mod:`agents.cutoff`) with another decision on top, and with the same training queries, settings and seed its
network is the cut-off's bit for bit. A study that runs both would fit it twice. A :class:`FitMemo` stores a fitted
network under a key that names everything the fit reads; a later fit with the same key loads the stored tensors
instead of training.

What a key names: a ``salt`` (the code fingerprint the runner passes: a store written by other code is never read),
the torch version, and what the caller hashes (the training tensors, the settings that shape the fit, the seed).
A hit loads the very tensors the first fit stored, so a result never depends on which cell fitted first or whether
the store was there: a test compares both ways.

The memo is off unless a caller turns it on (:func:`fit_memo`): every command that runs cells (``shortlist
train``, ``reproduce``, ``compare``, ...) turns it on around each cell's fit (:func:`experiments.runner.run_cell`),
with the store in the cache directory beside the score cache (``<cache>/fits/``, one small ``.pt`` file per
network; ``--cache-dir`` or ``SHORTLIST_CACHE_DIR``). A fit outside it (the Python API) trains as before.
Files are written the project's one atomic way (:func:`benchmarks.atomic.atomic_path`: a temporary name, then one
rename), so two workers that miss the same key at once both train (the same tensors) and the last rename wins; a
reader never sees half a file. A learner calls :func:`fitted_once` around the training it may skip.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.atomic import atomic_path

__all__ = ["FitMemo", "active_fit_memo", "fit_memo", "fitted_once"]

_ACTIVE: list[FitMemo | None] = []


class FitMemo:
    """Content-addressed store of fitted tensors (module docstring): ``folder/<sha256>.pt``."""

    def __init__(self, folder: Path | str, salt: str) -> None:
        self.folder = Path(folder)
        self.salt = salt

    def key(self, *parts: bytes | str) -> str:
        """sha256 of the salt, the torch version and ``parts`` (each length-prefixed, so no two part lists
        collide)."""
        import torch

        h = hashlib.sha256()
        for part in (self.salt, torch.__version__, *parts):
            b = part.encode() if isinstance(part, str) else bytes(part)
            h.update(len(b).to_bytes(8, "little") + b)
        return h.hexdigest()

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.pt"

    def load(self, key: str) -> dict[str, Any] | None:
        """The tensors stored under ``key`` (``torch.load(weights_only=True)``), or None when there are none."""
        import torch

        p = self.path(key)
        if not p.is_file():
            return None
        try:
            return dict(torch.load(p, weights_only=True))
        except Exception as e:  # a damaged store is an error to report, not a fit to redo quietly
            raise ValueError(f"{p}: unreadable fitted network in the fit memo ({e}); delete the file to refit") from e

    def store(self, key: str, tensors: dict[str, Any]) -> None:
        """Write ``tensors`` under ``key`` (:func:`benchmarks.atomic.atomic_path`)."""
        import torch

        with atomic_path(self.path(key)) as tmp:
            torch.save(tensors, tmp)


def active_fit_memo() -> FitMemo | None:
    """The memo of the innermost :func:`fit_memo` block of this process, or None outside every block."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def fit_memo(folder: Path | str | None, salt: str) -> Iterator[FitMemo | None]:
    """Share fits under ``folder`` inside the block (None: no memo inside it, e.g. to turn an outer one off)."""
    memo = FitMemo(folder, salt) if folder is not None else None
    _ACTIVE.append(memo)
    try:
        yield memo
    finally:
        _ACTIVE.pop()


def fitted_once(parts: Callable[[], tuple[bytes | str, ...]], fit: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``fit()`` (the fitted tensors), or what an earlier fit with the same key stored in the active memo.

    Outside every :func:`fit_memo` block it is ``fit()``. Inside one, ``parts()`` (what the fit reads, called only
    then) keys the store: a hit returns the stored tensors without fitting, a miss fits and stores."""
    memo = active_fit_memo()
    if memo is None:
        return fit()
    key = memo.key(*parts())
    stored = memo.load(key)
    if stored is None:
        stored = fit()
        memo.store(key, stored)
    return stored
