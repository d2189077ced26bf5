"""``shortlist serve mcp --record DIR`` (:mod:`servers.record`): each call of an upstream tool written with the search
it followed, in the log format ``shortlist recommend --log`` reads, and the registry beside it, so the folder
retrains a policy as it is. In-process through the SDK's client; then the command over stdio, a real process in
front of a fake upstream, and ``shortlist train`` on what it wrote."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import anyio
import httpx
import pytest
from conftest import cli_env
from mcp import Client, StdioServerParameters
from starlette.testclient import TestClient
from test_experiments_toolsearch import run
from test_servers_openai import anthropic_tools, ask, chat, flat_tools, namespaced_request, respond
from test_toolsearch import mcp_tools, openai_tools

from benchmarks.toollog import read_tool_log
from benchmarks.tools import read_tools_file
from servers.fakes import fake_mcp_server, fake_openai_app, serve_in_thread
from servers.listen import wait_announced
from servers.mcp_server import SEARCH_TOOL, SearchSettings, ShortlistServer
from servers.openai_proxy import CHAT, MESSAGES, RESPONSES, ProxyConfig, _split_events, answer_calls, create_app
from servers.record import Recorder
from servers.upstreams import Upstream, Upstreams
from shortlist_depth.toolsearch import ToolSearch

TOOLS = mcp_tools()["tools"]


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_each_call_is_written_with_the_search_it_followed(tmp_path: Path) -> None:
    searcher = ToolSearch.from_tools(TOOLS)
    recorder = Recorder(tmp_path / "rec")

    async def go() -> list[list[str]]:
        async with Client(fake_mcp_server(TOOLS)) as up:
            registry = Upstreams([Upstream(up)], searcher, on_change=recorder.registry)
            await registry.refresh(strict=True)
            server = ShortlistServer(searcher, SearchSettings(pin=("get_weather",)), registry, recorder)
            async with Client(server) as c:
                await c.call_tool("book_flight", {})  # before any search: tied to nothing, not written
                shown = []
                for query, calls in (("please book my flight now", ["book_flight", "get_weather", "cancel_flight"]),
                                     ("please list my music now", ["list_music"])):  # fmt: skip
                    answer = await c.call_tool(SEARCH_TOOL, {"query": query})
                    shown.append([t["name"] for t in answer.structured_content["tools"]])
                    for name in calls:  # get_weather is pinned: the agent has it without searching
                        assert not (await c.call_tool(name, {})).is_error
                return shown

    shown = anyio.run(go)
    recorder.close()
    written = lines(tmp_path / "rec" / "log.jsonl")
    assert [(w["request"], w["tools"]) for w in written] == [
        ("please book my flight now", ["book_flight"]),
        ("please book my flight now", ["cancel_flight"]),
        ("please list my music now", ["list_music"]),
    ]
    assert [w["shortlist"] for w in written] == [shown[0], shown[0], shown[1]]
    assert {w["policy"] for w in written} == {searcher.policy.method} and all(w["k"] >= 1 for w in written)
    assert recorder.written == 3
    assert stat.S_IMODE((tmp_path / "rec" / "log.jsonl").stat().st_mode) == 0o600  # it holds the agents' queries
    # what `shortlist recommend --tools DIR/tools.json --log DIR/log.jsonl` reads
    registry = read_tools_file(tmp_path / "rec" / "tools.json")
    assert [t.name for t in registry] == [t["name"] for t in TOOLS]
    log = read_tool_log(tmp_path / "rec" / "log.jsonl", [t.name for t in registry])
    assert [(r.text, r.gold) for r in log.records] == [
        ("please book my flight now", ("book_flight", "cancel_flight")),
        ("please list my music now", ("list_music",)),
    ]
    assert log.duplicates == 1 and log.skipped == {}


def test_a_second_run_appends_and_keeps_the_tools_the_first_logged(tmp_path: Path) -> None:
    first = Recorder(tmp_path)
    first.registry(TOOLS[:10])
    first.searched("q", ["get_weather"], 1, "p")
    first.called("get_weather")
    first.close()
    second = Recorder(tmp_path)
    second.registry(TOOLS[5:20])  # another registry now: the first's tools stay, their lines still readable
    second.searched("r", ["list_music"], 1, "p")
    second.called(TOOLS[19]["name"])
    second.close()
    assert [w["request"] for w in lines(tmp_path / "log.jsonl")] == ["q", "r"]
    assert [t.name for t in read_tools_file(tmp_path / "tools.json")] == [t["name"] for t in TOOLS[:20]]
    assert not list(tmp_path.glob("*.tmp"))


def test_bad_record_folders_are_one_line_errors(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"--record .*file: not a folder"):
        Recorder(tmp_path / "file")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "tools.json").write_text('{"tools": 3}')
    with pytest.raises(ValueError, match=r"--record .*tools.json: not a tools file this server wrote"):
        Recorder(tmp_path / "other")


def test_the_cli_records_only_in_front_of_an_upstream_over_stdio() -> None:
    from experiments import options as o
    from experiments.cli import build, make_parser

    def args(*argv: str) -> o.ServeMcpArgs:
        return build(o.ServeMcpArgs, make_parser().parse_args(["serve", "mcp", *argv]))

    assert args("--upstream-command", "python s.py", "--record", "rec").record == "rec"
    with pytest.raises(ValueError, match="--record needs an upstream"):
        args("--tools", "t.json", "--record", "rec")
    with pytest.raises(ValueError, match="--record goes with --transport stdio"):
        args("--upstream-command", "python s.py", "--record", "rec", "--transport", "http")


def test_the_command_records_and_the_folder_trains_a_policy(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(mcp_tools()), encoding="utf-8")
    upstream = f"{sys.executable} -m servers.fakes mcp --tools {tools}"
    rec = tmp_path / "rec"
    argv = ["-m", "experiments.cli", "serve", "mcp", "--upstream-command", upstream, "--record", str(rec)]
    verbs, topics = ["get", "book", "cancel", "list", "search"], sorted({t["name"].split("_", 1)[1] for t in TOOLS})
    errlog = tmp_path / "serve.log"

    async def go() -> None:
        from mcp.client.stdio import stdio_client

        with errlog.open("w") as err:
            params = StdioServerParameters(command=sys.executable, args=argv, env=cli_env())
            async with Client(stdio_client(params, errlog=err)) as c:
                for i, topic in enumerate(topics):
                    verb = verbs[i % 5]
                    await c.call_tool(SEARCH_TOOL, {"query": f"please {verb} my {topic} now"})
                    await c.call_tool(f"{verb}_{topic}", {})

    anyio.run(go)
    assert f"--record {rec}: {len(topics)} tool calls written to {rec / 'log.jsonl'}" in errlog.read_text()
    assert len(lines(rec / "log.jsonl")) == len(topics)
    code, _, err = run(["train", "--log", str(rec), "--agent", "gap", "--out", str(tmp_path / "trained")])
    assert code == 0, err  # (--log DIR: the folder as --record wrote it, its tools.json the registry)
    explicit = ["train", "--tools", str(rec / "tools.json"), "--log", str(rec / "log.jsonl"), "--agent", "gap",
                "--out", str(tmp_path / "explicit")]  # fmt: skip
    assert run(explicit)[0] == 0
    same = [sorted(os.listdir(tmp_path / out / "runs")) for out in ("trained", "explicit")]  # one run id: one config
    assert same[0] == same[1] and len(same[0]) == 1
    assert (tmp_path / "trained" / "summary.csv").read_text() == (tmp_path / "explicit" / "summary.csv").read_text()


def test_a_log_folder_is_one_record_wrote(tmp_path: Path) -> None:
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / "log.jsonl").write_text("")
    code, _, err = run(["train", "--log", str(tmp_path / "rec"), "--agent", "gap", "--out", str(tmp_path / "o")])
    assert code == 2 and f"--log {tmp_path / 'rec'}: a folder is one `shortlist serve --record` wrote" in err
    assert f"missing: {tmp_path / 'rec' / 'tools.json'}" in err and not (tmp_path / "o").exists()


# --- shortlist serve openai --record: each answer's calls, with the request they answer ---


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with serve_in_thread(fake_openai_app()) as url:
        yield url + "/v1"


BODIES = {"chat": ("/v1/chat/completions", chat), "responses": ("/v1/responses", respond),
          "messages": ("/v1/messages", ask)}  # fmt: skip
FORCED = {"chat": {"type": "function", "function": {"name": "cancel_flight"}},
          "responses": {"type": "function", "name": "cancel_flight"},
          "messages": {"type": "tool", "name": "cancel_flight"}}  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", list(BODIES))
def test_the_proxy_records_the_calls_of_each_answer(tmp_path: Path, upstream: str, api: str, stream: bool) -> None:
    base = ToolSearch.from_tools(openai_tools())
    expected = base.search("please book my flight now")
    path, body = BODIES[api]
    recorder = Recorder(tmp_path / "rec")
    with TestClient(create_app(base, ProxyConfig(upstream), recorder)) as proxy:

        def post(calls: str, **extra: Any) -> None:
            r = proxy.post(path, json=body(stream=stream, **extra), headers={"x-fake-call": calls})
            assert r.status_code == 200, r.text

        post("book_flight,not_a_tool,book_flight")  # a name the request did not send is no label; a repeat once
        post("")  # a text answer: nothing
        post("cancel_flight", tool_choice=FORCED[api])  # forced: not the model's choice
    recorder.close()
    assert [(w["request"], w["tools"], w["shortlist"], w["k"], w["api"]) for w in lines(recorder.log)] == [
        ("please book my flight now", ["book_flight"], list(expected.names), expected.k, api)
    ]
    assert [t.name for t in read_tools_file(recorder.tools_file)] == [t["function"]["name"] for t in openai_tools()]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_call_of_a_namespaces_function_is_recorded_by_its_qualified_name(
    tmp_path: Path, upstream: str, stream: bool
) -> None:
    """A Responses ``function_call`` names its namespace apart (``"namespace": "trip"``): the log and ``tools.json``
    hold ``trip.book_flight``, the name it was ranked by, so the folder trains on it as it is; a call that leaves the
    namespace out is read as the function of that name when one namespace alone has it."""
    tools, ranked = namespaced_request()
    recorder = Recorder(tmp_path / "rec")
    with TestClient(create_app(ToolSearch.from_tools(openai_tools()), ProxyConfig(upstream), recorder)) as proxy:
        r = proxy.post("/v1/responses", json=respond(tools=tools, stream=stream),
                       headers={"x-fake-call": "trip.book_flight,book_flight,get_flight"})  # fmt: skip
        assert r.status_code == 200, r.text
    recorder.close()
    (line,) = lines(recorder.log)
    # a call without its namespace names the function one namespace alone has (book_flight: trip's, once)
    assert line["tools"] == ["trip.book_flight", "air.get_flight"] and "trip.book_flight" in line["shortlist"]
    assert [t.name for t in read_tools_file(recorder.tools_file)] == ranked


def test_the_official_clients_read_the_fakes_calls_and_the_proxy_records_them(tmp_path: Path, upstream: str) -> None:
    """The fake upstream's tool calls are the providers' shapes (the official clients parse them, streamed too),
    and each is recorded with its request."""
    from anthropic import Anthropic
    from openai import OpenAI

    recorder = Recorder(tmp_path / "rec")
    with TestClient(create_app(ToolSearch.from_tools(openai_tools()), ProxyConfig(upstream), recorder)) as proxy:
        proxy.headers["x-fake-call"] = "book_flight"
        oa = OpenAI(base_url="http://testserver/v1", api_key="k", http_client=proxy)
        chat_tools: Any = openai_tools()
        messages: Any = [{"role": "user", "content": "please book my flight now"}]
        with oa.chat.completions.stream(model="m", messages=messages, tools=chat_tools) as s:
            calls = s.get_final_completion().choices[0].message.tool_calls
        assert calls is not None and [c.function.name for c in calls] == ["book_flight"]  # type: ignore[union-attr]
        responses_tools: Any = flat_tools()
        with oa.responses.stream(model="m", input="please cancel my taxi now", tools=responses_tools) as s:
            assert [o.name for o in s.get_final_response().output] == ["book_flight"]  # type: ignore[union-attr]
        an = Anthropic(base_url="http://testserver", api_key="k", http_client=proxy)
        asked: Any = [{"role": "user", "content": "please get my weather now"}]
        anthropic: Any = anthropic_tools()
        with an.messages.stream(model="m", max_tokens=64, messages=asked, tools=anthropic) as s:
            used = s.get_final_message().content
        assert [(b.type, b.name) for b in used] == [("tool_use", "book_flight")]  # type: ignore[union-attr]
    recorder.close()
    assert [(w["request"], w["api"]) for w in lines(recorder.log)] == [
        ("please book my flight now", "chat"), ("please cancel my taxi now", "responses"),
        ("please get my weather now", "messages"),
    ]  # fmt: skip


def test_the_proxy_command_records_and_says_so(tmp_path: Path) -> None:
    env = cli_env()
    logs = {name: tmp_path / f"{name}.log" for name in ("upstream", "proxy")}
    procs: list[subprocess.Popen] = []
    try:
        with logs["upstream"].open("w") as out:
            procs.append(subprocess.Popen([sys.executable, "-m", "servers.fakes", "openai", "--port", "0"],
                                          stdout=out, stderr=subprocess.STDOUT, env=env))  # fmt: skip
        url = wait_announced(logs["upstream"], procs[0])
        cmd = [sys.executable, "-m", "experiments.cli", "serve", "openai", "--upstream", url, "--port", "0",
               "--record", str(tmp_path / "rec")]  # fmt: skip
        with logs["proxy"].open("w") as out:
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env))
        proxy = wait_announced(logs["proxy"], procs[1])
        for text in ("please book my flight now", "please list my music now"):
            r = httpx.post(f"{proxy}/chat/completions", json=chat(text), headers={"x-fake-call": "book_flight"},
                           timeout=30)  # fmt: skip
            assert r.status_code == 200, r.text
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)
    said = logs["proxy"].read_text()
    assert f"--record {tmp_path / 'rec'}: 2 tool calls written to {tmp_path / 'rec' / 'log.jsonl'}" in said, said
    assert [w["request"] for w in lines(tmp_path / "rec" / "log.jsonl")] == ["please book my flight now",
                                                                            "please list my music now"]  # fmt: skip


# --- what the review of the first version found ---


def test_an_upstream_that_compresses_its_answers_is_recorded_all_the_same(tmp_path: Path) -> None:
    """api.openai.com gzips its answers for a client that accepts it (the official clients do): the proxy asks for
    an uncompressed answer when it reads one, and the client still gets it whole."""
    recorder = Recorder(tmp_path / "rec")
    with serve_in_thread(fake_openai_app(gzip=True)) as url:
        app = create_app(ToolSearch.from_tools(openai_tools()), ProxyConfig(url + "/v1"), recorder)
        with TestClient(app) as proxy:
            for stream in (False, True):
                r = proxy.post("/v1/chat/completions", json=chat(stream=stream),
                               headers={"x-fake-call": "book_flight", "accept-encoding": "gzip"})  # fmt: skip
                assert r.status_code == 200 and "book_flight" in r.text
        with TestClient(create_app(ToolSearch.from_tools(openai_tools()), ProxyConfig(url + "/v1"))) as unrecorded:
            plain = unrecorded.post("/v1/chat/completions", json=chat(), headers={"accept-encoding": "gzip"})
            assert plain.headers.get("content-encoding") == "gzip"  # (not read: relayed as it came)
            assert plain.json()["choices"][0]["message"]["content"].startswith("tools: ")
    recorder.close()
    assert [w["tools"] for w in lines(recorder.log)] == [["book_flight"], ["book_flight"]]


def test_a_tools_file_that_cannot_be_written_leaves_shortlisting_on(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "rec")
    shutil.rmtree(tmp_path / "rec")  # (as root too: a folder gone, its files cannot be written)
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / "tools.json").mkdir()  # the file cannot be replaced
    with serve_in_thread(fake_openai_app()) as url:
        with TestClient(create_app(ToolSearch.from_tools(openai_tools()), ProxyConfig(url + "/v1"), recorder)) as p:
            r = p.post("/v1/chat/completions", json=chat())
    recorder.close()
    assert r.status_code == 200 and "x-shortlist-fallback" not in r.headers and "x-shortlist-k" in r.headers
    assert not list((tmp_path / "rec").glob("*.tmp"))


def test_a_part_of_a_line_is_cut_off_and_a_line_not_written_whole_is_taken_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "log.jsonl"
    part = '{"request": "b", "to' + "o" * 200_000  # a writer killed in a long line (over a read block)
    log.write_text('{"request": "a", "tools": ["get_weather"]}\n' + part, encoding="utf-8")
    recorder = Recorder(tmp_path)
    with caplog.at_level(logging.WARNING):
        recorder.write("c", ["list_music"], ["list_music"], 1, "p")
    assert f"a part of a line ({len(part)} bytes), left by a writer that stopped in it, cut off" in caplog.text
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[:7]))  # a full disk
    recorder.write("d", ["get_map"], ["get_map"], 1, "p")
    monkeypatch.undo()
    recorder.write("e", ["get_map"], ["get_map"], 1, "p")
    recorder.close()
    assert [w["request"] for w in lines(log)] == ["a", "c", "e"] and recorder.written == 2
    read = read_tool_log(log, ["get_weather", "list_music", "get_map"])
    assert [r.text for r in read.records] == ["a", "c", "e"]


def test_recorders_writing_at_once_never_mix_or_cut_lines(tmp_path: Path) -> None:
    """Threads stand in for processes (a flock is per open file: two recorders in one process exclude each other as
    two processes would); one writer is cut short mid-line now and then (a full disk, a kill), and the others go on:
    every whole line is kept, each part of a line is cut off, the tools of every writer kept."""
    recorders = [Recorder(tmp_path) for _ in range(4)]
    real_write = os.write
    short = threading.local()

    def flaky(fd: int, data: bytes) -> int:
        return real_write(fd, data[: len(data) // 2] if getattr(short, "now", False) else data)

    def work(i: int) -> None:
        for n in range(150):
            recorders[i].registry(TOOLS[i * 20 : i * 20 + 1 + n % 20])
            short.now = i == 3 and n % 10 == 0
            recorders[i].write(f"r{i}-{n}" + "x" * (3000 if n % 2 else 10), ["get_map"], ["get_map"], 1, "p")

    with mock.patch.object(os, "write", flaky):
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for r in recorders:
        r.close()
    written = [w["request"].rstrip("x") for w in lines(tmp_path / "log.jsonl")]  # (every line parses)
    assert sorted(written) == sorted(f"r{i}-{n}" for i in range(4) for n in range(150) if not (i == 3 and n % 10 == 0))
    assert sum(r.written for r in recorders) == len(written)
    kept = {t.name for t in read_tools_file(tmp_path / "tools.json")}
    assert kept == {t["name"] for i in range(4) for t in TOOLS[i * 20 : i * 20 + 20]}


def test_a_call_is_tied_to_the_latest_search_that_answered_its_tool(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path)
    recorder.searched("please book my flight now", ["book_flight", "cancel_flight"], 2, "p")
    recorder.searched("please list my music now", ["list_music", "book_flight"], 2, "p")
    recorder.searched("please get my weather now", ["get_weather"], 1, "p")  # three searches, then the calls
    recorder.called("cancel_flight")
    recorder.called("book_flight")  # in two answers: the latest of them
    recorder.called("get_map")  # in no answer: the latest search
    recorder.close()
    assert [(w["request"], w["tools"]) for w in lines(recorder.log)] == [
        ("please book my flight now", ["cancel_flight"]),
        ("please list my music now", ["book_flight"]),
        ("please get my weather now", ["get_map"]),
    ]


def test_a_streamed_answer_the_client_left_is_not_recorded(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "rec")
    with serve_in_thread(fake_openai_app()) as url:
        app = create_app(ToolSearch.from_tools(openai_tools()), ProxyConfig(url + "/v1"), recorder)
        with serve_in_thread(app) as proxy:
            headers = {"x-fake-call": "book_flight", "x-fake-chunk-gap": "0.3"}
            with httpx.stream("POST", f"{proxy}/v1/chat/completions", json=chat(stream=True), headers=headers,
                              timeout=30) as r:  # fmt: skip
                next(r.iter_raw())  # the first chunk, then gone
            time.sleep(1.5)  # (the whole answer would have come by now)
            with httpx.stream("POST", f"{proxy}/v1/chat/completions", json=chat("please list my music now",
                              stream=True), headers=headers, timeout=30) as r:  # fmt: skip
                r.read()  # read to its end: recorded
    recorder.close()
    assert [w["request"] for w in lines(recorder.log)] == ["please list my music now"]


@pytest.mark.parametrize(
    ("chunks", "events"),
    [
        ([b'data: {"a": 1}\n\ndata: {"b": 2}\n\n'], [b'{"a": 1}', b'{"b": 2}']),
        ([b'event: x\r\ndata: {"a": 1}\r\n\r\n'], [b'{"a": 1}']),  # CRLF
        ([b"data: 1\r", b"\n\r\ndata: 2\r\r", b"data: 3\n\n"], [b"1", b"2", b"3"]),  # CRLF split; CR alone
        ([b"data: 1\r", b"\ndata: 2\n\n"], [b"1\n2"]),  # a CR held: half of a CRLF, not a line of its own
        ([b"data\ndata: x\n\n"], [b"\nx"]),  # "data" alone: an empty data line
        ([b'data: {"a":\ndata: 1}\n', b"\n"], [b'{"a":\n1}']),  # a multi-line data field
        ([b"da", b'ta:{"a": 1}', b"\n", b"\n: comment\n\n"], [b'{"a": 1}', b""]),
    ],
)
def test_server_sent_events_are_split_as_the_spec_says(chunks: list[bytes], events: list[bytes]) -> None:
    got: list[bytes] = []
    held = b""
    for chunk in chunks:
        complete, held = _split_events(held + chunk)
        got += complete
    assert got == events and held == b""


def test_each_event_kind_that_carries_a_call_is_read() -> None:
    item = {"type": "response.output_item.added", "item": {"type": "function_call", "name": "book_flight"}}
    assert answer_calls(RESPONSES, item) == ["book_flight"]
    echoed = {"type": "response.created", "response": {"output": [], "tools": [{"type": "function", "name": "x"}]}}
    assert answer_calls(RESPONSES, echoed) == []  # the request's tools, echoed: not calls
    delta = {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "a"}},
                                                   {"index": 1, "function": {"name": "b"}}]}}]}  # fmt: skip
    assert answer_calls(CHAT, delta) == ["a", "b"]  # parallel calls
    block = {"type": "content_block_start", "content_block": {"type": "tool_use", "name": "get_map", "input": {}}}
    assert answer_calls(MESSAGES, block) == ["get_map"]
    assert answer_calls(MESSAGES, {"type": "message_start", "message": {"content": []}}) == []


def test_a_compressing_upstreams_responses_id_is_read_without_recording(tmp_path: Path) -> None:
    """The proxy reads a Responses answer's id (a continuation is shortlisted on its request's text): it asks for
    the answer uncompressed, recording or not."""
    with serve_in_thread(fake_openai_app(gzip=True)) as url:
        with TestClient(create_app(ToolSearch.from_tools(openai_tools()), ProxyConfig(url + "/v1"))) as proxy:
            first = proxy.post("/v1/responses", json=respond(), headers={"accept-encoding": "gzip"})
            then = proxy.post("/v1/responses", json=respond([{"type": "function_call_output", "call_id": "c",
                              "output": "ok"}], previous_response_id=first.json()["id"]))  # fmt: skip
    assert then.headers.get("x-shortlist-text") == "previous response", then.headers


def test_the_first_event_watched_may_follow_a_keep_alive() -> None:
    from servers.openai_proxy import _first_id

    seen: list[str] = []
    see = _first_id(seen.append)
    assert see(b"") is True  # a comment: still waiting
    assert see(b'{"type": "response.created", "response": {"id": "resp-1"}}') is False
    assert seen == ["resp-1"]
