"""Every example in the README, the guides under docs/ and the public docstrings runs.

Markdown examples are doctests (``>>>`` lines inside fenced ``pycon`` blocks); each file runs in
one namespace, top to bottom, so a guide can build on its earlier examples.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import cutctx

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
MODULES = sorted(info.name for info in pkgutil.walk_packages(cutctx.__path__, prefix="cutctx."))
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


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
