"""Reading what the command line is given: files, folders, standard input, JSON and JSONL.

An input is a list of messages (JSON, or JSONL with one message per line) or a request body
holding them (``{"model", "messages", ...}`` or a Responses body with ``"input"``). The format is
taken from ``--format`` or detected by the rules in ``detect_format`` (documented in
docs/cli.md). Nothing here plans: it returns a ``Conversation`` that knows how to put compacted
messages back into the shape it came in.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = ["FORMATS", "CliError", "Conversation", "detect_format", "expand", "read", "read_text"]

FORMATS: Final = ("openai_chat", "openai_responses", "anthropic")

_RESPONSES_ITEMS: Final = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "reasoning",
    }
)
_RESPONSES_PARTS: Final = frozenset({"input_text", "output_text", "input_image", "input_file"})
_ANTHROPIC_BLOCKS: Final = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"}
)


class CliError(Exception):
    """A failure the command line reports in one line and turns into an exit code."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Conversation:
    """One input: its messages, its format, and the shape to write compacted messages back in.

    ``body`` is the request body the messages came in (``None`` for a bare list), ``key`` the
    field of the body that holds them, ``system`` the request-level system text (Anthropic's
    ``system``, Responses' ``instructions``), ``jsonl`` whether the input was one message a line.
    """

    name: str
    messages: list[dict[str, Any]]
    format: str
    body: dict[str, Any] | None = None
    key: str = "messages"
    system: Any = None
    jsonl: bool = False

    def reshaped(self, messages: list[dict[str, Any]]) -> str:
        """Return ``messages`` as the text of a file of this conversation's own shape."""
        if self.jsonl:
            return "".join(_dumps(message) + "\n" for message in messages)
        if self.body is None:
            return json.dumps(messages, ensure_ascii=False, indent=2) + "\n"
        body = dict(self.body)
        body[self.key] = messages
        return json.dumps(body, ensure_ascii=False, indent=2) + "\n"


def expand(files: list[str]) -> list[str]:
    """Return the inputs to process in turn: files as given, a folder as its JSON(L) files."""
    out: list[str] = []
    for name in files:
        path = Path(name)
        if name != "-" and path.is_dir():
            found = sorted(
                str(child)
                for child in path.iterdir()
                if child.is_file() and child.suffix in (".json", ".jsonl")
            )
            if not found:
                raise CliError(f"{name}: the folder holds no .json or .jsonl file")
            out.extend(found)
        else:
            out.append(name)
    return out


def read(name: str, fmt: str | None) -> Conversation:
    """Read input ``name`` (``-`` is standard input) and return its conversation.

    Raises:
        CliError: for a missing or unreadable file, text that is not UTF-8 JSON or JSONL, or
            JSON that is neither a list of messages nor a request body holding one.
    """
    text = read_text(name)
    if not text.strip():
        raise CliError(f"{name}: empty input, expected JSON or JSONL messages")
    jsonl = name.endswith(".jsonl")
    data: Any
    if jsonl:
        data = _lines(name, text)
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            try:
                data = _lines(name, text)
            except CliError:
                raise CliError(f"{name}: invalid JSON: {error}") from None
            jsonl = True
    return _conversation(name, data, fmt, jsonl=jsonl)


def read_text(name: str) -> str:
    """Return the UTF-8 text of file ``name`` (``-``: standard input), or raise ``CliError``."""
    try:
        raw = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
    except FileNotFoundError:
        raise CliError(f"{name}: no such file") from None
    except OSError as error:
        raise CliError(f"{name}: cannot read: {error.strerror or error}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise CliError(f"{name}: not UTF-8 text (byte {error.start})") from None


def _lines(name: str, text: str) -> list[Any]:
    """Parse JSONL: one JSON value a line, blank lines skipped."""
    values: list[Any] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            values.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise CliError(f"{name}: line {number}: invalid JSON: {error}") from None
    return values


def _conversation(name: str, data: object, fmt: str | None, *, jsonl: bool) -> Conversation:
    if isinstance(data, list):
        messages: list[Any] = data
        chosen = fmt or detect_format(messages, None)
        return Conversation(name, messages, chosen, jsonl=jsonl)
    if isinstance(data, dict) and not jsonl:
        for key in ("messages", "input"):
            if key in data:
                messages = data[key]
                if not isinstance(messages, list):
                    raise CliError(
                        f"{name}: the request body's {key!r} must be a list of messages, "
                        f"got {type(messages).__name__}"
                    )
                chosen = fmt or detect_format(messages, data)
                system = data.get("instructions" if chosen == "openai_responses" else "system")
                if chosen == "openai_chat":
                    system = None  # Chat Completions keeps its system messages in the list
                return Conversation(name, messages, chosen, data, key, system)
    raise CliError(
        f"{name}: expected a list of messages or a request body with 'messages' or 'input', "
        f"got {type(data).__name__}"
    )


def detect_format(messages: list[Any], body: dict[str, Any] | None) -> str:  # noqa: PLR0911 - one return per documented rule
    """Return the format of ``messages`` (and their request body), by the first rule that holds.

    1. A body with ``input`` is an OpenAI Responses request; a body with a top-level ``system``
       is an Anthropic request.
    2. An item with a ``type`` of a Responses item (``function_call``, ``reasoning``, ...) or
       without a ``role``: OpenAI Responses.
    3. A message with role ``tool``, ``system`` or ``developer``, or with ``tool_calls``:
       OpenAI Chat Completions.
    4. A content block ``tool_use``, ``tool_result``, ``thinking``, ``image`` or ``document``:
       Anthropic; a content part ``input_text``, ``output_text``, ... : OpenAI Responses.
    5. Otherwise (plain text messages, which every format reads alike): OpenAI Chat Completions.
    """
    if body is not None:
        if "input" in body:
            return "openai_responses"
        if "system" in body:
            return "anthropic"
    dicts = [message for message in messages if isinstance(message, dict)]
    if any(message.get("type") in _RESPONSES_ITEMS or "role" not in message for message in dicts):
        return "openai_responses"
    if any(
        message.get("role") in ("tool", "system", "developer") or "tool_calls" in message
        for message in dicts
    ):
        return "openai_chat"
    for message in dicts:
        content = message.get("content")
        if isinstance(content, list):
            kinds = {part.get("type") for part in content if isinstance(part, dict)}
            if kinds & _ANTHROPIC_BLOCKS:
                return "anthropic"
            if kinds & _RESPONSES_PARTS:
                return "openai_responses"
    return "openai_chat"


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
