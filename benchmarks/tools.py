"""Tool schemas as agents hold them, and the one rule that turns a tool into the text a scorer sees.

Shapes read (:func:`parse_tools`; each tool keeps the dict it was given, :attr:`ToolSchema.schema`):

- an OpenAI ``tools`` list: ``{"type": "function", "function": {"name", "description", "parameters"}}``;
- bare function dicts: ``{"name", "description", "parameters"}`` (also OpenAI's flat Responses-API form,
  ``{"type": "function", "name", ...}``);
- an MCP ``tools/list`` result: ``{"tools": [{"name", "description", "inputSchema"}]}`` or its list;
- Anthropic's client tools: ``{"name", "description", "input_schema"}`` (the Messages API's ``tools``);
- a JSON object with a ``tools`` list of any of the above (e.g. an OpenAI request body).

Tool text (:func:`tool_text`; SPEC: "description + parameter names"), exactly::

    "<description> Parameters: <p1>, <p2>, ..."

with the parameter names in the order of the schema's ``properties`` (an MCP ``inputSchema`` and an Anthropic
``input_schema`` are the parameters schema). ``kind="rich"`` puts the function name first
(``"<name with _ and . as spaces>. <description> Parameters: ..."``; BFCL's ``richtext`` variant). It is the
text of every BFCL condition (:mod:`benchmarks.bfcl` reads it from here) and of every tool search
(:class:`shortlist_depth.ToolSearch`), so a depth policy trained on BFCL sees the same kind of text.

Errors are one line naming the tool's index and name (``tools[3] ('get_weather'): 'parameters' must be an
object``; a NaN or infinite number anywhere in a tool, which is not JSON), duplicate names (with the first index),
and an empty registry; a file's malformed JSON names its line (:func:`read_tools_file`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.corpus import DataError, iter_jsonl

TOOL_TEXTS = ("spec", "rich")
"""Tool-text kinds: ``spec`` (SPEC: description + parameter names; the default) and ``rich`` (the function
name, then the same)."""


def tool_text(fn: Mapping[str, Any], kind: str = "spec") -> str:
    """The exact text scorers see for one function definition ``{name, description, parameters}`` (module
    docstring)."""
    if kind not in TOOL_TEXTS:
        raise ValueError(f"unknown tool text {kind!r}; expected one of {', '.join(TOOL_TEXTS)}")
    desc = str(fn.get("description", "") or "").strip()
    props = (fn.get("parameters") or {}).get("properties") or {}
    text = f"{desc} Parameters: {', '.join(props.keys())}"
    if kind == "rich":
        text = str(fn["name"]).replace("_", " ").replace(".", " ") + ". " + text
    return text.strip()


@dataclass(frozen=True)
class ToolSchema:
    """One tool of a registry.

    Attributes:
        name: the tool's name (unique in its registry).
        description: its description ("" when absent).
        parameters: its parameters JSON schema (``{}`` when absent; an MCP tool's ``inputSchema``).
        schema: the dict it was given, unchanged (OpenAI or MCP shape): what a shortlist returns.
        shape: ``openai`` (``{"type": "function", "function": ...}``), ``mcp`` (``inputSchema``),
            ``anthropic`` (``input_schema``) or ``function`` (a bare ``{name, description, parameters}``).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    schema: dict[str, Any]
    shape: str

    @property
    def text(self) -> str:
        """The text scorers see (:func:`tool_text`)."""
        return tool_text({"name": self.name, "description": self.description, "parameters": self.parameters})


def _label(where: str, name: object) -> str:
    return f"{where} ({name!r})" if isinstance(name, str) and name else where


def parse_tool(item: object, where: str) -> ToolSchema:
    """One tool of any shape (module docstring); DataError naming ``where`` and the tool's name otherwise."""
    if not isinstance(item, dict):
        raise DataError(f"{where}: a tool must be a JSON object, got {type(item).__name__}")
    shape, fn, params_key = "function", item, "parameters"
    if item.get("type") == "function" and "function" in item:
        shape, fn = "openai", item["function"]
        if not isinstance(fn, dict):
            raise DataError(f"{where}: 'function' must be an object, got {type(fn).__name__}")
    elif "inputSchema" in item:
        shape, params_key = "mcp", "inputSchema"
    elif "input_schema" in item:
        shape, params_key = "anthropic", "input_schema"
    name = fn.get("name")
    if not isinstance(name, str) or not name.strip():
        raise DataError(f"{where}: no tool name (a non-empty string 'name' is required)")
    at = _label(where, name)
    if (bad := _non_finite(item)) is not None:
        raise DataError(f"{at}: {bad} (NaN and infinite numbers are not JSON; a tool is sent as JSON)")
    desc = fn.get("description")
    if desc is not None and not isinstance(desc, str):
        raise DataError(f"{at}: 'description' must be a string, got {type(desc).__name__}")
    params = fn.get(params_key)
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise DataError(f"{at}: '{params_key}' must be an object (a JSON schema), got {type(params).__name__}")
    props = params.get("properties")
    if props is not None and not isinstance(props, dict):
        raise DataError(f"{at}: '{params_key}.properties' must be an object, got {type(props).__name__}")
    return ToolSchema(name, (desc or "").strip(), params, item, shape)


def _non_finite(node: object, path: str = "") -> str | None:
    """Where the first NaN or infinite number in ``node`` (a tool's dict) is, said as ``'key.key[i]' is nan``;
    None when there is none."""
    if isinstance(node, float) and not math.isfinite(node):
        return f"{path.lstrip('.') or 'the tool'!r} is {node}"
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list | tuple) else ()
    for key, child in children:
        found = _non_finite(child, f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}")
        if found is not None:
            return found
    return None


