"""The frameworks are optional: ``cutctx`` never imports one, each module only its own, and a
module whose framework is missing says which extra brings it."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cutctx

FRAMEWORKS = ("langchain", "langchain_core", "langgraph", "agents", "pydantic_ai")
SOURCE = str(Path(cutctx.__file__).resolve().parent.parent)


def frameworks_imported_by(statement: str) -> list[str]:
    """The frameworks a fresh interpreter has imported after running ``statement``."""
    code = (
        f"import json, sys\n{statement}\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(FRAMEWORKS)})))"
    )
    env = {**os.environ, "PYTHONPATH": SOURCE}
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed statement
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    found: list[str] = json.loads(done.stdout)
    return found


class TestOptionalFrameworks:
    def test_importing_cutctx_its_formats_and_integrations_imports_no_framework(self) -> None:
        assert frameworks_imported_by("import cutctx, cutctx.formats, cutctx.integrations") == []

    @pytest.mark.parametrize(
        ("module", "own"),
        [
            ("cutctx.formats.langchain", ["langchain_core"]),
            ("cutctx.formats.pydantic_ai", ["pydantic_ai"]),
            ("cutctx.integrations.langchain", ["langchain", "langchain_core", "langgraph"]),
            ("cutctx.integrations.openai_agents", ["agents"]),
            ("cutctx.integrations.pydantic_ai", ["pydantic_ai"]),
        ],
    )
    def test_each_module_imports_only_its_own_framework(self, module: str, own: list[str]) -> None:
        assert frameworks_imported_by(f"import {module}") == own

    @pytest.mark.parametrize(
        ("module", "missing", "extra"),
        [
            ("cutctx.formats.langchain", "langchain_core", ".[langchain]"),
            ("cutctx.formats.pydantic_ai", "pydantic_ai", ".[pydantic-ai]"),
            ("cutctx.integrations.langchain", "langchain", ".[langchain]"),
            ("cutctx.integrations.langchain", "langgraph", ".[langchain]"),
            ("cutctx.integrations.openai_agents", "agents", ".[openai-agents]"),
            ("cutctx.integrations.pydantic_ai", "pydantic_ai", ".[pydantic-ai]"),
        ],
    )
    def test_a_module_without_its_framework_names_the_extra(
        self, module: str, missing: str, extra: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        for name in [missing, *(name for name in sys.modules if name.startswith(f"{missing}."))]:
            monkeypatch.setitem(sys.modules, name, None)  # None: "not installed"
        for name in (module, module.replace(".integrations.", ".formats.")):
            parent, _, child = name.rpartition(".")
            if name in sys.modules:  # the attribute a re-import sets is put back too
                monkeypatch.setattr(sys.modules[parent], child, sys.modules[name])
            monkeypatch.delitem(sys.modules, name, raising=False)
        with pytest.raises(ImportError, match=re.escape(f'pip install "{extra}"')) as caught:
            importlib.import_module(module)
        assert str(caught.value).startswith(f"{module} needs ")
        assert isinstance(caught.value.__cause__, ImportError)
