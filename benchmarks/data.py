"""Benchmark data files: one pinned, verified access path for every downloadable dataset.

Every MetaTool and ToolBench file the loaders read is listed in :data:`DATASETS`
with its place under the data directory, the public commit it comes from, and its
sha256 (the values of ``data/SOURCES.md``). Loaders obtain files only through
:func:`ensure_file`, which returns a verified path or raises :class:`DataError`.

Data directory (first that applies):

1. the ``data_dir`` argument of the call;
2. the environment variable ``SHORTLIST_DATA_DIR``;
3. the per-user cache ``$XDG_CACHE_HOME/shortlist-depth/data``, or
   ``~/.cache/shortlist-depth/data`` when ``XDG_CACHE_HOME`` is unset.

The layout under it is the layout of ``data/SOURCES.md``: ``metatool/dataset/...``
and ``toolbench/...`` (a copy of the shared data folder is a valid data directory).
The data directory may be read-only (CI points it at a read-only folder): nothing
is written there except when a missing file is downloaded.

Verification: a present file is hashed once per process; the result is kept in
memory keyed by (resolved path, size, mtime), so repeated calls are cheap and a
file modified in between is hashed again. A present file whose sha256 differs from
the pinned one is refused (:class:`DataError` with the file, the expected and the
actual digest); it is never overwritten.

Downloads (``download=True`` and the file is missing) use the standard library
(:mod:`urllib.request`) from ``https://raw.githubusercontent.com/<owner>/<repo>/<commit>/<repo
path>``, or from ``<base_url>/<repo path>`` when ``base_url`` is given (tests point it
at a local server; a mirror works the same way). The body is streamed into a
temporary file in the destination folder, its sha256 checked, and only then moved
into place with :func:`os.replace`; on any failure (HTTP error, network error, digest
mismatch) the temporary file is deleted, so no partial or unverified file is ever
left under the final name, and the folders created for it (only those, and only while empty) are removed
again, so a failed download leaves no empty folders behind (the same for a wheel, below).

Two ToolBench files cannot be downloaded: the ``toolenv2404_filtered`` archive and
its ``MANIFEST.tsv`` were packaged by the data team from a directory of 12,301
per-tool files of ``trishamaturi/DynamicToolBench`` (their URL below is that
directory's pattern, for provenance only). They are available only through a data
directory; asking to download them raises a :class:`DataError` saying so.

Cache directory (derived data such as the ToolBench archive index, never inputs):
the ``cache_dir`` argument, else ``SHORTLIST_CACHE_DIR``, else
``$XDG_CACHE_HOME/shortlist-depth/cache`` (``~/.cache/shortlist-depth/cache``).

Package wheels (:data:`WHEELS`; BFCL's data ships inside the ``bfcl-eval`` wheel): the
pinned wheel file is looked for at ``<data dir>/<dataset>/<wheel file>``, then at
``<cache dir>/<dataset>/<wheel file>``; a present wheel is verified (a valid zip archive
with the pinned sha256) and never downloaded again. A missing wheel is obtained with pip
itself, ``<this python> -m pip download --no-deps --only-binary=:all: <project>==<version>``
into a temporary folder next to the destination (so pip's own configuration -- index,
proxy, certificates -- applies, and nothing is installed), verified, and moved into
``<cache dir>/<dataset>/`` with :func:`os.replace`. It goes to the cache directory, not
the data directory, because the data directory may be read-only; a wheel copied into a
data directory is used from there. The wheel is never installed or imported: loaders
read its data members straight from the zip (:func:`read_wheel_member`).
"""

from __future__ import annotations

import hashlib
import http.client
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from benchmarks.atomic import atomic_path, temp_prefix
from benchmarks.corpus import DataError, sha256_file

ENV_DATA_DIR = "SHORTLIST_DATA_DIR"
ENV_CACHE_DIR = "SHORTLIST_CACHE_DIR"
APP_NAME = "shortlist-depth"
RAW_BASE = "https://raw.githubusercontent.com"
DOWNLOAD_TIMEOUT_S = 60.0
PIP_TIMEOUT_S = 600.0
_CHUNK = 1 << 20

PathLike = str | os.PathLike[str]


