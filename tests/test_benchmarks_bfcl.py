"""benchmarks.bfcl: the real BFCL v4 simple_python data, the source lookup order, malformed input."""

from __future__ import annotations

import hashlib
import importlib
import json
import zipfile
from pathlib import Path

import pytest

from benchmarks import data
from benchmarks.bfcl import (
    ANSWERS,
    ENV_BFCL_DIR,
    MEMBER_SHA256,
    QUESTIONS,
    BfclSource,
    load_bfcl,
    locate_files,
    tool_text,
)
from benchmarks.corpus import DataError, ToolCorpus, sha256_file

# --------------------------------------------------------------------------- real data


@pytest.fixture(scope="module")
def real_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pinned wheel, downloaded by pip into an empty cache folder: the suite's one real download."""
    root = tmp_path_factory.mktemp("bfcl_real")
    return data.ensure_wheel(data.WHEELS["bfcl"], root / "data", root / "cache")


@pytest.fixture(scope="module")
def corpus(real_wheel: Path) -> ToolCorpus:
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(ENV_BFCL_DIR, raising=False)
        return load_bfcl(data_dir=real_wheel.parents[2] / "data", cache_dir=real_wheel.parents[1], download=False)


def _real_text(wheel: Path, member: str) -> str:
    return data.read_wheel_member(wheel, member).decode("utf-8")


def test_real_pip_download_is_pinned(real_wheel: Path) -> None:
    pinned = data.WHEELS["bfcl"]
    assert (pinned.project, pinned.version) == ("bfcl-eval", "2026.3.23")
    assert real_wheel.name == pinned.filename == "bfcl_eval-2026.3.23-py3-none-any.whl"
    assert hashlib.sha256(real_wheel.read_bytes()).hexdigest() == pinned.sha256
    assert sorted(p.name for p in real_wheel.parent.iterdir()) == [pinned.filename]  # no temporaries left
    with zipfile.ZipFile(real_wheel) as zf:
        for member, sha in MEMBER_SHA256.items():
            assert hashlib.sha256(zf.read(member)).hexdigest() == sha, member
    # present and verified: a second call never downloads
    calls: list[str] = []
    again = data.ensure_wheel(
        pinned, real_wheel.parents[2] / "data", real_wheel.parents[1], downloader=lambda r, d: calls.append(r)
    )
    assert again == real_wheel and calls == []


def test_real_counts(corpus: ToolCorpus) -> None:
    assert corpus.name == "bfcl"
    assert len(corpus.queries) == 400
    assert len(corpus.tool_names) == 370
    assert len(set(corpus.tool_names)) == 370
    assert len(corpus.tool_texts) == 370
    assert len({q.qid for q in corpus.queries}) == 400


def test_real_every_query_has_exactly_one_gold_in_registry(corpus: ToolCorpus) -> None:
    known = set(corpus.tool_names)
    for q in corpus.queries:
        assert len(q.gold) == 1, q.qid
        assert q.gold[0] in known, q.qid
        assert q.text.strip(), q.qid


def test_real_gold_is_entrys_own_function(real_wheel: Path, corpus: ToolCorpus) -> None:
    """In v4 the ground-truth name always equals the entry's (single) function."""
    answers = {}
    for line in _real_text(real_wheel, ANSWERS).splitlines():
        row = json.loads(line)
        answers[row["id"]] = [next(iter(g)) for g in row["ground_truth"]]
    gold = {q.qid: q.gold for q in corpus.queries}
    for line in _real_text(real_wheel, QUESTIONS).splitlines():
        row = json.loads(line)
        assert [f["name"] for f in row["function"]] == answers[row["id"]]
        assert gold[row["id"]] == tuple(answers[row["id"]])


def test_real_known_entry(corpus: ToolCorpus) -> None:
    i = corpus.tool_names.index("calculate_triangle_area")
    assert corpus.tool_texts[i] == (
        "Calculate the area of a triangle given its base and height. Parameters: base, height, unit"
    )
    q0 = corpus.queries[0]
    assert q0.qid == "simple_python_0"
    assert q0.text == "Find the area of a triangle with a base of 10 units and height of 5 units."
    assert q0.gold == ("calculate_triangle_area",)


