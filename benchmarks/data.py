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
left under the final name.

Two ToolBench files cannot be downloaded: the ``toolenv2404_filtered`` archive and
its ``MANIFEST.tsv`` were packaged by the data team from a directory of 12,301
per-tool files of ``trishamaturi/DynamicToolBench`` (their URL below is that
directory's pattern, for provenance only). They are available only through a data
directory; asking to download them raises a :class:`DataError` saying so.

Cache directory (derived data such as the ToolBench archive index, never inputs):
the ``cache_dir`` argument, else ``SHORTLIST_CACHE_DIR``, else
``$XDG_CACHE_HOME/shortlist-depth/cache`` (``~/.cache/shortlist-depth/cache``).
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from benchmarks.atomic import atomic_path
from benchmarks.corpus import DataError, sha256_file

ENV_DATA_DIR = "SHORTLIST_DATA_DIR"
ENV_CACHE_DIR = "SHORTLIST_CACHE_DIR"
APP_NAME = "shortlist-depth"
RAW_BASE = "https://raw.githubusercontent.com"
DOWNLOAD_TIMEOUT_S = 60.0
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


def _download(url: str, dest: Path, expected: str, timeout: float) -> None:
    """Stream ``url`` to a temporary file next to ``dest``, check sha256, then rename (never a partial file)."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"{dest}: cannot write into the data directory to download {url} ({e})") from e
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


def status(data_dir: PathLike | None = None) -> list[FileStatus]:
    """State of every pinned file in the data directory (for ``shortlist data list``).

    Args:
        data_dir: data directory (see module docstring).

    Returns:
        One row per pinned file: dataset, relpath, path, present, verified (present and
        its sha256 matches; never raises on a bad file).
    """
    root = resolve_data_dir(data_dir)
    rows: list[FileStatus] = []
    for dataset, files in DATASETS.items():
        for relpath, entry in files.items():
            path = root / relpath
            present = path.is_file()
            verified = False
            if present:
                try:
                    verified = file_sha256(path) == entry.sha256
                except OSError:
                    verified = False
            rows.append(FileStatus(dataset, relpath, path, present, verified))
    return rows


def fetch(dataset: str, data_dir: PathLike | None = None, base_url: str | None = None) -> list[Path]:
    """Download (or verify) every file of ``dataset`` (for ``shortlist data fetch NAME``).

    Files already present are verified, missing downloadable files are downloaded.
    Missing packaged files (ToolBench archive and manifest) cannot be downloaded: the
    other files are fetched first, then a :class:`DataError` lists the missing ones.

    Args:
        dataset: ``metatool`` or ``toolbench``.
        data_dir: data directory (see module docstring).
        base_url: download from ``base_url + "/" + repo path`` instead of the pinned URL.

    Returns:
        Paths of all files of the dataset, verified.

    Raises:
        DataError: unknown dataset, bad digest, download failure, or packaged files missing.
    """
    if dataset not in DATASETS:
        raise DataError(f"unknown dataset {dataset!r}; known: {sorted(DATASETS)}")
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