def _user_cache_root() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / APP_NAME


def resolve_data_dir(explicit: PathLike | None = None) -> Path:
    """The data directory: ``explicit`` > ``$SHORTLIST_DATA_DIR`` > per-user cache.

    Args:
        explicit: a folder given by the caller; wins over everything else.

    Returns:
        The folder (not created: it may legitimately be read-only or absent).
    """
    if explicit is not None and str(explicit) != "":
        return Path(explicit).expanduser()
    env = os.environ.get(ENV_DATA_DIR)
    if env:
        return Path(env).expanduser()
    return _user_cache_root() / "data"


def resolve_cache_dir(explicit: PathLike | None = None) -> Path:
    """The cache directory for derived data: ``explicit`` > ``$SHORTLIST_CACHE_DIR`` > per-user.

    Args:
        explicit: a folder given by the caller; wins over everything else.

    Returns:
        The folder (not created here).
    """
    if explicit is not None and str(explicit) != "":
        return Path(explicit).expanduser()
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env).expanduser()
    return _user_cache_root() / "cache"


#: Short aliases: ``data_dir()`` / ``cache_dir()`` (functions taking ``data_dir`` as a
#: parameter use the ``resolve_*`` names, which the parameter does not shadow).
data_dir = resolve_data_dir
cache_dir = resolve_cache_dir


@dataclass(frozen=True)
class DataFile:
    """One pinned input file.

    Attributes:
        dataset: dataset name (``metatool``, ``toolbench``).
        relpath: POSIX path under the data directory.
        repo: upstream GitHub repository ``owner/name``.
        commit: pinned upstream commit (40 hex digits).
        repo_path: path inside the upstream repository (a pattern for packaged files).
        sha256: expected sha256 hex digest of the file.
        packaged: True when the file was assembled by the data team and can only be
            obtained from a data directory, never downloaded.
    """

    dataset: str
    relpath: str
    repo: str
    commit: str
    repo_path: str
    sha256: str
    packaged: bool = False

    @property
    def url(self) -> str:
        """The pinned raw URL (a URL pattern for packaged files)."""
        return f"{RAW_BASE}/{self.repo}/{self.commit}/{self.repo_path}"

    def url_from(self, base_url: str | None) -> str:
        """Download URL: the pinned URL, or ``base_url + "/" + repo_path`` when overridden."""
        if base_url is None:
            return self.url
        return f"{base_url.rstrip('/')}/{self.repo_path}"


_METATOOL = ("HowieHwong/MetaTool", "35e81bb7576826e980c80fed8f8c0a2b4a1e6fbb")
_STB = ("THUNLP-MT/StableToolBench", "aa4ed9f4737ad98bd706663f01d63623c3427812")
_ANYTOOL = ("dyabel/AnyTool", "9460d4dd9493c3c2184ec36c4e03c2f10cdbd44f")
_DTB = ("trishamaturi/DynamicToolBench", "d17b0f2b5e27b3a90ecf7ada6bfa64b13cdff5dd")
_TOOLBENCH = ("OpenBMB/ToolBench", "d56fdd89faf8c91fa135090b212bb9057ee5cfc2")
_TOOLENV_PATTERN = "tools/toolenv2404_filtered/<Category>/<tool>.json"


def _table(entries: Iterable[DataFile]) -> dict[str, dict[str, DataFile]]:
    out: dict[str, dict[str, DataFile]] = {}
    for e in entries:
        out.setdefault(e.dataset, {})[e.relpath] = e
    return out


def _mt(path: str, sha: str) -> DataFile:
    return DataFile("metatool", f"metatool/{path}", *_METATOOL, path, sha)


def _stb(path: str, sha: str) -> DataFile:
    return DataFile("toolbench", f"toolbench/stabletoolbench/{path}", *_STB, path, sha)