def test_real_registry_order_and_text_format(real_wheel: Path, corpus: ToolCorpus) -> None:
    """Registry = distinct names in order of first appearance; text follows the docstring."""
    first: dict[str, dict] = {}
    for line in _real_text(real_wheel, QUESTIONS).splitlines():
        for fn in json.loads(line)["function"]:
            first.setdefault(fn["name"], fn)
    assert corpus.tool_names == tuple(first)
    for name, text in zip(corpus.tool_names, corpus.tool_texts, strict=True):
        fn = first[name]
        params = ", ".join(fn["parameters"]["properties"])
        assert text == f"{fn['description'].strip()} Parameters: {params}".strip()


def test_real_inputs_sha256(corpus: ToolCorpus) -> None:
    """The digests every committed BFCL result recorded: the corpus is unchanged by the wheel route."""
    assert corpus.inputs_sha256 == MEMBER_SHA256


def test_real_load_is_deterministic(real_wheel: Path, corpus: ToolCorpus) -> None:
    source = BfclSource("wheel", QUESTIONS, ANSWERS, real_wheel)
    assert load_bfcl(source=source).fingerprint() == corpus.fingerprint()


def test_real_wheel_and_installed_routes_are_identical(
    real_wheel: Path, corpus: ToolCorpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wheel unpacked as an installed distribution (what pip install does) gives the same corpus."""
    site = tmp_path / "site"
    with zipfile.ZipFile(real_wheel) as zf:
        zf.extractall(site)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    monkeypatch.delenv(ENV_BFCL_DIR, raising=False)
    source = locate_files(tmp_path / "no_data", tmp_path / "no_cache", download=False)
    assert source.route == "installed" and source.wheel is None
    assert Path(source.questions).is_relative_to(site)
    installed = load_bfcl(source=source)
    assert installed == corpus  # names, texts, queries, gold and input digests
    assert installed.fingerprint() == corpus.fingerprint()


# --------------------------------------------------------------------------- tool_text


def test_tool_text_dots_and_no_params() -> None:
    fn = {
        "name": "math.hypot_2d",
        "description": "  Hypotenuse. ",
        "parameters": {"properties": {}},
    }
    assert tool_text(fn, "rich") == "math hypot 2d. Hypotenuse. Parameters:"
    assert tool_text({"name": "f"}, "rich") == "f.  Parameters:"
    assert tool_text(fn) == tool_text(fn, "spec") == "Hypotenuse. Parameters:"
    assert tool_text({"name": "f"}) == "Parameters:"


def test_tool_text_default_is_spec_and_rich_is_a_named_option(tmp_path) -> None:
    """SPEC's text (description + parameter names) by default, the function name only with
    ``text_kind="rich"``; an unknown kind is refused before any file is read."""
    fn = {"name": "get_weather", "description": "Weather now.", "parameters": {"properties": {"city": {}}}}
    assert tool_text(fn) == "Weather now. Parameters: city"
    assert tool_text(fn, "rich") == "get weather. Weather now. Parameters: city"
    with pytest.raises(ValueError, match="unknown tool text 'fancy'"):
        tool_text(fn, "fancy")
    with pytest.raises(ValueError, match="unknown tool text 'fancy'"):
        load_bfcl(tmp_path / "missing_q.json", tmp_path / "missing_a.json", text_kind="fancy")


# --------------------------------------------------------------------------- tiny files


def _fn(name: str, params: tuple[str, ...] = ("x",)) -> dict:
    return {
        "name": name,
        "description": f"Does {name}.",
        "parameters": {"type": "dict", "properties": {p: {"type": "string"} for p in params}},
    }


def _q(qid: str, text: str, fn: str) -> dict:
    return {"id": qid, "question": [[{"role": "user", "content": text}]], "function": [_fn(fn)]}


def _a(qid: str, fn: str) -> dict:
    return {"id": qid, "ground_truth": [{fn: {"x": ["1"]}}]}


def _write(root: Path, questions: list, answers: list) -> tuple[Path, Path]:
    """Write JSON-lines files in the package layout under ``root`` (str rows verbatim)."""
    q = root / "BFCL_v4_simple_python.json"
    a = root / "possible_answer" / "BFCL_v4_simple_python.json"
    a.parent.mkdir(parents=True, exist_ok=True)
    for path, rows in ((q, questions), (a, answers)):
        lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return q, a


GOOD_Q = [
    _q("q0", "first query", "alpha"),
    _q("q1", "second query", "beta"),
    _q("q2", "third", "alpha"),
]
GOOD_A = [_a("q0", "alpha"), _a("q1", "beta"), _a("q2", "alpha")]


def test_tiny_files_load(tmp_path: Path) -> None:
    q, a = _write(tmp_path, GOOD_Q, GOOD_A)
    c = load_bfcl(q, a)
    assert c.tool_names == ("alpha", "beta")
    assert c.tool_texts == ("Does alpha. Parameters: x", "Does beta. Parameters: x")
    rich = load_bfcl(q, a, text_kind="rich")
    assert rich.tool_texts == ("alpha. Does alpha. Parameters: x", "beta. Does beta. Parameters: x")
    assert rich.queries == c.queries and rich.fingerprint() != c.fingerprint()
    assert [(r.qid, r.text, r.gold) for r in c.queries] == [
        ("q0", "first query", ("alpha",)),
        ("q1", "second query", ("beta",)),
        ("q2", "third", ("alpha",)),
    ]


def test_first_definition_wins_and_user_turns_concatenated(tmp_path: Path) -> None:
    q0 = _q("q0", "ignored", "alpha")
    q0["question"] = [
        [
            {"role": "system", "content": "SYSTEM"},
            {"role": "user", "content": "part one"},
            {"role": "assistant", "content": "ASSISTANT"},
            {"role": "user", "content": "part two"},
        ]
    ]
    q1 = _q("q1", "again", "alpha")
    q1["function"] = [_fn("alpha", ("other", "params"))]
    q, a = _write(tmp_path, ["", q0, "   ", q1], [_a("q0", "alpha"), _a("q1", "alpha")])
    c = load_bfcl(q, a)
    assert c.queries[0].text == "part one part two"
    assert c.tool_texts == ("Does alpha. Parameters: x",)


def test_malformed_json_line_names_file_and_line(tmp_path: Path) -> None:
    q, a = _write(tmp_path, [GOOD_Q[0], GOOD_Q[1], '{"id": "q2", "question": [[{', GOOD_Q[2]], GOOD_A)
    with pytest.raises(DataError) as exc:
        load_bfcl(q, a)
    assert f"{q}:3" in str(exc.value)


def test_malformed_json_in_answers_names_file_and_line(tmp_path: Path) -> None:
    q, a = _write(tmp_path, GOOD_Q, [GOOD_A[0], "not json at all", GOOD_A[2]])
    with pytest.raises(DataError) as exc:
        load_bfcl(q, a)
    assert f"{a}:2" in str(exc.value)


def test_line_without_id_names_file_and_line(tmp_path: Path) -> None:
    q, a = _write(tmp_path, [GOOD_Q[0], '["a list"]'], GOOD_A)
    with pytest.raises(DataError, match="id") as exc:
        load_bfcl(q, a)
    assert f"{q}:2" in str(exc.value)


def test_empty_file(tmp_path: Path) -> None:
    q, a = _write(tmp_path, GOOD_Q, GOOD_A)
    q.write_text("\n\n", encoding="utf-8")
    with pytest.raises(DataError, match="no entries") as exc:
        load_bfcl(q, a)
    assert str(q) in str(exc.value)


def test_gold_missing_from_registry_is_named(tmp_path: Path) -> None:
    q, a = _write(tmp_path, GOOD_Q, [GOOD_A[0], _a("q1", "no_such_function"), GOOD_A[2]])
    with pytest.raises(DataError) as exc:
        load_bfcl(q, a)
    msg = str(exc.value)
    assert "no_such_function" in msg
    assert "q1" in msg
    assert str(a) in msg


def test_gold_mismatching_entrys_function_is_rejected(tmp_path: Path) -> None:
    # q1's entry defines 'beta' but its ground truth names 'alpha' (present in the registry).
    q, a = _write(tmp_path, GOOD_Q, [GOOD_A[0], _a("q1", "alpha"), GOOD_A[2]])
    with pytest.raises(DataError, match="'q1'") as exc:
        load_bfcl(q, a)
    assert f"{a}:2" in str(exc.value)


@pytest.mark.parametrize("content", ["", "   \n\t "])
def test_empty_query_names_id(tmp_path: Path, content: str) -> None:
    q, a = _write(tmp_path, [GOOD_Q[0], _q("q_empty", content, "beta")], [GOOD_A[0], _a("q_empty", "beta")])
    with pytest.raises(DataError, match="q_empty") as exc:
        load_bfcl(q, a)
    assert f"{q}:2" in str(exc.value)


def test_query_with_no_user_turn_is_empty(tmp_path: Path) -> None:
    row = _q("q_sys", "x", "beta")
    row["question"] = [[{"role": "system", "content": "only a system prompt"}]]
    q, a = _write(tmp_path, [row], [_a("q_sys", "beta")])
    with pytest.raises(DataError, match="q_sys"):
        load_bfcl(q, a)


def test_malformed_question_field(tmp_path: Path) -> None:
    row = _q("q_bad", "x", "beta")
    row["question"] = [[{"role": "user"}]]  # no 'content'
    q, a = _write(tmp_path, [row], [_a("q_bad", "beta")])
    with pytest.raises(DataError, match="question") as exc:
        load_bfcl(q, a)
    assert f"{q}:1" in str(exc.value)


@pytest.mark.parametrize("function", [None, [], [{"description": "no name"}], "alpha"])
def test_malformed_function_field(tmp_path: Path, function: object) -> None:
    row = _q("q0", "x", "alpha")
    row["function"] = function
    q, a = _write(tmp_path, [row], [GOOD_A[0]])
    with pytest.raises(DataError, match="function") as exc:
        load_bfcl(q, a)
    assert f"{q}:1" in str(exc.value)


def test_question_without_ground_truth(tmp_path: Path) -> None:
    q, a = _write(tmp_path, GOOD_Q, [GOOD_A[0], GOOD_A[2]])
    with pytest.raises(DataError, match="ground truth") as exc:
        load_bfcl(q, a)
    assert "'q1'" in str(exc.value)
    assert str(a) in str(exc.value)


@pytest.mark.parametrize("ground_truth", [None, 3, [], [{}], ["alpha"], [{"alpha": {}, "beta": {}}]])
def test_malformed_ground_truth(tmp_path: Path, ground_truth: object) -> None:
    q, a = _write(tmp_path, GOOD_Q[:1], [{"id": "q0", "ground_truth": ground_truth}])
    with pytest.raises(DataError, match="ground_truth") as exc:
        load_bfcl(q, a)
    assert f"{a}:1" in str(exc.value)


def test_duplicate_query_id(tmp_path: Path) -> None:
    q, a = _write(tmp_path, [GOOD_Q[0], _q("q0", "again", "beta")], GOOD_A)
    with pytest.raises(DataError, match="duplicate query id 'q0'"):
        load_bfcl(q, a)


def test_duplicate_answer_id(tmp_path: Path) -> None:
    q, a = _write(tmp_path, GOOD_Q, [*GOOD_A, _a("q1", "beta")])
    with pytest.raises(DataError, match="duplicate query id 'q1'"):
        load_bfcl(q, a)


@pytest.mark.parametrize("which", ["questions", "answers"])
def test_non_utf8_bytes(tmp_path: Path, which: str) -> None:
    q, a = _write(tmp_path, GOOD_Q, GOOD_A)
    target = q if which == "questions" else a
    target.write_bytes(target.read_bytes().replace(b"query", b"qu\xff\xfery", 1).replace(b"alpha", b"\xe9", 1))
    with pytest.raises(DataError, match="UTF-8") as exc:
        load_bfcl(q, a)
    assert str(target) in str(exc.value)


def test_utf8_text_is_kept(tmp_path: Path) -> None:
    q, a = _write(tmp_path, [_q("q0", "Café — naïve 温度", "alpha")], [GOOD_A[0]])
    assert load_bfcl(q, a).queries[0].text == "Café — naïve 温度"


# --------------------------------------------------------------------------- SHORTLIST_BFCL_DIR


def test_env_override_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    q, a = _write(tmp_path, GOOD_Q, GOOD_A)
    monkeypatch.setenv("SHORTLIST_BFCL_DIR", str(tmp_path))
    src = locate_files()
    assert (src.route, src.questions, src.answers, src.wheel) == ("dir", q, a, None)
    c = load_bfcl()
    assert c.tool_names == ("alpha", "beta")
    assert len(c.queries) == 3
    assert c.inputs_sha256 == {QUESTIONS: sha256_file(str(q)), ANSWERS: sha256_file(str(a))}


@pytest.mark.parametrize("drop", ["questions", "answers"])
def test_env_override_missing_file_names_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, drop: str) -> None:
    q, a = _write(tmp_path, GOOD_Q, GOOD_A)
    missing = q if drop == "questions" else a
    missing.unlink()
    monkeypatch.setenv("SHORTLIST_BFCL_DIR", str(tmp_path))
    with pytest.raises(DataError, match="missing") as exc:
        load_bfcl()
    assert str(missing) in str(exc.value)


def test_env_override_nonexistent_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "nowhere"
    monkeypatch.setenv("SHORTLIST_BFCL_DIR", str(folder))
    with pytest.raises(DataError) as exc:
        load_bfcl()
    assert str(folder / "BFCL_v4_simple_python.json") in str(exc.value)


# --------------------------------------------------------------------------- wheel and lookup order


def _lines(rows: list) -> bytes:
    return ("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n").encode()


def _fake_wheel(path: Path, questions: list = GOOD_Q, answers: list | None = GOOD_A) -> Path:
    """A zip laid out like the bfcl-eval wheel (``answers=None`` leaves that member out)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bfcl_eval/__init__.py", "")
        zf.writestr(QUESTIONS, _lines(questions))
        if answers is not None:
            zf.writestr(ANSWERS, _lines(answers))
    return path


_REAL_DISTRIBUTION = importlib.metadata.distribution


class Env:
    """Fake data/cache folders, a fake pinned wheel and a counting downloader."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp = tmp_path
        self.data_dir, self.cache_dir = tmp_path / "data", tmp_path / "cache"
        self.source_wheel = _fake_wheel(tmp_path / "served" / "bfcl.whl")
        self.sha = hashlib.sha256(self.source_wheel.read_bytes()).hexdigest()
        real = data.WHEELS["bfcl"]
        self.pinned = data.PipWheel(real.dataset, real.project, real.version, real.filename, self.sha)
        monkeypatch.setitem(data.WHEELS, "bfcl", self.pinned)
        monkeypatch.delenv(ENV_BFCL_DIR, raising=False)
        self.monkeypatch = monkeypatch
        self.calls: list[str] = []
        self.not_installed()

    def downloader(self, requirement: str, folder: Path) -> None:
        self.calls.append(requirement)
        (folder / self.pinned.filename).write_bytes(self.source_wheel.read_bytes())

    def place(self, where: str) -> Path:
        root = self.data_dir if where == "data" else self.cache_dir
        dest = root / self.pinned.relpath
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(self.source_wheel.read_bytes())
        return dest

    def not_installed(self) -> None:
        def missing(name: str) -> importlib.metadata.Distribution:
            raise importlib.metadata.PackageNotFoundError(name)

        self.monkeypatch.setattr(importlib.metadata, "distribution", missing)

    def pin(self, wheel: Path) -> None:
        """Make ``wheel``'s digest the pinned one."""
        self.pinned = data.PipWheel("bfcl", "bfcl-eval", "2026.3.23", self.pinned.filename, sha256_file(str(wheel)))
        self.monkeypatch.setitem(data.WHEELS, "bfcl", self.pinned)

    def installed(self, questions: list = GOOD_Q, pinned_content: bool = True) -> Path:
        """Install the tiny files as a distribution on sys.path (unpacked, never imported)."""
        self.monkeypatch.setattr(importlib.metadata, "distribution", _REAL_DISTRIBUTION)
        site = self.tmp / "site"
        for member, content in ((QUESTIONS, _lines(questions)), (ANSWERS, _lines(GOOD_A))):
            (site / member).parent.mkdir(parents=True, exist_ok=True)
            (site / member).write_bytes(content)
        info = site / "bfcl_eval-0.0.1.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bfcl-eval\nVersion: 0.0.1\n")
        self.monkeypatch.syspath_prepend(str(site))
        importlib.invalidate_caches()
        shas = {m: hashlib.sha256((site / m).read_bytes()).hexdigest() for m in (QUESTIONS, ANSWERS)}
        if not pinned_content:
            shas[QUESTIONS] = "0" * 64
        self.monkeypatch.setattr("benchmarks.bfcl.MEMBER_SHA256", shas)
        return site

    def locate(self, download: bool = True) -> BfclSource:
        return locate_files(self.data_dir, self.cache_dir, download=download, downloader=self.downloader)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(tmp_path, monkeypatch)


