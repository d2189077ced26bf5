"""``shortlist``: the command line, a dispatch table over :mod:`experiments.options`.

Each command is a row of :data:`COMMANDS`: its option dataclasses (one field = one flag,
help from the field's metadata, default printed once) and the function that runs it.
User errors print one line ``shortlist: error: ...`` and exit with status 2; nothing
half-written is left behind.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args, get_origin, get_type_hints

from benchmarks.corpus import DataError
from experiments import options as o

if TYPE_CHECKING:
    from servers.record import Recorder


def _declaring(cls: type, name: str) -> type:
    """The class of ``cls``'s MRO that declares the field ``name`` (its help group is the field's)."""
    return next(c for c in reversed(cls.__mro__) if name in c.__dict__.get("__annotations__", {}))


def add_dataclass_args(parser: argparse.ArgumentParser, cls: type) -> None:
    """One ``--flag`` per dataclass field, typed from the annotation, help from metadata, under the help group of
    the class that declares it (``HELP_GROUP``: data, policy, learner settings, execution, ...)."""
    hints = get_type_hints(cls)
    groups: dict[str, argparse._ArgumentGroup] = {}
    for f in fields(cls):
        title = getattr(_declaring(cls, f.name), "HELP_GROUP", "options")
        if title not in groups:
            existing = {g.title: g for g in parser._action_groups}
            groups[title] = existing.get(title) or parser.add_argument_group(title)
        group = groups[title]
        typ = hints[f.name]
        default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[operator]
        meta = f.metadata
        shown = " ".join(map(str, default)) if isinstance(default, tuple) else default
        help_text = meta.get("help", "")
        if typ is not bool and default not in ((), None, "") and not meta.get("positional"):
            help_text += f" (default: {shown})"  # empty defaults are described in the help itself
        if "choices" in meta:  # listed in the help; checked by the dataclass (one-line error, status 2)
            help_text = f"{help_text}: {', '.join(meta['choices'])}" + (f" (default: {shown})" if default else "")
            help_text = help_text.replace(f" (default: {shown}): ", ": ", 1)
        kw: dict[str, Any] = {"help": re.sub(r"(?<!%)%(?!%)", "%%", help_text)}  # argparse formats help with %
        if meta.get("positional"):
            optional = {"nargs": "?", "default": default} if meta.get("optional") else {}
            group.add_argument(f.name, **optional, **kw)
            continue
        flag = "--" + f.name.replace("_", "-")
        if typ is bool:
            group.add_argument(flag, action="store_true", **kw)
            continue
        base = [a for a in get_args(typ) if a is not type(None)] if type(None) in get_args(typ) else [typ]
        if get_origin(base[0]) is tuple and meta.get("each"):  # one value a flag: --flag a --flag b
            group.add_argument(flag, type=get_args(base[0])[0], action="append", default=[], **kw)
        elif get_origin(base[0]) is tuple and meta.get("repeat"):  # --flag a b --flag c: all of them
            group.add_argument(flag, type=get_args(base[0])[0], nargs="+", action="extend", default=[], **kw)
        elif get_origin(base[0]) is tuple:  # tuple[X, ...] or tuple[X, ...] | None
            nargs = "*" if default == () else "+"
            group.add_argument(flag, type=get_args(base[0])[0], nargs=nargs, default=default, **kw)
        else:
            group.add_argument(flag, type=base[0], default=default, required=bool(meta.get("required")), **kw)


def build(cls: type, ns: argparse.Namespace) -> Any:
    """The dataclass ``cls`` from parsed arguments (its ``__post_init__`` validates them)."""
    return cls(**{f.name: (tuple(v) if isinstance(v := getattr(ns, f.name), list) else v) for f in fields(cls)})


def _compare(a: o.CompareArgs, la: o.LearnArgs, ca: o.CommonArgs, command: str) -> int:
    from experiments.compare import cmd_compare

    return cmd_compare(a, la, ca, command)


def _bench(a: o.BenchArgs, command: str) -> int:
    from experiments.bench import cmd_bench

    return cmd_bench(a, a, command)


def _shift(a: o.ShiftArgs, fa: o.FolderArgs, command: str) -> int:
    from experiments.shift import cmd_shift

    return cmd_shift(a, fa, command)


def _downstream(a: o.DownstreamArgs, la: o.LearnArgs, ca: o.CommonArgs, command: str) -> int:
    from experiments.downstream import cmd_downstream

    return cmd_downstream(a, la, ca, command)


def _site(a: o.SiteArgs) -> int:
    """Rebuild a results folder's overview (when it is a study folder) and its static site from its tables."""
    from experiments.pipeline import rebuild_site

    readme, page = rebuild_site(Path(a.out))
    overview = f"{a.out}/README.md (the overview) and " if readme else ""
    print(f"rebuilt {overview}the site of {a.out} ({page.name} and the pages it links) from the tables there")
    return 0


