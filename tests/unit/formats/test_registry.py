"""Formats found by name: an installed package's entry point in ``cutctx.formats``."""

from __future__ import annotations

import sys
import textwrap
from typing import TYPE_CHECKING, Any, get_args

import pytest
from baseaicore import ValidationError

from cutctx import ContextWindow, compact_messages
from cutctx.formats import ENTRY_POINT_GROUP, NAMES, FormatName, available, resolve

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

MODULE = """
import dataclasses

from cutctx.formats import OPENAI_CHAT

class Echo(type(OPENAI_CHAT)):
    @property
    def name(self):
        return "echo_chat"

    def render(self, view, binding):
        return OPENAI_CHAT.render(view, dataclasses.replace(binding, format=OPENAI_CHAT.name))

ECHO = Echo()
WRONG = Echo.__new__(Echo)
NOT_A_FORMAT = object()
"""


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[Path]:
    """A distribution installed into a directory on ``sys.path``: a module and its dist-info."""
    (tmp_path / "echo_formats.py").write_text(textwrap.dedent(MODULE), encoding="utf-8")
    info = tmp_path / "echo_formats-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-formats\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n"
        "echo_chat = echo_formats:ECHO\n"
        "misnamed = echo_formats:WRONG\n"
        "nothing = echo_formats:NOT_A_FORMAT\n"
        "broken = echo_formats_missing:ECHO\n",
        encoding="utf-8",
    )
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("echo_formats", None)


class TestRegistry:
    def test_format_name_names_every_built_in_format_and_nothing_else(self) -> None:
        """The ``FormatName`` literal a type checker holds a name to is the built-in providers'
        formats and the frameworks', in the order ``NAMES`` and the frameworks give them."""
        assert get_args(FormatName.__value__) == (*NAMES, "langchain", "pydantic_ai")
        for name in get_args(FormatName.__value__):
            assert resolve(name).name == name

    def test_an_installed_format_is_named_like_a_built_in_one(self, installed: Path) -> None:
        del installed
        fmt = resolve("echo_chat")
        assert fmt.name == "echo_chat"
        assert resolve("echo_chat") is fmt
        assert "echo_chat" in available()
        messages: list[Any] = [{"role": "user", "content": "hi"}]
        assert compact_messages(messages, max_tokens=100, format="echo_chat").messages == messages  # type: ignore[arg-type]
        window = ContextWindow(fmt, max_tokens=100)
        window.prepare(messages)
        restored = ContextWindow.from_state(window.state())  # found again by its name
        assert restored.format == "echo_chat"
        assert restored.prepare(messages) == messages

    @pytest.mark.parametrize(
        ("name", "words"),
        [
            ("misnamed", "makes a format named"),
            ("nothing", "is not a cutctx.formats.Format"),
            ("broken", "does not load"),
        ],
    )
    def test_a_bad_entry_point_is_refused_in_one_line(
        self, installed: Path, name: str, words: str
    ) -> None:
        del installed
        with pytest.raises(ValidationError, match=words) as caught:
            resolve(name)
        assert "\n" not in caught.value.message

    def test_an_unknown_name_lists_every_known_one(self) -> None:
        with pytest.raises(ValidationError, match="openai_chat") as caught:
            resolve("no_such_format")
        assert "langchain" in caught.value.details["expected"]
