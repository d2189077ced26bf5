"""benchmarks.bfcl: the real BFCL v4 simple_python data and malformed-input handling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.bfcl import ANSWERS, QUESTIONS, load_bfcl, locate_files, tool_text
from benchmarks.corpus import DataError, ToolCorpus, sha256_file

# --------------------------------------------------------------------------- real data


@pytest.fixture(scope="module")
def corpus() -> ToolCorpus:
    return load_bfcl()


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


def test_real_gold_is_entrys_own_function() -> None:
    """In v4 the ground-truth name always equals the entry's (single) function."""
    q_path, a_path = locate_files()
    answers = {}
    for line in a_path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        answers[row["id"]] = [next(iter(g)) for g in row["ground_truth"]]
    corpus = load_bfcl()
    gold = {q.qid: q.gold for q in corpus.queries}
    for line in q_path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        assert [f["name"] for f in row["function"]] == answers[row["id"]]
        assert gold[row["id"]] == tuple(answers[row["id"]])


def test_real_known_entry(corpus: ToolCorpus) -> None:
    i = corpus.tool_names.index("calculate_triangle_area")
    assert corpus.tool_texts[i] == (
        "calculate triangle area. Calculate the area of a triangle given its base and height. "
        "Parameters: base, height, unit"
    )
    q0 = corpus.queries[0]
    assert q0.qid == "simple_python_0"
    assert q0.text == "Find the area of a triangle with a base of 10 units and height of 5 units."
    assert q0.gold == ("calculate_triangle_area",)


def test_real_registry_order_and_text_format(corpus: ToolCorpus) -> None:
    """Registry = distinct names in order of first appearance; text follows the docstring."""
    q_path, _ = locate_files()
    first: dict[str, dict] = {}
    for line in q_path.read_text(encoding="utf-8").splitlines():
        for fn in json.loads(line)["function"]:
            first.setdefault(fn["name"], fn)
    assert corpus.tool_names == tuple(first)
    for name, text in zip(corpus.tool_names, corpus.tool_texts, strict=True):
        fn = first[name]
        pretty = name.replace("_", " ").replace(".", " ")
        params = ", ".join(fn["parameters"]["properties"])
        assert text == f"{pretty}. {fn['description'].strip()} Parameters: {params}".strip()


def test_real_inputs_sha256(corpus: ToolCorpus) -> None:
    q_path, a_path = locate_files()
    assert corpus.inputs_sha256 == {
        QUESTIONS: sha256_file(str(q_path)),
        ANSWERS: sha256_file(str(a_path)),
    }


def test_real_load_is_deterministic(corpus: ToolCorpus) -> None:
    assert load_bfcl().fingerprint() == corpus.fingerprint()


# --------------------------------------------------------------------------- tool_text


def test_tool_text_dots_and_no_params() -> None:
    fn = {
        "name": "math.hypot_2d",
        "description": "  Hypotenuse. ",
        "parameters": {"properties": {}},
    }
    assert tool_text(fn) == "math hypot 2d. Hypotenuse. Parameters:"
    assert tool_text({"name": "f"}) == "f.  Parameters:"


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
    assert c.tool_texts == ("alpha. Does alpha. Parameters: x", "beta. Does beta. Parameters: x")
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
    assert c.tool_texts == ("alpha. Does alpha. Parameters: x",)


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
    assert locate_files() == (q, a)
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