#: What ``shortlist kinds`` says a kind's depth reads, per :attr:`agents.registry.PolicyKind.view`.
READS = {
    "none": "no score (examined items only, on every set)",
    "stepwise": "the observation of depths 1..k at depth k (examined items only on the strict set)",
    "list": "scores beyond the depth it shows, whatever the set",
}


def _kinds(a: o.KindsArgs) -> int:
    """Every registered policy kind: group, description, objective and settings with their defaults."""
    from dataclasses import fields as dc_fields

    from agents import registry
    from envs import EpisodeConfig

    for name, kind in registry.KINDS.items():
        if a.kind and name != a.kind:
            continue
        obj = kind.objective("bor", kind.defaults, EpisodeConfig())
        print(f"{name} ({kind.group}{', seeded' if kind.stochastic else ''}): {kind.description}")
        print(f"    fits: {obj.target}" + (f" ({obj.reward}, step cost from the condition, gamma {obj.gamma:g})"
                                            if obj.target == "net" else ""))  # fmt: skip
        print(f"    reads: {READS[kind.view]}")
        if kind.shares_fit:
            print(f"    shares its fitted network with {kind.shares_fit} (a study fits it once: agents/memo.py)")
        for f in dc_fields(kind.config):
            value = registry.format_value(getattr(kind.defaults, f.name))
            print(
                f"    --set {name}.{f.name}={value}"
                + ("   (the method name's value: --k)" if f.name == kind.name_field else "")
            )
    return 0


def _recommend(a: o.RecommendArgs, la: o.LearnArgs, ca: o.CommonArgs, command: str) -> int:
    from experiments.recommend import cmd_recommend

    return cmd_recommend(a, la, ca, command)


def _search(a: o.SearchArgs) -> int:
    from experiments.toolsearch import cmd_search

    return cmd_search(a)


def _toolsearch_default(a: o.ToolsearchDefaultArgs, command: str) -> int:
    from experiments.toolsearch import cmd_toolsearch_default

    return cmd_toolsearch_default(a, command)


def _toolsearch_pays(a: o.ToolsearchPaysArgs, command: str) -> int:
    from experiments.toolsearch import cmd_toolsearch_pays

    return cmd_toolsearch_pays(a, command)


def _serving(a: o.ServeArgs, tools: str | None = None) -> Any:
    """The tool search a server serves (``shortlist search``'s: a saved searcher or the library's defaults), with
    the servers' log lines on stderr (stdout may be MCP's stdio)."""
    import logging

    from experiments.toolsearch import resolve_search

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for client in ("httpx", "httpx2"):  # the proxy's and the MCP SDK's clients log each url: a url may hold a key
        logging.getLogger(client).setLevel(logging.WARNING)
    return resolve_search(a, tools)


