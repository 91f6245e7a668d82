"""How this version is installed: the docs' install lines, and pip's resolver beside a 0.1 pin.

cutctx 0.1.1 is not on PyPI yet, so ``pip install "cutctx[langchain]"`` would fetch 0.1.0. Every
install line in the README, the docs and the import errors installs this version instead: from a
checkout (``pip install .``, ``pip install ".[langchain]"``) or from a built wheel
(``pip install "cutctx[langchain] @ file:///.../cutctx-0.1.1-py3-none-any.whl"``). And the
applications pin ``cutctx>=0.1,<0.2``: pip must install this checkout beside such a pin without
being forced, which a throwaway environment resolves with pip itself, offline.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

import cutctx

ROOT = Path(__file__).resolve().parents[1]

_COMMAND = re.compile(r"pip install ([^`\n]*)")
_END = re.compile(r"&&|;|#| \(|\)$")
_FROM_INDEX = re.compile(r"cutctx(\[[^\]]*\])?")


def install_lines(text: str) -> list[str]:
    """Return the arguments of every ``pip install`` in ``text`` (up to ``&&``, ``#``, ``(``)."""
    return [_END.split(found.group(1), maxsplit=1)[0].strip() for found in _COMMAND.finditer(text)]


def fetches_from_the_index(arguments: str) -> bool:
    """Whether ``pip install arguments`` names cutctx by name alone: the published release."""
    return any(
        _FROM_INDEX.fullmatch(word) for word in shlex.split(arguments) if not word.startswith("-")
    )


def raised_texts(path: Path) -> list[str]:
    """Return the literal text of each ``raise ImportError(...)``, ``CliError(...)`` or
    ``ValidationError(...)`` (a named tokenizer without its extra says how to install it)."""
    texts = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if (
            isinstance(node, ast.Raise)
            and isinstance(node.exc, ast.Call)
            and isinstance(node.exc.func, ast.Name)
            and node.exc.func.id in ("ImportError", "CliError", "ValidationError")
        ):
            texts.append(
                "".join(
                    part.value
                    for argument in node.exc.args
                    for part in ast.walk(argument)
                    if isinstance(part, ast.Constant) and isinstance(part.value, str)
                )
            )
    return texts


def documents() -> dict[str, str]:
    """The README, CONTRIBUTING, the docs and the errors' texts, by where they are."""
    found = {
        str(path.relative_to(ROOT)): path.read_text("utf-8")
        for path in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")]
    }
    for path in sorted((ROOT / "src" / "cutctx").rglob("*.py")):
        for number, text in enumerate(raised_texts(path)):
            found[f"{path.relative_to(ROOT)} error {number}"] = text
    return found


class TestInstallLines:
    def test_every_install_line_installs_this_version_not_the_published_one(self) -> None:
        lines = {
            (where, arguments)
            for where, text in documents().items()
            for arguments in install_lines(text)
        }
        wrong = sorted(line for line in lines if fetches_from_the_index(line[1]))
        assert wrong == []
        assert len(lines) >= 10
        errors = {arguments for where, arguments in lines if " error " in where}
        assert {'".[langchain]"', '".[openai-agents]"', '".[pydantic-ai]"', "'.[tiktoken]'"} <= (
            errors
        )

    @pytest.mark.parametrize(
        ("text", "wrong"),
        [
            ('run `pip install "cutctx[langchain]"` first', True),
            ("pip install cutctx", True),
            ("pip install -U 'cutctx[tiktoken]' && cutctx --version", True),
            ('pip install ".[langchain]"     # the extra', False),
            ("pip install . && cutctx plan", False),
            ('pip install "cutctx[langchain] @ file:///w/cutctx-0.1.1-py3-none-any.whl"', False),
            ("pip install -e '.[dev]'", False),
        ],
    )
    def test_the_check_tells_the_published_release_from_this_one(
        self, text: str, wrong: bool
    ) -> None:
        (arguments,) = install_lines(text)
        assert fetches_from_the_index(arguments) is wrong


def make_wheel(folder: Path, name: str, requires: str) -> Path:
    """Write a wheel of an empty distribution ``name`` 1.0 that requires ``requires``."""
    path = folder / f"{name}-1.0-py3-none-any.whl"
    info = f"{name}-1.0.dist-info"
    files = {
        f"{name}/__init__.py": "",
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\nRequires-Dist: {requires}\n"
        ),
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "".join(f"{file},,\n" for file in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for file, text in files.items():
            wheel.writestr(file, text)
        wheel.writestr(f"{info}/RECORD", record)
    return path


def pip(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - the running interpreter's pip, arguments from the test
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *arguments],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


class TestBesideAnApplication:
    def test_pip_installs_this_checkout_beside_an_application_pinning_0_1(
        self, tmp_path: Path
    ) -> None:
        """Our wheel and an application requiring ``cutctx>=0.1,<0.2`` resolve together, offline.

        The wheel is built from this checkout (``pip wheel --no-deps .``), baseaicore's wheel is
        fetched beside it, and pip resolves both in a throwaway environment with no index: only
        those wheels can satisfy the pin, so a version outside it fails here.
        """
        wheels = tmp_path / "wheels"
        built = pip("wheel", "--no-deps", "--quiet", str(ROOT), "-w", str(wheels))
        assert built.returncode == 0, built.stderr[-2000:]
        (ours,) = wheels.glob("cutctx-*.whl")
        assert ours.name == f"cutctx-{cutctx.__version__}-py3-none-any.whl"
        dependency = f"baseaicore=={version('baseaicore')}"
        fetched = pip("download", "--no-deps", "--quiet", dependency, "-d", str(wheels))
        assert fetched.returncode == 0, fetched.stderr[-2000:]
        make_wheel(wheels, "pinning_app", "cutctx>=0.1,<0.2")
        venv = tmp_path / "venv"
        made = subprocess.run(  # noqa: S603 - the running interpreter, arguments from the test
            [sys.executable, "-m", "venv", "--without-pip", str(venv)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert made.returncode == 0, made.stderr
        report = tmp_path / "report.json"
        resolved = pip(
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--dry-run",
            "--no-index",
            "--find-links",
            str(wheels),
            "--report",
            str(report),
            "--quiet",
            "pinning_app",
            f"cutctx @ {ours.as_uri()}",
        )
        assert resolved.returncode == 0, resolved.stderr[-2000:]
        chosen = {
            item["metadata"]["name"]: item["metadata"]["version"]
            for item in json.loads(report.read_text("utf-8"))["install"]
        }
        assert chosen == {
            "cutctx": cutctx.__version__,
            "pinning_app": "1.0",
            "baseaicore": version("baseaicore"),
        }