def test_wheel_route_reads_members_from_the_zip(env: Env) -> None:
    wheel = env.place("data")
    src = env.locate()
    assert (src.route, src.wheel, src.questions, src.answers) == ("wheel", wheel, QUESTIONS, ANSWERS)
    c = load_bfcl(data_dir=env.data_dir, cache_dir=env.cache_dir)
    assert c.tool_names == ("alpha", "beta") and len(c.queries) == 3
    assert c.inputs_sha256 == {
        QUESTIONS: hashlib.sha256(_lines(GOOD_Q)).hexdigest(),
        ANSWERS: hashlib.sha256(_lines(GOOD_A)).hexdigest(),
    }
    assert env.calls == []


def test_wheel_route_same_corpus_as_plain_files(env: Env) -> None:
    env.place("cache")
    q, a = _write(env.tmp / "plain", GOOD_Q, GOOD_A)
    assert load_bfcl(data_dir=env.data_dir, cache_dir=env.cache_dir) == load_bfcl(q, a)


def test_errors_inside_the_wheel_name_wheel_member_and_line(env: Env) -> None:
    bad = [GOOD_Q[0], '{"id": "q1", "question": [[{', GOOD_Q[2]]
    wheel = _fake_wheel(env.data_dir / env.pinned.relpath, bad)
    env.pin(wheel)
    with pytest.raises(DataError, match="malformed JSON") as exc:
        load_bfcl(data_dir=env.data_dir, cache_dir=env.cache_dir)
    assert f"{wheel}!{QUESTIONS}:2:" in str(exc.value)