def _serve_mcp(a: o.ServeMcpArgs) -> int:
    import logging
    from contextlib import nullcontext

    from servers.listen import bind
    from servers.mcp_server import SearchSettings, run
    from servers.upstreams import OneLine, specs

    logging.getLogger("mcp.client.stdio").addFilter(OneLine())  # an upstream's stray stdout line: one line, said
    settings = SearchSettings(pin=a.pin, min_k=a.min_k, max_k=a.bound())
    upstreams = specs(a.upstream_command, a.upstream_url, a.upstream_config)  # a config file's errors, at once
    # the port is bound before the searcher loads: one in use is an error at once
    with _recording(a.record) as recorder, bind(a.host, a.port) if a.transport == "http" else nullcontext() as listener:
        since = _reload_since(a)  # (before the searcher loads: one saved meanwhile is served)
        run(_serving(a, a.tools), settings, upstreams=upstreams, listener=listener, path=a.path, recorder=recorder,
            connect_timeout=a.upstream_timeout, reload=a.searcher if a.reload else None, cache_dir=a.cache_dir,
            reload_since=since)  # fmt: skip
    return 0


def _serve_openai(a: o.ServeOpenaiArgs) -> int:
    from servers.listen import bind
    from servers.openai_proxy import ProxyConfig, serve

    with _recording(a.record) as recorder, bind(a.host, a.port) as listener:  # before the searcher loads
        config = ProxyConfig(a.upstream, a.max_body_bytes, a.timeout, a.min_k, a.bound(),
                             reload=a.searcher if a.reload else None, cache_dir=a.cache_dir,
                             reload_since=_reload_since(a))  # fmt: skip
        serve(_serving(a), config, listener, recorder)
    return 0


def _reload_since(a: o.ServeArgs) -> Any:
    """``--reload``: the searcher folder's stamp, taken before the searcher served loads (None without it)."""
    if not a.reload:
        return None
    from servers.reload import folder_stamp

    assert a.searcher  # (ServeArgs: --reload goes with --searcher)
    return folder_stamp(a.searcher)


@contextmanager
def _recording(folder: str | None) -> Iterator[Recorder | None]:
    """``--record``: the recorder of a serve command (None without it), closed when the server stops (it logs what
    it wrote; the proxy closes it as it shuts down, before uvicorn ends the process on the signal that stopped it)."""
    if folder is None:
        yield None
        return
    from servers.record import Recorder

    recorder = Recorder(folder)
    try:
        yield recorder
    finally:
        recorder.close()


def _toolsearch_embeddings(a: o.ToolsearchEmbeddingsArgs) -> int:
    from experiments.toolsearch import cmd_toolsearch_embeddings

    return cmd_toolsearch_embeddings(a)


def _toolsearch_latency(a: o.ToolsearchLatencyArgs) -> int:
    from experiments.toolsearch import cmd_toolsearch_latency

    return cmd_toolsearch_latency(a)


def _tune(a: o.TuneArgs, command: str) -> int:
    from experiments.tune import cmd_tune

    return cmd_tune(a, command)


def _lazy(name: str) -> Callable[..., int]:
    def run(*args: Any) -> int:
        from experiments import commands

        fn: Callable[..., int] = getattr(commands, name)
        return fn(*args)

    return run


@dataclass(frozen=True)
class Command:
    """One subcommand: its option dataclasses, the function they are passed to (plus the command
    line when ``wants_command``), and its help."""

    name: str
    args: tuple[type, ...]
    run: Callable[..., int]
    help: str
    description: str = ""
    wants_command: bool = True