def tool_items(tools: object, source: str = "tools") -> list[Any]:
    """The list of tool items in ``tools``: a list, or an object holding one under ``tools`` (an MCP
    ``tools/list`` result, an OpenAI request body)."""
    if isinstance(tools, dict):
        if "tools" not in tools:
            raise DataError(f"{source}: an object of tools needs a 'tools' list (an MCP tools/list result)")
        tools = tools["tools"]
    if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
        raise DataError(f"{source}: expected a list of tools, got {type(tools).__name__}")
    return list(tools)


def parse_tools(tools: object, source: str = "tools") -> tuple[ToolSchema, ...]:
    """A registry from any shape of the module docstring, in the order given.

    Raises:
        DataError: a malformed tool (naming ``source[index]`` and its name), a duplicate name (naming both
            indices) or an empty registry.
    """
    return _checked([parse_tool(item, f"{source}[{i}]") for i, item in enumerate(tool_items(tools, source))], source)


def _checked(parsed: list[ToolSchema], source: str, where: Sequence[str] | None = None) -> tuple[ToolSchema, ...]:
    if not parsed:
        raise DataError(f"{source}: no tools (the registry is empty)")
    first: dict[str, int] = {}
    for i, t in enumerate(parsed):
        if t.name in first:
            here = where[i] if where else f"{source}[{i}]"
            there = where[first[t.name]] if where else f"{source}[{first[t.name]}]"
            raise DataError(f"{here} ({t.name!r}): duplicate tool name (first at {there})")
        first[t.name] = i
    return tuple(parsed)


def read_tools_file(path: str | os.PathLike[str]) -> tuple[ToolSchema, ...]:
    """A registry from a file: JSON (any shape of the module docstring) or JSON lines, one tool per line.

    Raises:
        DataError: a missing or unreadable file, malformed JSON (naming its line), or what
            :func:`parse_tools` rejects (naming ``file[index]``, or ``file:line`` for JSON lines).
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise DataError(f"{p}: cannot read the tools file ({e.strerror or e})") from e
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        raise DataError(f"{p}: not UTF-8 ({e.reason} at byte {e.start})") from e
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as e:
        if text.strip() and not _first_line_is_an_object(text):  # one JSON document (pretty-printed): its line
            raise DataError(f"{p}:{e.lineno}: malformed JSON ({e.msg})") from e
        whole = None  # JSON lines: each line its own object, an error named by its line below
    if whole is not None:
        if isinstance(whole, dict) and "tools" not in whole:
            whole = [whole]  # one tool
        return parse_tools(whole, str(p))
    lines = list(iter_jsonl(p))
    where = [f"{p}:{lineno}" for lineno, _ in lines]
    return _checked([parse_tool(row, w) for (_, row), w in zip(lines, where, strict=True)], str(p), where)


def _first_line_is_an_object(text: str) -> bool:
    """Whether the first non-blank line of ``text`` is a JSON object by itself: a JSON-lines file's is, a
    pretty-printed document's (``[`` or ``{`` alone, or an object's first key) is not."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        return isinstance(json.loads(first), dict)
    except json.JSONDecodeError:
        return False


def registry_digest(tools: Sequence[ToolSchema]) -> str:
    """sha256 of a registry: the canonical JSON (sorted keys) of the schemas as given, in order."""
    h = hashlib.sha256()
    for t in tools:
        h.update(json.dumps(t.schema, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()