def test_wheel_missing_member_is_named(env: Env) -> None:
    wheel = _fake_wheel(env.cache_dir / env.pinned.relpath, answers=None)
    env.pin(wheel)
    with pytest.raises(DataError, match="no such member") as exc:
        load_bfcl(data_dir=env.data_dir, cache_dir=env.cache_dir)
    assert f"{wheel}!{ANSWERS}" in str(exc.value)


def test_bad_present_wheel_is_an_error_not_a_fallback(env: Env) -> None:
    wheel = env.place("data")
    wheel.write_bytes(wheel.read_bytes()[:100])  # truncated
    env.place("cache")  # a good copy elsewhere is not used silently
    env.installed()
    with pytest.raises(DataError, match="not a valid zip archive") as exc:
        env.locate()
    assert str(wheel) in str(exc.value) and "\n" not in str(exc.value)
    assert env.calls == []


def test_order_env_dir_wins(env: Env) -> None:
    env.place("data")
    env.installed()
    q, a = _write(env.tmp / "override", GOOD_Q[:1], GOOD_A[:1])
    env.monkeypatch.setenv(ENV_BFCL_DIR, str(env.tmp / "override"))
    src = env.locate()
    assert (src.route, src.questions, src.answers) == ("dir", q, a)
    assert len(load_bfcl(data_dir=env.data_dir, cache_dir=env.cache_dir).queries) == 1


