"""Contract 7, purity: no module of ``cutctx`` reaches for I/O, a clock, randomness or logging.

The check reads every source file under the package with ``ast`` (nothing is executed), follows
the package's own imports, and refuses any other import that is not on an explicit allow-list.
It also refuses the builtins that do I/O or import dynamically, since those need no import.

The allow-list holds standard-library modules that are pure computation, with no I/O, clock,
randomness, environment or global mutable state:

- language machinery: ``__future__``, ``abc``, ``dataclasses``, ``enum``, ``types``, ``typing``;
- data structures and functional tools: ``array`` (typed sequences of machine numbers),
  ``collections``, ``collections.abc``, ``functools``, ``itertools``, ``operator``, ``bisect``,
  ``heapq``;
- text and numbers: ``math``, ``re``, ``string``, ``unicodedata``, ``json`` (strings in, strings
  out; the core never hands it a file);
- digests and encodings: ``hashlib`` (stubs carry a SHA-256; group ids are digests),
  ``base64`` (allowed: a pure bytes-to-text transformation a wire format may need for a payload)
  ``marshal`` (the window's fingerprint writes messages as bytes with ``dumps``; the package
  never hands it a file and never loads) and ``struct`` (a window state packs its counts as
  little-endian integers: numbers to bytes and back, nothing else);
- introspection: ``inspect``, for ``inspect.signature`` alone (the documented rule that reads how
  many arguments an ``observation=`` callable takes, once, when the window is made).

Not allowed: ``typing_extensions`` (not the standard library and not a declared dependency),
``decimal`` (its context is global mutable state), and everything that touches the world.
From ``baseaicore`` (the one runtime dependency) only its error classes and its pure hashing
helpers may be imported: it also ships a clock and an id generator, which the core must not use.

The framework formats and integrations may import their own framework, and only theirs
(``FRAMEWORKS``): importing them is what they are for, and ``cutctx`` never imports them (the
Agents SDK integration also ``contextvars``, to find the run a usage report is about, and
``warnings``, to say once that it cannot calibrate when it is not the run's hooks; the async
integrations ``asyncio``, to run their CPU-bound work in a worker thread, off the framework's
event loop). So may
``cutctx._core.estimators`` import tiktoken (the ``cutctx[tiktoken]`` extra), inside the one
function that loads an encoding a caller names (``estimator="cl100k_base"``): reading the
tokenizer's own data is what naming it asks for, and ``import cutctx`` never imports it. The
format registry, ``cutctx.formats._registry``, may import ``importlib.metadata`` (``REGISTRY``):
finding the formats installed packages declare as entry points reads their metadata files, and
it does so only for a format name that is not a built-in one.

Exempt: the command line, ``cutctx._cli`` and ``cutctx.__main__``, and the proxy, ``cutctx._proxy``.
They read and write files, standard streams and sockets by design, and they are edges over the
library, not part of it: the library never imports them, which the last test below checks on the
same import graph.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import pytest

import cutctx

ALLOWED_MODULES = frozenset(
    {
        "__future__",
        "abc",
        "array",
        "base64",
        "bisect",
        "collections",
        "collections.abc",
        "dataclasses",
        "enum",
        "functools",
        "hashlib",
        "heapq",
        "inspect",
        "itertools",
        "json",
        "marshal",
        "math",
        "operator",
        "re",
        "string",
        "struct",
        "types",
        "typing",
        "unicodedata",
    }
)
DEPENDENCY = "baseaicore"
ALLOWED_FROM_DEPENDENCY = frozenset({"canonical_json", "sha256_of"})
FORBIDDEN_BUILTINS = frozenset(
    {"open", "print", "input", "breakpoint", "__import__", "exec", "eval", "compile"}
)
PACKAGE = "cutctx"
FRAMEWORKS = {
    "cutctx.formats.langchain": frozenset({"langchain_core"}),
    "cutctx.formats.pydantic_ai": frozenset({"pydantic_ai"}),
    "cutctx.integrations.langchain": frozenset(
        {"langchain", "langchain_core", "langgraph", "asyncio"}
    ),
    # contextvars: the run that sent a request is found again by its task's context (on_llm_end);
    # warnings: a filter that is not the run's hooks says, once, that it cannot calibrate
    "cutctx.integrations.openai_agents": frozenset({"agents", "contextvars", "warnings"}),
    # asyncio: the async hooks hand their CPU-bound work to a worker thread (asyncio.to_thread),
    # so a framework's event loop is never blocked by it
    "cutctx.integrations._options": frozenset({"asyncio"}),
    "cutctx.integrations.pydantic_ai": frozenset({"pydantic_ai"}),
    # aprepare hands a step's CPU work to the running loop's executor (asyncio), in a copy of
    # the caller's context (contextvars): the one library module that touches the event loop
    "cutctx._loop.offload": frozenset({"asyncio", "contextlib", "contextvars"}),
    # a step's memo of the prices of the large texts it priced (contextvars, set and reset by a
    # context manager around the step): the same price, asked twice, computed once; nothing of
    # it outlives the step, and each thread or task has its own
    "cutctx._core.priced": frozenset({"contextlib", "contextvars"}),
    "cutctx._core.estimators": frozenset({"tiktoken"}),  # a tokenizer named by the caller
}
# The proxy is an edge too: a server over the public API (sockets, a store, a clock, logging).
COMMAND_LINE = ("cutctx._cli", "cutctx.__main__", "cutctx._proxy")
# The format registry reads installed packages' entry points (their metadata files): the one
# place the library looks at the world, only for a format name that is none of its own.
REGISTRY = {"cutctx.formats._registry": frozenset({"importlib.metadata"})}
CORE = frozenset(
    {
        "cutctx",
        "cutctx._policies.chain",
        "cutctx._policies.draft",
        "cutctx._policies.drop",
        "cutctx._core.errors",
        "cutctx._core.estimators",
        "cutctx._core.executor",
        "cutctx._core.invariants",
        "cutctx._policies.masking",
        "cutctx._core.plan",
        "cutctx._core.report",
        "cutctx._policies.summarizing",
        "cutctx._core.protocols",
        "cutctx._core.values",
    }
)


def is_command_line(module: str) -> bool:
    """Whether ``module`` belongs to the command line (exempt from purity: it does file I/O)."""
    return any(module == name or module.startswith(name + ".") for name in COMMAND_LINE)


def package_sources() -> dict[str, Path]:
    """Map every module under the ``cutctx`` package (``cutctx.formats`` too) to its file."""
    root = Path(cutctx.__file__).parent
    sources: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        sources[".".join(parts)] = path
    return sources


def _absolute(module: str, *, is_package: bool, level: int, name: str | None) -> str:
    """Resolve a (possibly relative) ``from`` import to an absolute module name."""
    if level == 0:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def impurities(
    source: str, module: str, known: frozenset[str], *, is_package: bool = False
) -> tuple[list[str], set[str]]:
    """Return what is impure in ``source`` and the package modules it imports."""
    problems: list[str] = []
    internal: set[str] = set()

    def check(name: str, line: int, imported: tuple[str, ...] = ()) -> None:
        top = name.split(".", maxsplit=1)[0]
        if top == PACKAGE:
            targets = [name, *(f"{name}.{item}" for item in imported if f"{name}.{item}" in known)]
            for target in targets:
                if target in known:
                    internal.add(target)
                else:
                    problems.append(f"{module}:{line} imports unknown {target}")
        elif name == DEPENDENCY:
            for item in imported:
                if not (item.endswith("Error") or item in ALLOWED_FROM_DEPENDENCY):
                    problems.append(f"{module}:{line} imports {item} from {DEPENDENCY}")
            if not imported:
                problems.append(f"{module}:{line} imports {DEPENDENCY} whole")
        elif top in FRAMEWORKS.get(module, frozenset()):
            return  # a framework module's own framework
        elif name in REGISTRY.get(module, frozenset()):
            return  # the registry's entry points
        elif name not in ALLOWED_MODULES:
            problems.append(f"{module}:{line} imports {name}")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                check(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            name = _absolute(module, is_package=is_package, level=node.level, name=node.module)
            check(name, node.lineno, tuple(alias.name for alias in node.names))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in FORBIDDEN_BUILTINS
        ):
            problems.append(f"{module}:{node.lineno} calls {node.func.id}()")
    return problems, internal


def scan() -> tuple[list[str], dict[str, set[str]]]:
    """Check every module of the package; return the problems and the internal import graph."""
    sources = package_sources()
    known = frozenset(sources)
    problems: list[str] = []
    graph: dict[str, set[str]] = {}
    for module, path in sources.items():
        if is_command_line(module):
            continue
        found, internal = impurities(
            path.read_text(encoding="utf-8"),
            module,
            known,
            is_package=path.name == "__init__.py",
        )
        problems.extend(found)
        graph[module] = internal
    return problems, graph


class TestPurity:
    def test_every_module_of_the_package_imports_only_pure_modules(self) -> None:
        problems, graph = scan()
        assert problems == []
        assert "cutctx.formats" in graph, "the formats edge is checked too"

    def test_no_library_module_imports_the_command_line(self) -> None:
        _, graph = scan()
        importers = {
            module: sorted(target for target in targets if is_command_line(target))
            for module, targets in graph.items()
        }
        assert {module: found for module, found in importers.items() if found} == {}
        assert "cutctx._cli" in package_sources(), "the command line is where the test looks"

    def test_the_command_line_check_sees_an_import_of_it(self) -> None:
        known = frozenset(package_sources())
        _, internal = impurities("from cutctx._cli import main", "cutctx._core.x", known)
        assert any(is_command_line(target) for target in internal)

    def test_the_import_graph_from_the_package_reaches_the_whole_core(self) -> None:
        _, graph = scan()
        reached = {PACKAGE}
        queue = deque([PACKAGE])
        while queue:
            for target in graph[queue.popleft()] - reached:
                reached.add(target)
                queue.append(target)
        assert reached >= CORE

    @pytest.mark.parametrize(
        "source",
        [
            "import os",
            "import time",
            "import random",
            "import logging",
            "import socket",
            "import os.path",
            "from os import path",
            "from time import monotonic",
            "from random import choice",
            "import logging.handlers",
            "import datetime",
            "import typing_extensions",
            "import importlib",
            "import sys",
            "from baseaicore import utc_now",
            "from baseaicore import ValidationError, new_id",
            "import baseaicore",
            "import cutctx._no_such_module",
            "from ._no_such_module import x",
            "with open('notes.txt') as handle:\n    pass",
            "__import__('os')",
            "print('debug')",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pathlib",
            "def f() -> None:\n    import os",
        ],
    )
    def test_the_checker_refuses_impure_source(self, source: str) -> None:
        known = frozenset(package_sources())
        problems, _ = impurities(source, "cutctx._example", known)
        assert problems, f"not caught: {source!r}"

    @pytest.mark.parametrize(
        ("source", "module"),
        [
            ("import langchain_core", "cutctx._loop.window"),
            ("from pydantic_ai import Agent", "cutctx.formats.langchain"),
            ("import agents", "cutctx.integrations.pydantic_ai"),
            ("from langchain.agents import create_agent", "cutctx.integrations"),
        ],
    )
    def test_a_framework_is_refused_outside_its_own_modules(self, source: str, module: str) -> None:
        known = frozenset(package_sources())
        problems, _ = impurities(source, module, known)
        assert problems, f"not caught: {source!r} in {module}"

    def test_a_framework_module_may_import_its_framework(self) -> None:
        known = frozenset(package_sources())
        source = "from langchain_core.messages import BaseMessage\nimport json\n"
        assert impurities(source, "cutctx.formats.langchain", known) == ([], set())

    def test_the_checker_accepts_pure_source(self) -> None:
        source = (
            "from __future__ import annotations\n"
            "import hashlib, json, math\n"
            "from collections.abc import Mapping\n"
            "from typing import TYPE_CHECKING\n"
            "from baseaicore import SuiteError, ValidationError\n"
            "from cutctx._core.values import Role\n"
            "from .. import _core\n"
            "from .._core.errors import CompactionError\n"
            "if TYPE_CHECKING:\n"
            "    from cutctx._core.plan import CompactionPlan\n"
        )
        known = frozenset(package_sources())
        problems, internal = impurities(source, "cutctx.formats._example", known)
        assert problems == []
        assert internal == {
            "cutctx",
            "cutctx._core",
            "cutctx._core.errors",
            "cutctx._core.plan",
            "cutctx._core.values",
        }

    def test_relative_imports_resolve_against_the_package(self) -> None:
        assert _absolute("cutctx._core.plan", is_package=False, level=1, name="values") == (
            "cutctx._core.values"
        )
        assert _absolute("cutctx", is_package=True, level=1, name="_core") == "cutctx._core"
        assert _absolute("cutctx.formats.x", is_package=False, level=2, name=None) == "cutctx"
        assert _absolute("cutctx._core.plan", is_package=False, level=0, name="json") == "json"