COMMANDS: tuple[Command, ...] = (
    Command(
        "train",
        (o.TrainArgs, o.LearnArgs, o.CommonArgs),
        _lazy("cmd_train"),
        "train depth policies on one condition, one run per seed, and evaluate them",
        "Train on the train split, evaluate on the test split. Writes OUT/runs/<run_id>/ per seed (a finished "
        "run with the same config is reused; one made with other settings is replaced, said with what changed) "
        "and OUT/{per_query,summary,buckets}.csv holding this command's runs only (rewritten on every call).",
    ),
    Command(
        "recommend",
        (o.RecommendArgs, o.LearnArgs, o.CommonArgs),
        _recommend,
        "what depth rule should I use on my retriever? every kind trained and ranked, one recommended",
        "On your TREC run + qrels (or a BEIR folder or a benchmark): every registered kind that applies is trained on "
        "the training split and ranked by test net reward, with paired intervals against the best; the recommendation "
        "is the kind `auto` picks on an inner validation split of the training queries (never the test queries), and "
        "its run directory goes to OUT/recommended, ready for `shortlist predict`.",
    ),
    Command(
        "evaluate",
        (o.EvaluateArgs, o.FolderArgs),
        _lazy("cmd_evaluate"),
        "evaluate a trained run's policy (optionally with another scorer or benchmark)",
        "Loads the policy saved in a run directory (SB3 zips are read for their weights only, never "
        "unpickled) and evaluates it: on the run's own test split, with another scorer or benchmark, or on "
        "your own TREC run + qrels (by default none of the queries it was trained on, left out by query id and "
        "counted). Writes per_query.csv, summary.csv (this evaluation only), buckets.csv "
        "and manifest.json to --out; says when the inputs differ from those the run was trained on.",
    ),
    Command(
        "predict",
        (o.PredictArgs,),
        _lazy("cmd_predict"),
        "truncate your TREC run at the depth a trained policy chooses per query",
        "Streams the run query by query (memory bounded by the longest query) and writes a TREC run "
        "readable by trec_eval, ir_measures and ranx, and OUT.json naming the policy that wrote it; never replaces "
        "another policy's run.",
    ),
    Command(
        "reproduce",
        (o.ReproduceArgs, o.LearnArgs, o.CommonArgs),
        _lazy("cmd_reproduce"),
        "run the study: every condition x method x seed, tables, figures, README",
        "Resumable: a cell whose run directory exists with the same config hash is skipped.",
    ),
    Command(
        "compare",
        (o.CompareArgs, o.LearnArgs, o.CommonArgs),
        _compare,
        "BoR agents vs practitioner peers, the hindsight oracle and the DP optimum of the tabular model",
        "Writes OUT (default results/peers): tables, Pareto plots and a generated README.",
    ),
    Command(
        "bench",
        (o.BenchArgs,),
        _bench,
        "speed and memory benchmark on this machine (writes results/bench.md)",
    ),
    Command(
        "shift",
        (o.ShiftArgs, o.FolderArgs),
        _shift,
        "trained policies, unchanged, under scorer, benchmark and query shift, against the largest-gap rule",
        "Reads the run directories of reproduce/compare; writes OUT (default results/shift): per-query rows, "
        "aggregates, paired differences, the comparison with the largest-gap rule and a generated README.",
    ),
    Command(
        "downstream",
        (o.DownstreamArgs, o.LearnArgs, o.CommonArgs),
        _downstream,
        "does the LLM pick the right tool? every method's shortlist shown to a chooser (the paper's Table 1)",
        "Retrains the paper's Table 1 methods (step cost 0.01, gamma 0.95, at most 20 tools), asks the chooser once "
        "per (test query, K) and writes OUT (default results/downstream): Table 1 beside the paper's, the choice-vs-K "
        "curve, outcome-trained against BoR-trained depth policies, the simulated chooser's sensitivity.",
    ),
    Command(
        "tune",
        (o.TuneArgs,),
        _tune,
        "compare a kind's settings on an inner validation split of the training queries",
        "Never touches the test split. Writes OUT/<condition>__<kind>.csv (every setting, split and seed), "
        "<condition>__<kind>_mean.csv (each setting's mean) and <condition>__<kind>_manifest.json.",
    ),
    Command(
        "site",
        (o.SiteArgs,),
        _site,
        "rebuild a results folder's overview and static site from its tables (nothing is run)",
        "For a study folder (written by reproduce): its README's answer, computed from its tables and those of "
        "its parts (peers/, shift/, ...), and index.html with one page per report; for another folder, its "
        "index.html. Run it after assembling a results folder from parts made elsewhere.",
        wants_command=False,
    ),
    Command(
        "search",
        (o.SearchArgs,),
        _search,
        "a tool search with a per-request depth: the shortlist of your tools for a request, as JSON",
        "Ranks a saved searcher's (--searcher DIR) or a tools file's (--tools FILE) registry for the request and "
        "shows the top K tools, K chosen per request by the searcher's policy (with --tools: the default shipped for "
        "--scorer, or --policy). With no request, reads requests from stdin, one a line, and writes one JSON line "
        "per request.",
        wants_command=False,
    ),
    Command(
        "kinds",
        (o.KindsArgs,),
        _kinds,
        "every depth-policy kind: what it is, what it fits, its settings and their defaults",
        wants_command=False,
    ),
)
TOOLSEARCH_COMMANDS: tuple[Command, ...] = (
    Command(
        "default",
        (o.ToolsearchDefaultArgs,),
        _toolsearch_default,
        "choose the default tool-search policy by leave-one-benchmark-out, train it, write it and its table",
        "For each scorer: each benchmark's whole registry ranked for its queries; every candidate kind fitted on the "
        "other benchmarks and judged on the held-out one by net reward, with paired intervals against fixed K = 3, "
        "5, 8 and the gap rule; the best mean over the held-out benchmarks is refitted on all and written to OUT/"
        "<scorer> with its provenance; the table goes to TABLE.",
    ),
    Command(
        "pays",
        (o.ToolsearchPaysArgs,),
        _toolsearch_pays,
        "does the tool search pay? its default and recommended policies against fixed K = 3, 5, 8, end to end and in "
        "tool-definition tokens, on BFCL or on your registry, log and LLM (--tools/--log)",
        "On the downstream study's BFCL test queries: K from the shipped default policy (the leave-BFCL-out one when "
        "the shipped one saw BFCL), from `shortlist recommend --tools --log` on the BFCL training queries, and fixed "
        "limits, capped at the chooser's 20 prefixes; end-to-end % from the committed answers of the local and the "
        "simulated chooser, tool-definition tokens counted with the local chooser's tokenizer; paired 95% intervals; "
        "a figure, the tables, the page and a manifest into OUT. With --tools/--log: `shortlist recommend` on your "
        "log, and on its test split (requests no policy was trained or picked on) K from its searcher, from the "
        "default policy and the fixed limits, capped at --max-k; --chooser (the local LM, your OpenAI-compatible "
        "endpoint, or the simulated stand-in) asked once per (request, K) a method shows whose top K holds a tool the "
        "agent called, its answers cached; OUT (default pays) gets choices.csv too.",
    ),
    Command(
        "latency",
        (o.ToolsearchLatencyArgs,),
        _toolsearch_latency,
        "per-request time of a tool search on BFCL's 370 tools or ToolBench's 3,406 (p50 / p99, the scorer's part "
        "and the rest)",
        wants_command=False,
    ),
    Command(
        "embeddings",
        (o.ToolsearchEmbeddingsArgs,),
        _toolsearch_embeddings,
        "the plain-torch MiniLM against sentence-transformers on every tool text and query of the benchmarks: "
        "bit-identical or the largest difference",
        "Embeds each benchmark's tool texts and queries with sentence-transformers and with the package's plain-torch "
        "encoder (benchmarks/sbert.py: what a tool search serves with, without importing sentence-transformers), in "
        "the same batches on the same torch threads, and prints one row per text set: identical or not, the largest "
        "absolute difference and each one's CPU seconds. Exit status 1 when any embedding differs.",
        wants_command=False,
    ),
)
SERVE_COMMANDS: tuple[Command, ...] = (
    Command(
        "mcp",
        (o.ServeMcpArgs,),
        _serve_mcp,
        "the tool search as an MCP server: a search_tools tool, alone or in front of upstream MCP servers",
        "search_tools(query) answers the shortlist of the saved searcher's registry (name, description, input schema "
        "of each tool). With --upstream-command, --upstream-url or --upstream-config (several servers), the "
        "upstreams' tools are the registry: tools/list shows search_tools and the pinned tools, tools/call is "
        "forwarded to the tool's upstream. Over stdio, or streamable HTTP (--transport http) on 127.0.0.1 unless "
        "--host says otherwise.",
        wants_command=False,
    ),
    Command(
        "openai",
        (o.ServeOpenaiArgs,),
        _serve_openai,
        "an OpenAI-compatible proxy (Chat Completions, Responses; Anthropic Messages too): each request "
        "forwarded with only the shortlist of its tools",
        "Point an OpenAI client's base_url at http://HOST:PORT/v1 (an Anthropic client's at http://HOST:PORT). A "
        "chat-completions, Responses or Anthropic Messages request with tools goes to --upstream with the shortlist "
        "of its latest user message (the searcher's scorer and policy on the request's own tools; built-in and "
        "server tools kept); the response carries x-shortlist-k. Everything else passes unchanged; streaming is "
        "relayed; the key is passed on, never logged.",
        wants_command=False,
    ),
)
DATA_COMMANDS: tuple[Command, ...] = (
    Command(
        "list",
        (o.DataListArgs,),
        _lazy("cmd_data_list"),
        "each dataset file: where it is, present, verified",
        wants_command=False,
    ),
    Command(
        "fetch",
        (o.DataFetchArgs,),
        _lazy("cmd_data_fetch"),
        "download (pinned commit) and verify one dataset's files",
        wants_command=False,
    ),
)


