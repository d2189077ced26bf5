"""Every file ``experiments`` writes goes through here: tables, text, figures and manifests.

All writes are atomic (:func:`benchmarks.atomic.atomic_path`: temporary name, then
rename), so a reader never sees half a file and a killed run leaves only temporaries
that :func:`remove_stale_temporaries` clears on resume. Manifests are the only place
for timestamps, timings, git state and versions, so tables and READMEs stay
byte-reproducible. This module imports neither torch nor the agents.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.atomic import DIR_MODE, atomic_path, temp_prefix

if TYPE_CHECKING:
    import pandas as pd

FLOAT_FORMAT = "%.10g"
"""Float format of every CSV table (10 significant digits: byte-stable across runs)."""
REPO = Path(__file__).resolve().parents[1]
PACKAGES = (
    "numpy",
    "scipy",
    "pandas",
    "torch",
    "gymnasium",
    "stable-baselines3",
    "rank-bm25",
    "sentence-transformers",
)


def write_csv(df: pd.DataFrame, path: Path) -> None:
    """Write a table in the package's CSV format (not atomic: for files inside a temporary folder)."""
    df.to_csv(path, index=False, float_format=FLOAT_FORMAT, lineterminator="\n")


def atomic_write_csv(df: pd.DataFrame, path: Path) -> None:
    """Write a table atomically."""
    with atomic_path(path) as tmp:
        write_csv(df, tmp)