def test_order_data_dir_wheel_before_cache_wheel_before_installed(env: Env) -> None:
    env.installed()
    cached = env.place("cache")
    assert env.locate().wheel == cached
    in_data = env.place("data")
    assert env.locate().wheel == in_data
    assert env.calls == []


def test_order_installed_before_download(env: Env) -> None:
    site = env.installed()
    src = env.locate()
    assert src.route == "installed" and src.wheel is None
    assert (src.questions, src.answers) == (site / QUESTIONS, site / ANSWERS)
    assert env.calls == []
    assert load_bfcl(source=src) == load_bfcl(*_write(env.tmp / "plain", GOOD_Q, GOOD_A))


def test_installed_with_other_content_is_passed_over(env: Env) -> None:
    env.installed(pinned_content=False)
    src = env.locate()
    assert src.route == "wheel" and env.calls == ["bfcl-eval==2026.3.23"]
    (env.cache_dir / env.pinned.relpath).unlink()
    with pytest.raises(DataError, match="other data"):
        env.locate(download=False)


def test_download_last_then_cached(env: Env) -> None:
    src = env.locate()
    dest = env.cache_dir / env.pinned.relpath
    assert src.route == "wheel" and src.wheel == dest
    assert dest.read_bytes() == env.source_wheel.read_bytes()
    assert env.calls == ["bfcl-eval==2026.3.23"]
    for _ in range(3):
        assert env.locate().wheel == dest
    assert env.calls == ["bfcl-eval==2026.3.23"]  # verified copy present: never downloaded again
    assert not (env.data_dir).exists()  # nothing written into the data directory


def test_nothing_found_and_downloads_disabled(env: Env) -> None:
    with pytest.raises(DataError, match="downloads are disabled") as exc:
        env.locate(download=False)
    msg = str(exc.value)
    assert "not installed" in msg and "shortlist data fetch bfcl" in msg and ENV_BFCL_DIR in msg
    assert str(env.data_dir / "bfcl") in msg and str(env.cache_dir / "bfcl") in msg and "\n" not in msg
    assert env.calls == []