#: dataset -> relpath under the data directory -> pinned file (from ``data/SOURCES.md``).
DATASETS: dict[str, dict[str, DataFile]] = _table(
    [
        _mt(
            "dataset/data/all_clean_data.csv",
            "cf2eb0474396677530931def51012da4e88f9f34f655332f04177b2054101baf",
        ),
        _mt(
            "dataset/plugin_des.json",
            "c446ade5acfb8e16c477124250665021e63b11bf6cb232db04fc9ba6bed0389a",
        ),
        _mt(
            "dataset/plugin_info.json",
            "864bf25bd5494feca861acb98f69d260f212d9c098a2dc68b4b2ee357d6fb2f5",
        ),
        _mt(
            "dataset/big_tool_des.json",
            "dcb6b4d2586acaa697d40ac710ceed2c201487b0eb2ea2651f56025bfabc7f5a",
        ),
        _mt(
            "dataset/data/multi_tool_query_golden.json",
            "ef37d10a8cb5b41435d6ea3ae29819afdb8d6db0852268830e5ee77259507f51",
        ),
        DataFile(
            "toolbench",
            "toolbench/anytool/tool_details.json",
            *_ANYTOOL,
            "tool_details.json",
            "96505a44a85bd95c771b7c55fc2785b0f01532a7034a75c3dc40ccc915a34903",
        ),
        _stb(
            "solvable_queries/test_instruction/G1_category.json",
            "123cb9073c8b6e6473df91c8a51170277087e1c263eba2eb6077170edbe849c3",
        ),
        _stb(
            "solvable_queries/test_instruction/G1_instruction.json",
            "500aa0105ed451538448f6ea04f10661536b013f3e1a293840fe401688160e7c",
        ),
        _stb(
            "solvable_queries/test_instruction/G1_tool.json",
            "05d0c180bbec9d060fd267cc79399bda05beddd0a6d0de68b5488926a9029a1a",
        ),
        _stb(
            "solvable_queries/test_query_ids/G1_category.json",
            "f449a1cc1273b7dc4b77ab5db4fc4fe5593f6ac681d0b5bd579c74c0a786c589",
        ),
        _stb(
            "solvable_queries/test_query_ids/G1_instruction.json",
            "b3dae86a67ce471413df4c734034b0c729357aebb233242a444cc2b8380f2f7f",
        ),
        _stb(
            "solvable_queries/test_query_ids/G1_tool.json",
            "8a0335fc7abaf657a8c99389c06182d542e094a65d7485cde013e229954793a4",
        ),
        DataFile(
            "toolbench",
            "toolbench/toolenv2404_filtered_archive/toolenv2404_filtered.tar.xz",
            *_DTB,
            _TOOLENV_PATTERN,
            "5eab42f3be092314bc0dc44d546b210781c2f12df6355af37bb27e743f181bdb",
            packaged=True,
        ),
        DataFile(
            "toolbench",
            "toolbench/toolenv2404_filtered_archive/MANIFEST.tsv",
            *_DTB,
            _TOOLENV_PATTERN,
            "29263086dfccefe98096f5809aeb8f1ff3cf865db57f85027f75244cf90669cf",
            packaged=True,
        ),
        DataFile(
            "toolbench",
            "toolbench/toolbench_data_example/instruction/G1_query.json",
            *_TOOLBENCH,
            "data_example/instruction/G1_query.json",
            "844bbec415dae93a40df3649bd8b46d7dc1417895e403ec74d189078da7a5c4e",
        ),
    ]
)


@dataclass(frozen=True)
class PipWheel:
    """One pinned wheel file from the Python package index, used only as a data archive.

    Attributes:
        dataset: dataset name (``bfcl``); also the folder under the data / cache directory.
        project: distribution name as pip knows it (``bfcl-eval``).
        version: pinned exact version.
        filename: the wheel's file name (pip's download result).
        sha256: expected sha256 hex digest of the wheel file.
    """

    dataset: str
    project: str
    version: str
    filename: str
    sha256: str

    @property
    def relpath(self) -> str:
        """POSIX path under the data or cache directory: ``<dataset>/<filename>``."""
        return f"{self.dataset}/{self.filename}"

    @property
    def requirement(self) -> str:
        """The exact pip requirement, ``<project>==<version>``."""
        return f"{self.project}=={self.version}"


