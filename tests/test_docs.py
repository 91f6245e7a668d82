"""Every example in the README, the guides under docs/ and the public docstrings runs.

Markdown examples are doctests (``>>>`` lines inside fenced ``pycon`` blocks); each file runs in
one namespace, top to bottom, so a guide can build on its earlier examples.
"""

from __future__ import annotations

import asyncio
import doctest
import importlib
import os
import pkgutil
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import cutctx
from tests.cli.test_console_script import console_script

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
MODULES = sorted(info.name for info in pkgutil.walk_packages(cutctx.__path__, prefix="cutctx."))
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.fixture
def event_loop_of_its_own() -> Iterator[None]:
    """Run a document on an event loop of its own, closed after it.

    The frameworks' synchronous runners (integrations.md) leave the thread's current loop open;
    a later ``asyncio.run`` (a docstring example) would orphan it, and it would warn when
    collected.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


@pytest.mark.usefixtures("event_loop_of_its_own")
@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_examples_run_as_written(path: Path) -> None:
    result = doctest.testfile(str(path), module_relative=False, optionflags=FLAGS, verbose=False)
    assert result.failed == 0, f"{result.failed} example(s) in {path.name} failed"


@pytest.mark.parametrize("name", ["cutctx", *MODULES])
def test_docstring_examples_run_as_written(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=FLAGS, verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) in {name} failed"


def test_the_readme_holds_examples() -> None:
    """A README whose examples vanished would pass the test above vacuously."""
    assert doctest.DocTestParser().get_examples((ROOT / "README.md").read_text("utf-8"))


def test_the_package_docstring_holds_a_runnable_example() -> None:
    """As in 0.1, ``help(cutctx)`` shows an example; the doctest run above executes it."""
    examples = doctest.DocTestParser().get_examples(cutctx.__doc__ or "")
    assert len(examples) >= 5
    assert any("CompactionExecutor().apply" in example.source for example in examples)


# Command-line examples: ```console blocks, where a line `$ command` is run by bash and the lines
# after it, up to the next `$ ` line, are what it prints (standard output and error together;
# `...` stands for lines left out). A document's commands run in order in one folder holding a
# copy of examples/, with the installed console script first on PATH.

CONSOLE_DOCUMENTS = sorted(
    path for path in DOCUMENTS if "```console" in path.read_text(encoding="utf-8")
)


def console_examples(text: str) -> list[tuple[str, str]]:
    """Return each ``$ command`` of the document's console blocks and the output shown for it."""
    examples: list[tuple[str, list[str]]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = line.startswith("```console")
        elif inside and line.startswith("$ "):
            examples.append((line[2:], []))
        elif inside and examples:
            examples[-1][1].append(line)
    return [(command, "".join(f"{line}\n" for line in shown)) for command, shown in examples]


def run_console_examples(path: Path, folder: Path) -> list[str]:
    """Run a document's console examples in ``folder``; return what differs from the shown."""
    shutil.copytree(ROOT / "examples", folder / "examples")
    bin_dir = Path(console_script()).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    checker = doctest.OutputChecker()
    problems = []
    for command, shown in console_examples(path.read_text(encoding="utf-8")):
        done = subprocess.run(  # noqa: S603 - the document's own example, in a temporary folder
            ["bash", "-c", f"set -o pipefail; {command}"],  # noqa: S607 - bash from PATH
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
            timeout=120,
        )
        if done.returncode != 0:
            problems.append(f"$ {command}\nexited {done.returncode}:\n{done.stdout}")
        elif not checker.check_output(shown, done.stdout, doctest.ELLIPSIS):
            problems.append(f"$ {command}\nshown:\n{shown}printed:\n{done.stdout}")
    return problems


@pytest.mark.parametrize("path", CONSOLE_DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_command_line_examples_print_what_they_show(path: Path, tmp_path: Path) -> None:
    problems = run_console_examples(path, tmp_path)
    assert not problems, "\n\n".join(problems)


def test_every_command_has_a_console_example() -> None:
    commands = {
        command.split()[1]
        for command, _ in console_examples((ROOT / "docs" / "cli.md").read_text("utf-8"))
        if command.startswith("cutctx ")
    }
    assert commands >= {"plan", "compact", "verify", "stats"}


def test_a_console_example_that_prints_something_else_is_caught(tmp_path: Path) -> None:
    document = tmp_path / "doc.md"
    document.write_text(
        "```console\n$ echo one\ntwo\n$ false\n$ echo ok\nok\n```\n", encoding="utf-8"
    )
    problems = run_console_examples(document, tmp_path / "run")
    assert [problem.splitlines()[0] for problem in problems] == ["$ echo one", "$ false"]


def test_the_readmes_first_command_installs_and_prints_what_the_readme_shows(
    tmp_path: Path,
) -> None:
    """The install step is not rerun here (the gate's venv is the install); its plan step is."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Two commands on a fresh machine", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.DOTALL)
    first_command = blocks[0][1].strip()
    install, _, plan = first_command.rpartition(" && ")
    shown = blocks[1][1]
    assert blocks[0][0] == "sh"
    assert "pip install ." in install
    assert plan.startswith(".venv/bin/cutctx plan examples/agent-session.json")
    document = tmp_path / "readme.md"
    command = plan.removeprefix(".venv/bin/")
    document.write_text(f"```console\n$ {command}\n{shown}```\n", encoding="utf-8")
    assert run_console_examples(document, tmp_path / "run") == []