#: Command groups: ``shortlist <group> <command>``.
GROUPS: dict[str, tuple[tuple[Command, ...], str]] = {
    "data": (DATA_COMMANDS, "list or fetch benchmark data files (pinned, sha256-verified)"),
    "toolsearch": (TOOLSEARCH_COMMANDS, "the tool search: its default policy, whether it pays, its latency"),
    "serve": (SERVE_COMMANDS, "serve the tool search to agents: an MCP server, an OpenAI-compatible proxy"),
}


def package_version() -> str:
    """The installed version of shortlist-depth (its distribution metadata), or ``unknown`` when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("shortlist-depth")
    except PackageNotFoundError:
        return "unknown"


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="shortlist",
        description="How many tools should an LLM agent see? Train and evaluate shortlist-depth policies "
        "with the Bits-over-Random reward.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = p.add_subparsers(dest="command", required=True)
    for cmd in COMMANDS:
        sp = sub.add_parser(cmd.name, help=cmd.help, description=cmd.description or cmd.help)
        for cls in cmd.args:
            add_dataclass_args(sp, cls)
    for group, (commands, help_text) in GROUPS.items():
        g = sub.add_parser(group, help=help_text)
        gsub = g.add_subparsers(dest=f"{group}_command", required=True)
        for cmd in commands:
            sp = gsub.add_parser(cmd.name, help=cmd.help, description=cmd.description or cmd.help)
            for cls in cmd.args:
                add_dataclass_args(sp, cls)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``shortlist`` console script."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()
    ns = parser.parse_args(argv)
    command = "shortlist " + " ".join(shlex.quote(a) for a in argv)
    table = {c.name: c for c in COMMANDS}
    if ns.command in GROUPS:
        cmd = {c.name: c for c in GROUPS[ns.command][0]}[getattr(ns, f"{ns.command}_command")]
    else:
        cmd = table[ns.command]
    try:
        args = [build(cls, ns) for cls in cmd.args]
        return cmd.run(*args, command) if cmd.wants_command else cmd.run(*args)
    except (ValueError, DataError, OSError, IndexError) as e:
        print(f"shortlist: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