#: dataset -> pinned wheel. The sha256 is that of the file ``pip download --no-deps
#: --only-binary=:all: bfcl-eval==2026.3.23`` saves from the package index.
WHEELS: dict[str, PipWheel] = {
    "bfcl": PipWheel(
        "bfcl",
        "bfcl-eval",
        "2026.3.23",
        "bfcl_eval-2026.3.23-py3-none-any.whl",
        "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a",
    ),
}

#: ``downloader(requirement, folder)`` saves the requirement's wheel into ``folder``.
Downloader = Callable[[str, Path], None]


def dataset_names() -> list[str]:
    """Every dataset ``fetch`` and ``status`` know: file datasets, then wheel datasets."""
    return [*DATASETS, *(d for d in WHEELS if d not in DATASETS)]


# (resolved path, size, mtime_ns) -> sha256 hex digest of that file version.
_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_sha256(path: PathLike) -> str:
    """sha256 of a file, memoised in memory by (resolved path, size, mtime).

    Args:
        path: the file.

    Returns:
        The hex digest.
    """
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    digest = _DIGESTS.get(key)
    if digest is None:
        digest = sha256_file(str(p))
        _DIGESTS[key] = digest
    return digest


def spec(dataset: str, relpath: str) -> DataFile:
    """The pinned entry for ``relpath`` of ``dataset``.

    Raises:
        DataError: unknown dataset or file.
    """
    files = DATASETS.get(dataset)
    if files is None:
        raise DataError(f"unknown dataset {dataset!r}; known: {sorted(DATASETS)}")
    entry = files.get(relpath)
    if entry is None:
        raise DataError(f"{dataset}: no pinned file {relpath!r}; known: {sorted(files)}")
    return entry


def _verify_present(entry: DataFile, path: Path) -> None:
    actual = file_sha256(path)
    if actual != entry.sha256:
        raise DataError(
            f"{path}: sha256 mismatch (expected {entry.sha256}, actual {actual}): a corrupted or "
            f"different version of the {entry.dataset} file {entry.relpath}; it was not modified: "
            f"remove it and fetch it again"
        )


