"""The shape of the code, counted on its syntax tree (issue 29): no long functions where a newcomer reads
first, and no command module that imports another command. Cycles are checked by import-linter
(``acyclic_siblings`` contracts for experiments, agents and benchmarks, run by ``.ci/run``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 80
#: Packages held to the limit: every package of the project (no package is exempt).
LIMITED = ("experiments", "agents", "envs", "rewards", "shortlist_depth", "benchmarks", "choosers", "servers")
#: The modules that implement a ``shortlist`` subcommand (the CLI's dispatch table imports them).
COMMANDS = ("commands", "compare", "shift", "tune", "bench", "recommend", "downstream", "toolsearch")


def long_functions(package: str, root: Path = REPO) -> list[str]:
    """``<file>:<line> <name> (<n> lines)`` of every function (methods and nested functions included) of
    the folder ``root/package`` longer than :data:`MAX_LINES`, counted from ``def`` to its last line."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_LINES:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


@pytest.mark.parametrize("package", LIMITED)
def test_no_function_is_longer_than_the_limit(package: str) -> None:
    assert not long_functions(package), f"functions over {MAX_LINES} lines: split compute from rendering"


def _function(name: str, lines: int, indent: str = "") -> str:
    """Source of a function ``lines`` lines long, ``def`` line included."""
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 2))
    return f"{indent}def {name}() -> int:\n{body}{indent}    return 0\n"


def test_the_counter_counts(tmp_path: Path) -> None:
    """The check can fail: in a package written to ``tmp_path``, a function of 81 lines, an async one and a
    method of 81 lines in a sub-package are found, with their lines counted; one of exactly 80 lines is not."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text(_function("at_limit", MAX_LINES) + "\n\n" + _function("long", MAX_LINES + 1))
    method = _function("method", MAX_LINES + 1, indent="    ")
    (pkg / "sub" / "b.py").write_text(f"class C:\n{method}\n\nasync {_function('slow', MAX_LINES + 5)}")
    assert sorted(long_functions("pkg", tmp_path)) == [
        f"pkg/a.py:{MAX_LINES + 3} long ({MAX_LINES + 1} lines)",
        f"pkg/sub/b.py:2 method ({MAX_LINES + 1} lines)",
        f"pkg/sub/b.py:{MAX_LINES + 5} slow ({MAX_LINES + 5} lines)",
    ]


@pytest.mark.parametrize("command", COMMANDS)
def test_no_command_imports_a_sibling_command(command: str) -> None:
    imported = imported_modules(REPO / "experiments" / f"{command}.py")
    siblings = {f"experiments.{c}" for c in COMMANDS if c != command}
    assert not imported & siblings, f"experiments/{command}.py imports {sorted(imported & siblings)}"


def test_every_dispatched_command_module_is_counted() -> None:
    """Every module the CLI takes a ``cmd_*`` function from (or imports whole) is in :data:`COMMANDS`, so a
    new subcommand is checked above."""
    dispatched = set()
    for node in ast.walk(ast.parse((REPO / "experiments" / "cli.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "experiments":
            dispatched |= {a.name for a in node.names if a.name != "options"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("experiments."):
            if any(a.name.startswith("cmd_") for a in node.names):
                dispatched.add(node.module.removeprefix("experiments."))
    assert dispatched and dispatched <= set(COMMANDS), sorted(dispatched - set(COMMANDS))