def atomic_write_text(path: Path, text: str) -> None:
    """Write UTF-8 text atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path: Path, payload: Any) -> None:
    """Write indented, key-sorted JSON atomically."""
    atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")


def save_png(fig: Any, out_png: Path, dpi: int = 110) -> None:
    """Write a matplotlib figure atomically as PNG and close it."""
    import matplotlib.pyplot as plt

    try:
        with atomic_path(out_png, ".png") as tmp:
            fig.savefig(tmp, dpi=dpi, format="png", bbox_inches="tight")
    finally:
        plt.close(fig)


def write_tables(out: Path, tables: dict[str, pd.DataFrame]) -> None:
    """Atomically write ``name -> table`` into ``out`` (e.g. per_query.csv, summary.csv, buckets.csv)."""
    out.mkdir(parents=True, exist_ok=True)
    for name, df in tables.items():
        atomic_write_csv(df, out / name)


# ----------------------------------------------------------------------------- provenance


CODE_PACKAGES = ("rewards", "envs", "agents", "benchmarks", "choosers")
#: The experiments modules that run inside a cell (its config, the runner, the table writer).
#: Everything else in experiments/ (CLI, options, plans, reports, figures) reaches a cell only
#: through its resolved config, which the config hash covers on its own.
CELL_MODULES = ("experiments/config.py", "experiments/runner.py", "experiments/io.py")


def code_files() -> list[Path]:
    """The source files a cell's numbers depend on: every ``*.py`` of :data:`CODE_PACKAGES`
    and the :data:`CELL_MODULES`."""
    files = [path for pkg in CODE_PACKAGES for path in sorted((REPO / pkg).rglob("*.py"))]
    return files + [REPO / m for m in CELL_MODULES]


@functools.cache
def code_fingerprint() -> str:
    """sha256 over the source that produces a cell (path and bytes of each of :func:`code_files`).

    Part of every cell's config hash, so a change to the code that produces a result never
    reuses a cell computed by older code (a finished run is reused only when this matches).
    """
    h = hashlib.sha256()
    for path in code_files():
        h.update(path.relative_to(REPO).as_posix().encode() + b"\x00")
        h.update(path.read_bytes() + b"\x00")
    return h.hexdigest()


def git_state() -> dict[str, object]:
    """Commit sha and dirty flag of the package checkout (None outside git).

    Dirty means a tracked file outside ``results/`` differs from the commit: the code or its
    settings, not the generated results being rewritten.
    """
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(  # generated results are outputs, not code: a rewrite of them is not "dirty"
                ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        return {"git_sha": sha, "git_dirty": dirty}
    except (OSError, subprocess.CalledProcessError):
        return {"git_sha": None, "git_dirty": None}


def package_versions() -> dict[str, str]:
    """Python and the versions of the packages results depend on ("absent" when not installed)."""
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "absent"
    return out


def machine() -> dict[str, object]:
    """Platform and CPU count."""
    return {"platform": platform.platform(), "cpus": os.cpu_count()}


def now_utc() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def manifest(*, git: Mapping[str, object] | None = None, **fields: Any) -> dict[str, Any]:
    """A manifest: ``fields`` plus git state, package versions, machine and the finishing time.

    The one manifest layout of run directories, study folders and comparison folders.
    Timings go in a ``*_seconds`` field of ``fields``, rounded to milliseconds. ``git``: the git state
    (:func:`git_state`) taken earlier, for a command that rewrites tracked files it ships before it writes its
    manifest; None reads it now.
    """
    out: dict[str, Any] = dict(fields)
    for key, value in fields.items():
        if key.endswith("seconds") and isinstance(value, dict):
            out[key] = {k: round(float(v), 3) for k, v in value.items()}
        elif key.endswith("seconds") and isinstance(value, float):
            out[key] = round(value, 3)
    out.update(git_state() if git is None else git)
    out["code_fingerprint"] = code_fingerprint()
    out["versions"] = package_versions()
    out["machine"] = machine()
    out.setdefault("finished_utc", now_utc())
    return out


def write_manifest(path: Path, **fields: Any) -> None:
    """Atomically write :func:`manifest` of ``fields`` to ``path``."""
    atomic_write_json(path, manifest(**fields))


# ----------------------------------------------------------------------------- temporaries


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: A temporary this package writes: ``.<target>.<tail>`` where the target is a run directory
#: (``<condition>__<method>__s<seed>[__split<n>]``) or a file of a kind it writes.
_TEMPORARY = re.compile(
    r"^\.(?:.+?__.+?__s\d+(?:__split\d+)?|[^/]+?\.(?:csv|md|json|html|png|txt|zip|npy))\.(?P<tail>.+)$"
)


def remove_stale_temporaries(folder: Path) -> None:
    """Remove ``.<name>.<pid>.*`` temporaries whose writer process is gone (killed runs).

    Only names of :data:`_TEMPORARY`'s form are touched, so the user's own hidden files
    (``.git``, ``.venv``, ``.env``, ``.env.local``) in an output folder are never deleted.
    """
    if not folder.is_dir():
        return
    for p in folder.iterdir():
        m = _TEMPORARY.match(p.name)
        if m is None:
            continue
        pid = next((int(x) for x in m.group("tail").split(".") if x.isdigit()), None)
        if pid is None or (pid != os.getpid() and not _pid_alive(pid)):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)


# ----------------------------------------------------------------------------- folders


@contextlib.contextmanager
def staged_folder(
    final: Path,
    *,
    merge: bool = False,
    owned: Sequence[str] = (),
    keep_existing: Callable[[Path], bool] | None = None,
) -> Iterator[Path]:
    """The one way a folder is written: into a temporary sibling, moved into ``final`` only once all of
    it is written.

    The temporary folder is ``.<final name>.<pid>.<random>`` beside ``final`` (:func:`temp_prefix`), so
    a reader never sees a folder with some files but not the rest, and one left by a killed process is
    removed by the next call on the same ``final`` (:func:`remove_stale_staging`). A failure (an error,
    an interrupt) removes the temporary folder and leaves ``final`` as it was.

    - ``merge=False`` (a run directory): the temporary folder replaces ``final`` as a whole. When
      ``final`` exists already, ``keep_existing(final)`` decides: True keeps it (another process
      finished the same work) and drops this one; otherwise it is moved aside and removed.
    - ``merge=True`` (a results folder): each written file is renamed into ``final``; files ``final``
      holds that this invocation did not write are kept, except under the subfolders named in
      ``owned`` (a report's ``figures``): those hold this invocation's files only, so a figure of a
      condition an earlier, wider run plotted is removed rather than left beside a README that no longer
      covers it.
    """
    final = Path(final).resolve()
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(final)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=temp_prefix(final)))
    os.chmod(tmp, DIR_MODE)
    try:
        yield tmp
        if merge:
            _merge_into(tmp, final, owned)
        else:
            _replace_with(tmp, final, keep_existing)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _merge_into(tmp: Path, final: Path, owned: Sequence[str]) -> None:
    written = {p.relative_to(tmp) for p in tmp.rglob("*") if p.is_file()}
    owned_now = (p for sub in owned for p in (final / sub).rglob("*") if p.is_file())
    stale = [p for p in owned_now if p.relative_to(final) not in written]
    for rel in sorted(written):
        (final / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp / rel, final / rel)  # same file system: the folder is a sibling of ``final``
    for path in stale:
        path.unlink()


def _replace_with(tmp: Path, final: Path, keep_existing: Callable[[Path], bool] | None) -> None:
    try:
        os.replace(tmp, final)
    except OSError:  # ``final`` exists and is not empty
        if keep_existing is not None and keep_existing(final):
            return
        aside = final.parent / f"{temp_prefix(final)}old"
        os.replace(final, aside)
        os.replace(tmp, final)
        shutil.rmtree(aside, ignore_errors=True)


def remove_stale_staging(final: Path) -> None:
    """Remove the temporary folders of ``final`` (see :func:`staged_folder`) whose writer process is gone."""
    prefix = f".{final.name}."
    for folder in final.parent.glob(f"{glob.escape(prefix)}*"):
        pid, sep, _ = folder.name.removeprefix(prefix).partition(".")
        if folder.is_dir() and sep and pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
