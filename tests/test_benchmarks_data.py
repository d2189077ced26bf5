"""benchmarks.data: data-dir resolution, pinned table, verification, downloads (local server)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import data
from benchmarks.corpus import DataError
from benchmarks.data import DataFile


def _real_data_dir() -> Path:
    env = os.environ.get("SHORTLIST_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data"


REAL = _real_data_dir()
GOOD = b"hello, pinned world\n" * 100
GOOD_SHA = hashlib.sha256(GOOD).hexdigest()


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Static files plus ``/truncated/...``: announces more bytes than it sends."""

    requests: list[str]

    def do_GET(self) -> None:  # noqa: N802 (http.server API)
        self.requests.append(self.path)
        if self.path.startswith("/truncated/"):
            self.send_response(200)
            self.send_header("Content-Length", str(len(GOOD)))
            self.end_headers()
            self.wfile.write(GOOD[:10])
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (signature)
        return


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    """A local HTTP server on 127.0.0.1 serving a temp folder: (base_url, folder, request log)."""
    root = tmp_path / "served"
    root.mkdir()
    log: list[str] = []
    handler = type("H", (_Handler,), {"requests": log})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root, log
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def _fake(monkeypatch: pytest.MonkeyPatch, repo_path: str, sha: str = GOOD_SHA, packaged: bool = False) -> DataFile:
    entry = DataFile("fake", f"fake/sub/{Path(repo_path).name}", "o/r", "c" * 40, repo_path, sha, packaged)
    monkeypatch.setitem(data.DATASETS, "fake", {entry.relpath: entry})
    return entry


def _all_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# ------------------------------------------------------------------ resolution


def test_data_dir_resolution_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SHORTLIST_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data.data_dir() == tmp_path / "xdg" / "shortlist-depth" / "data"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data.data_dir() == tmp_path / "home" / ".cache" / "shortlist-depth" / "data"
    monkeypatch.setenv("SHORTLIST_DATA_DIR", str(tmp_path / "env"))
    assert data.data_dir() == tmp_path / "env"
    assert data.data_dir(tmp_path / "explicit") == tmp_path / "explicit"
    assert data.resolve_data_dir(str(tmp_path / "explicit")) == tmp_path / "explicit"


def test_cache_dir_resolution_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SHORTLIST_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data.cache_dir() == tmp_path / "xdg" / "shortlist-depth" / "cache"
    monkeypatch.setenv("SHORTLIST_CACHE_DIR", str(tmp_path / "env"))
    assert data.cache_dir() == tmp_path / "env"
    assert data.cache_dir(tmp_path / "x") == tmp_path / "x"


# ------------------------------------------------------------------ pinned table


def test_table_is_pinned_and_consistent() -> None:
    assert set(data.DATASETS) == {"metatool", "toolbench"}
    entries = [e for files in data.DATASETS.values() for e in files.values()]
    assert len(entries) == 15
    for e in entries:
        assert re.fullmatch(r"[0-9a-f]{64}", e.sha256), e
        assert re.fullmatch(r"[0-9a-f]{40}", e.commit), e
        assert e.url == f"https://raw.githubusercontent.com/{e.repo}/{e.commit}/{e.repo_path}"
        assert e.relpath.startswith(e.dataset + "/")
        assert e.url_from("http://mirror/x/") == f"http://mirror/x/{e.repo_path}"
    packaged = sorted(e.relpath for e in entries if e.packaged)
    assert packaged == [
        "toolbench/toolenv2404_filtered_archive/MANIFEST.tsv",
        "toolbench/toolenv2404_filtered_archive/toolenv2404_filtered.tar.xz",
    ]


def test_status_against_real_or_empty_dir(tmp_path: Path) -> None:
    if REAL.is_dir():
        rows = data.status(REAL)
        assert len(rows) == 15
        assert all(r.present and r.verified for r in rows), [r for r in rows if not r.verified]
    rows = data.status(tmp_path)
    assert len(rows) == 15
    assert not any(r.present or r.verified for r in rows)
    assert all(r.path == tmp_path / r.relpath for r in rows)
    assert list(tmp_path.iterdir()) == []  # status never writes


def test_status_reports_bad_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    entry = _fake(monkeypatch, "files/good.txt")
    dest = tmp_path / entry.relpath
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"something else")
    (row,) = [r for r in data.status(tmp_path) if r.dataset == "fake"]
    assert row.present and not row.verified
    dest.write_bytes(GOOD)
    (row,) = [r for r in data.status(tmp_path) if r.dataset == "fake"]
    assert row.present and row.verified


# ------------------------------------------------------------------ present files


def test_present_file_verified_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    entry = _fake(monkeypatch, "files/good.txt")
    dest = tmp_path / entry.relpath
    dest.parent.mkdir(parents=True)
    dest.write_bytes(GOOD)
    before = _all_files(tmp_path)
    calls = {"n": 0}
    real_sha256 = hashlib.sha256

    def counting(*args: object) -> object:
        calls["n"] += 1
        return real_sha256(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(data.hashlib, "sha256", counting)
    for _ in range(5):
        assert data.ensure_file("fake", entry.relpath, tmp_path, download=False) == dest
    assert calls["n"] == 1  # hashed once, then remembered by (path, size, mtime)
    os.utime(dest, ns=(dest.stat().st_atime_ns, dest.stat().st_mtime_ns + 10**9))
    data.ensure_file("fake", entry.relpath, tmp_path, download=False)
    assert calls["n"] == 2  # a new mtime is a new version: hashed again
    assert _all_files(tmp_path) == before  # nothing written


def test_present_file_with_wrong_digest_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    entry = _fake(monkeypatch, "files/good.txt")
    dest = tmp_path / entry.relpath
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"tampered")
    actual = hashlib.sha256(b"tampered").hexdigest()
    with pytest.raises(DataError) as ei:
        data.ensure_file("fake", entry.relpath, tmp_path)
    msg = str(ei.value)
    assert str(dest) in msg and GOOD_SHA in msg and actual in msg
    assert dest.read_bytes() == b"tampered"  # never overwritten


