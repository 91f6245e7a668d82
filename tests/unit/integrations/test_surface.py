"""What every integration shows of its conversations: the attributes docs/integrations.md names.

The hooks are found in the code (every class an integration module exports whose constructor
takes ``max_tokens``), not listed here, so a hook added later is held to the same surface.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import cutctx.integrations
from cutctx import ContextWindow, WindowStats

DOCUMENT = Path(__file__).resolve().parents[3] / "docs" / "integrations.md"
DOCUMENTED = tuple(dict.fromkeys(re.findall(r"`hook\.(\w+)", DOCUMENT.read_text("utf-8"))))
"""The attributes the guide promises for every hook (``hook.window``, ``hook.stats``, ...)."""


def hook_classes() -> list[type]:
    """Every class an integration module exports that is made with ``max_tokens``.

    (A state schema is a ``TypedDict``, a ``dict``: it is not made with options.)
    """
    found: list[type] = []
    for info in pkgutil.iter_modules(cutctx.integrations.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"cutctx.integrations.{info.name}")
        for name in module.__all__:
            value = getattr(module, name)
            if (
                isinstance(value, type)
                and not issubclass(value, dict)
                and "max_tokens" in inspect.signature(value).parameters
            ):
                found.append(value)
    return found


HOOKS = hook_classes()


def test_the_guide_names_the_attributes_and_the_code_has_three_hooks() -> None:
    assert set(DOCUMENTED) >= {"window", "stats", "last", "state", "windows"}
    assert len(HOOKS) == 3


@pytest.mark.parametrize("hook", HOOKS, ids=lambda hook: hook.__name__)
def test_every_hook_has_the_documented_attributes_before_its_first_call(hook: type) -> None:
    made = hook(2_000, keep_first=1)
    for name in DOCUMENTED:
        assert hasattr(made, name), f"{hook.__name__}.{name}"
    assert isinstance(made.window, ContextWindow)
    assert isinstance(made.stats, WindowStats)
    assert made.stats.requests == 0
    assert made.last is None
    assert made.state() == made.window.state()
    assert made.windows == ()