def _make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; the ones this call created, outermost first (to hand to
    :func:`_remove_empty` when what they were made for fails). An OSError removes those it had made, then raises."""
    missing = []
    p = folder
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    created: list[Path] = []
    try:
        for p in reversed(missing):
            try:
                p.mkdir()
            except FileExistsError:
                if not p.is_dir():
                    raise
                continue
            created.append(p)
    except OSError:
        _remove_empty(created)
        raise
    return created


def _remove_empty(created: list[Path]) -> None:
    """Remove the folders :func:`_make_folders` created that are still empty, innermost first (a failed download
    leaves no empty folders behind; one that holds anything, e.g. another file fetched meanwhile, stays)."""
    for p in reversed(created):
        try:
            p.rmdir()
        except OSError:
            pass  # not empty (its parents then fail too) or gone


def _download(url: str, dest: Path, expected: str, timeout: float) -> None:
    """Stream ``url`` to a temporary file next to ``dest``, check sha256, then rename (never a partial file); on
    failure the folders made for ``dest`` are removed again if still empty."""
    try:
        created = _make_folders(dest.parent)
    except OSError as e:
        raise DataError(f"{dest}: cannot write into the data directory to download {url} ({e})") from e
    try:
        _stream(url, dest, expected, timeout)
    except BaseException:
        _remove_empty(created)
        raise


def _stream(url: str, dest: Path, expected: str, timeout: float) -> None:
    """The download of :func:`_download` into existing folders: DataError naming the URL or ``dest``."""
    try:
        with atomic_path(dest, ".part") as tmp:  # renamed onto dest only if the block succeeds
            h = hashlib.sha256()
            with open(tmp, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
                announced = resp.headers.get("Content-Length")
                received = 0
                for chunk in iter(lambda: resp.read(_CHUNK), b""):
                    h.update(chunk)
                    out.write(chunk)
                    received += len(chunk)
            if announced is not None and announced.isdigit() and received != int(announced):
                raise DataError(
                    f"{url}: download cut short ({received} of {announced} bytes); not kept (nothing written to {dest})"
                )
            actual = h.hexdigest()
            if actual != expected:
                raise DataError(
                    f"{url}: downloaded content has sha256 {actual}, expected {expected}; "
                    f"not kept (nothing written to {dest})"
                )
    except urllib.error.HTTPError as e:
        raise DataError(f"{url}: download failed with HTTP status {e.code} ({e.reason})") from e
    except urllib.error.URLError as e:
        raise DataError(f"{url}: download failed ({e.reason})") from e
    except PermissionError as e:
        raise DataError(f"{dest}: cannot write into the data directory to download {url} ({e})") from e
    except (OSError, http.client.HTTPException) as e:
        raise DataError(f"{url}: download to {dest} failed ({e!r})") from e


def ensure(
    entry: DataFile,
    data_dir: PathLike | None = None,
    *,
    download: bool = True,
    base_url: str | None = None,
    timeout: float = DOWNLOAD_TIMEOUT_S,
) -> Path:
    """Verified local path of one pinned file, downloading it if missing and allowed.

    Args:
        entry: the pinned file.
        data_dir: data directory (see module docstring for the default).
        download: fetch a missing file; when False a missing file is a :class:`DataError`.
        base_url: replaces ``https://raw.githubusercontent.com/<repo>/<commit>``.
        timeout: network timeout in seconds.

    Returns:
        The path of the verified file.

    Raises:
        DataError: wrong digest, missing file that cannot or may not be downloaded,
            HTTP or network failure.
    """
    root = resolve_data_dir(data_dir)
    path = root / entry.relpath
    if path.is_file():
        _verify_present(entry, path)
        return path
    if path.exists():
        raise DataError(f"{path}: exists but is not a regular file")
    if entry.packaged:
        raise DataError(
            f"{path}: missing. {entry.relpath} was packaged by the data team from the directory "
            f"{entry.url} and cannot be downloaded; it is only available through a data directory "
            f"(set {ENV_DATA_DIR} or pass data_dir to a folder laid out as data/SOURCES.md)"
        )
    if not download:
        raise DataError(
            f"{path}: missing (downloads disabled); run `shortlist data fetch {entry.dataset}` "
            f"or set {ENV_DATA_DIR} to a folder holding the data"
        )
    _download(entry.url_from(base_url), path, entry.sha256, timeout)
    file_sha256(path)  # remember the verified version
    return path


def ensure_file(
    dataset: str,
    relpath: str,
    data_dir: PathLike | None = None,
    *,
    download: bool = True,
    base_url: str | None = None,
) -> Path:
    """Verified local path of ``relpath`` (a key of ``DATASETS[dataset]``); see :func:`ensure`.

    Args:
        dataset: ``metatool`` or ``toolbench``.
        relpath: path under the data directory, e.g. ``metatool/dataset/plugin_des.json``.
        data_dir: data directory (explicit > ``SHORTLIST_DATA_DIR`` > per-user cache).
        download: fetch a missing file from its pinned URL.
        base_url: download from ``base_url + "/" + repo path`` instead.

    Returns:
        The path of the verified file.

    Raises:
        DataError: see :func:`ensure`.
    """
    return ensure(spec(dataset, relpath), data_dir, download=download, base_url=base_url)


class FileStatus(NamedTuple):
    """One row of :func:`status`."""

    dataset: str
    relpath: str
    path: Path
    present: bool
    verified: bool


def status(data_dir: PathLike | None = None, cache_dir: PathLike | None = None) -> list[FileStatus]:
    """State of every pinned file and wheel (for ``shortlist data list``).

    Args:
        data_dir: data directory (see module docstring).
        cache_dir: cache directory, where downloaded wheels live (see module docstring).

    Returns:
        One row per pinned file: dataset, relpath, path, present, verified (present and
        its sha256 matches; never raises on a bad file). A wheel's row shows the copy
        that would be used (data directory first, then cache directory), or the cache
        path a download would create when neither exists.
    """
    root = resolve_data_dir(data_dir)
    rows: list[FileStatus] = []
    for dataset, files in DATASETS.items():
        for relpath, entry in files.items():
            rows.append(_file_status(dataset, relpath, root / relpath, entry.sha256))
    for dataset, wheel in WHEELS.items():
        path = find_wheel(wheel, data_dir, cache_dir)
        if path is None:
            path = resolve_cache_dir(cache_dir) / wheel.relpath
        rows.append(_file_status(dataset, wheel.relpath, path, wheel.sha256))
    return rows


def _file_status(dataset: str, relpath: str, path: Path, sha256: str) -> FileStatus:
    present = path.is_file()
    verified = False
    if present:
        try:
            verified = file_sha256(path) == sha256
        except OSError:
            verified = False
    return FileStatus(dataset, relpath, path, present, verified)


def fetch(
    dataset: str,
    data_dir: PathLike | None = None,
    base_url: str | None = None,
    cache_dir: PathLike | None = None,
) -> list[Path]:
    """Download (or verify) every file of ``dataset`` (for ``shortlist data fetch NAME``).

    Files already present are verified, missing downloadable files are downloaded.
    Missing packaged files (ToolBench archive and manifest) cannot be downloaded: the
    other files are fetched first, then a :class:`DataError` lists the missing ones.
    A wheel dataset (``bfcl``) is obtained with :func:`ensure_wheel`.

    Args:
        dataset: ``metatool``, ``toolbench`` or ``bfcl``.
        data_dir: data directory (see module docstring).
        base_url: download from ``base_url + "/" + repo path`` instead of the pinned URL
            (file datasets only; a wheel comes from pip's configured index).
        cache_dir: cache directory, where a downloaded wheel is stored.

    Returns:
        Paths of all files of the dataset, verified.

    Raises:
        DataError: unknown dataset, bad digest, download failure, or packaged files missing.
    """
    if dataset in WHEELS and dataset not in DATASETS:
        return [ensure_wheel(WHEELS[dataset], data_dir, cache_dir)]
    if dataset not in DATASETS:
        raise DataError(f"unknown dataset {dataset!r}; known: {sorted(dataset_names())}")
    root = resolve_data_dir(data_dir)
    paths: list[Path] = []
    unavailable: list[str] = []
    for entry in DATASETS[dataset].values():
        if entry.packaged and not (root / entry.relpath).exists():
            unavailable.append(entry.relpath)
            continue
        paths.append(ensure(entry, root, base_url=base_url))
    if unavailable:
        raise DataError(
            f"{dataset}: fetched {len(paths)} file(s) into {root}, but {unavailable} were packaged "
            f"by the data team and cannot be downloaded; copy them from a data directory "
            f"(see data/SOURCES.md)"
        )
    return paths


# ------------------------------------------------------------------ package wheels


def find_wheel(wheel: PipWheel, data_dir: PathLike | None = None, cache_dir: PathLike | None = None) -> Path | None:
    """The first existing copy of ``wheel`` (data directory, then cache directory), not verified.

    Args:
        wheel: the pinned wheel.
        data_dir: data directory (see module docstring).
        cache_dir: cache directory (see module docstring).

    Returns:
        The path, or None when neither place holds the file.
    """
    for p in (resolve_data_dir(data_dir) / wheel.relpath, resolve_cache_dir(cache_dir) / wheel.relpath):
        if p.exists():
            return p
    return None


def verify_wheel(wheel: PipWheel, path: PathLike) -> Path:
    """Check that ``path`` is a zip archive with the pinned sha256 of ``wheel``.

    Args:
        wheel: the pinned wheel.
        path: the file to check.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        DataError: one line naming the file: not a regular file, not a zip archive
            (truncated or corrupted), or a sha256 other than the pinned one (both digests).
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: not a regular file (expected the {wheel.project} wheel {wheel.filename})")
    actual = file_sha256(p)
    if actual == wheel.sha256:
        return p
    if not zipfile.is_zipfile(p):
        raise DataError(
            f"{p}: not a valid zip archive (truncated or corrupted download of {wheel.requirement}); "
            f"remove it and fetch it again"
        )
    raise DataError(
        f"{p}: sha256 mismatch (expected {wheel.sha256}, actual {actual}): not the pinned "
        f"{wheel.requirement} wheel; it was not modified: remove it and fetch it again"
    )


def pip_download(requirement: str, folder: Path) -> None:
    """Save the wheel of ``requirement`` into ``folder`` with this interpreter's pip (nothing is installed).

    Runs ``<sys.executable> -m pip download --no-deps --only-binary=:all: <requirement>
    -d <folder>``, so pip's own configuration (index, proxy, certificates) applies.

    Raises:
        DataError: pip is missing, fails, or times out (one line with pip's last message).
    """
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--no-input",
        "--disable-pip-version-check",
        "--quiet",
        requirement,
        "-d",
        str(folder),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as e:
        raise DataError(f"pip download {requirement}: no answer within {PIP_TIMEOUT_S:.0f} s") from e
    except OSError as e:
        raise DataError(f"pip download {requirement}: cannot run {sys.executable} ({e})") from e
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
        last = lines[-1] if lines else "no output"
        raise DataError(f"pip download {requirement} failed (exit status {proc.returncode}): {last}")


def ensure_wheel(
    wheel: PipWheel,
    data_dir: PathLike | None = None,
    cache_dir: PathLike | None = None,
    *,
    download: bool = True,
    downloader: Downloader | None = None,
) -> Path:
    """Verified local path of a pinned wheel, downloading it with pip if missing and allowed.

    Lookup: ``<data dir>/<dataset>/<file>``, then ``<cache dir>/<dataset>/<file>``; the
    first existing copy is verified and returned (never downloaded again). Otherwise the
    wheel is downloaded into a temporary folder next to ``<cache dir>/<dataset>/<file>``,
    verified, and renamed into place; on any failure nothing is left under the final name, and the folders
    created for it are removed again while empty.

    Args:
        wheel: the pinned wheel (e.g. ``WHEELS["bfcl"]``).
        data_dir: data directory (see module docstring).
        cache_dir: cache directory; downloads go there.
        download: when False, a missing wheel is a :class:`DataError`.
        downloader: ``downloader(requirement, folder)``; default :func:`pip_download`.

    Returns:
        The path of the verified wheel.

    Raises:
        DataError: a present copy is not a zip or has another sha256, the download
            fails or yields another file, or the wheel is missing and ``download`` is False.
    """
    present = find_wheel(wheel, data_dir, cache_dir)
    if present is not None:
        return verify_wheel(wheel, present)
    dest = resolve_cache_dir(cache_dir) / wheel.relpath
    if not download:
        raise DataError(
            f"{dest}: missing (downloads disabled); run `shortlist data fetch {wheel.dataset}` "
            f"or place {wheel.filename} under <data dir>/{wheel.dataset}/"
        )
    fetch_into = downloader if downloader is not None else pip_download
    created: list[Path] = []
    try:
        created = _make_folders(dest.parent)
        with (
            tempfile.TemporaryDirectory(dir=dest.parent, prefix=temp_prefix(dest)) as tmp_dir,
            atomic_path(dest, ".part") as tmp,
        ):
            fetch_into(wheel.requirement, Path(tmp_dir))
            got = Path(tmp_dir) / wheel.filename
            if not got.is_file():
                found = sorted(p.name for p in Path(tmp_dir).iterdir())
                raise DataError(f"pip download {wheel.requirement}: expected {wheel.filename}, got {found}")
            verify_wheel(wheel, got)
            os.replace(got, tmp)
    except PermissionError as e:
        _remove_empty(created)  # a failed download leaves no empty folders behind
        raise DataError(f"{dest}: cannot write into the cache directory to download {wheel.requirement} ({e})") from e
    except BaseException:
        _remove_empty(created)
        raise
    file_sha256(dest)  # remember the verified version
    return dest


def read_wheel_member(path: PathLike, member: str) -> bytes:
    """The bytes of one member of a zip archive (a wheel is never installed or imported).

    Args:
        path: the archive.
        member: the member's name inside it, e.g. ``bfcl_eval/data/BFCL_v4_simple_python.json``.

    Returns:
        The member's content (its CRC is checked by :mod:`zipfile`).

    Raises:
        DataError: naming ``<archive>!<member>``: missing member, or an unreadable /
            corrupted archive.
    """
    try:
        with zipfile.ZipFile(path) as zf:
            try:
                info = zf.getinfo(member)
            except KeyError:
                raise DataError(f"{path}!{member}: no such member in the archive") from None
            return zf.read(info)
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise DataError(f"{path}!{member}: cannot read it from the archive ({e})") from e