def test_missing_without_download(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    entry = _fake(monkeypatch, "files/good.txt")
    with pytest.raises(DataError, match="missing"):
        data.ensure_file("fake", entry.relpath, tmp_path, download=False)
    assert list(tmp_path.iterdir()) == []


def test_unknown_dataset_and_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="unknown dataset"):
        data.ensure_file("nope", "x", tmp_path)
    with pytest.raises(DataError, match="no pinned file"):
        data.ensure_file("metatool", "metatool/nope.json", tmp_path)
    with pytest.raises(DataError, match="unknown dataset"):
        data.fetch("nope", tmp_path)


def test_packaged_file_cannot_be_downloaded(tmp_path: Path) -> None:
    rel = "toolbench/toolenv2404_filtered_archive/toolenv2404_filtered.tar.xz"
    with pytest.raises(DataError, match="packaged by the data team"):
        data.ensure_file("toolbench", rel, tmp_path, base_url="http://127.0.0.1:9")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ downloads


def test_download_good_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: tuple[str, Path, list[str]]
) -> None:
    base, served, log = server
    (served / "files").mkdir()
    (served / "files" / "good.txt").write_bytes(GOOD)
    entry = _fake(monkeypatch, "files/good.txt")
    dd = tmp_path / "data"
    path = data.ensure_file("fake", entry.relpath, dd, base_url=base)
    assert path == dd / entry.relpath and path.read_bytes() == GOOD
    assert _all_files(dd) == [entry.relpath]  # no temporary file left
    assert log == ["/files/good.txt"]
    data.ensure_file("fake", entry.relpath, dd, base_url=base)
    assert log == ["/files/good.txt"]  # present: not fetched again


def test_download_corrupted_file_not_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: tuple[str, Path, list[str]]
) -> None:
    base, served, _ = server
    (served / "files").mkdir()
    (served / "files" / "good.txt").write_bytes(GOOD[:-1] + b"!")
    entry = _fake(monkeypatch, "files/good.txt")
    dd = tmp_path / "data"
    with pytest.raises(DataError, match="sha256") as ei:
        data.ensure_file("fake", entry.relpath, dd, base_url=base)
    assert f"{base}/files/good.txt" in str(ei.value) and GOOD_SHA in str(ei.value)
    assert _all_files(dd) == []


def test_download_404_names_url(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: tuple[str, Path, list[str]]
) -> None:
    base, _, _ = server
    entry = _fake(monkeypatch, "files/absent.txt")
    dd = tmp_path / "data"
    with pytest.raises(DataError) as ei:
        data.ensure_file("fake", entry.relpath, dd, base_url=base)
    assert f"{base}/files/absent.txt" in str(ei.value) and "404" in str(ei.value)
    assert _all_files(dd) == []


def test_download_cut_short_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: tuple[str, Path, list[str]]
) -> None:
    base, _, _ = server
    entry = _fake(monkeypatch, "truncated/good.txt")
    dd = tmp_path / "data"
    with pytest.raises(DataError, match="truncated/good.txt: download cut short"):
        data.ensure_file("fake", entry.relpath, dd, base_url=base)
    assert _all_files(dd) == []


def test_download_unreachable_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    entry = _fake(monkeypatch, "files/good.txt")
    dd = tmp_path / "data"
    with pytest.raises(DataError, match="download failed"):
        data.ensure_file("fake", entry.relpath, dd, base_url="http://127.0.0.1:9")  # discard port
    assert _all_files(dd) == []


def test_fetch_dataset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: tuple[str, Path, list[str]]) -> None:
    base, served, _ = server
    (served / "files").mkdir()
    (served / "files" / "a.txt").write_bytes(GOOD)
    (served / "files" / "b.txt").write_bytes(b"bee")
    a = DataFile("fake", "fake/a.txt", "o/r", "c" * 40, "files/a.txt", GOOD_SHA)
    b = DataFile("fake", "fake/b.txt", "o/r", "c" * 40, "files/b.txt", hashlib.sha256(b"bee").hexdigest())
    p = DataFile("fake", "fake/packed.tar.xz", "o/r", "c" * 40, "dir/<x>.json", "0" * 64, packaged=True)
    monkeypatch.setitem(data.DATASETS, "fake", {e.relpath: e for e in (a, b, p)})
    dd = tmp_path / "data"
    with pytest.raises(DataError, match="packed.tar.xz"):
        data.fetch("fake", dd, base_url=base)
    assert _all_files(dd) == ["fake/a.txt", "fake/b.txt"]  # the downloadable files were fetched
    monkeypatch.setitem(data.DATASETS, "fake", {e.relpath: e for e in (a, b)})
    assert data.fetch("fake", dd, base_url=base) == [dd / "fake/a.txt", dd / "fake/b.txt"]
