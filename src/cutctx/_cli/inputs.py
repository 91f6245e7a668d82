"""Reading what the command line is given: files, folders, standard input, JSON and JSONL.

An input is a list of messages (JSON, or JSONL with one message per line) or a request body
holding them (``{"model", "messages", ...}``, a Responses body with ``"input"`` or a Gemini
one with ``"contents"``). A
framework's messages are objects: a LangChain file is the list
``langchain_core.messages.messages_to_dict`` writes, a Pydantic AI file the list
``pydantic_ai.messages.ModelMessagesTypeAdapter`` writes in JSON mode; each framework is
imported only when ``--format`` names it (an optional extra). The format is
taken from ``--format`` or detected by the rules of ``cutctx.formats._detect`` (documented in
docs/cli.md). Nothing here plans: it returns a ``Conversation`` that knows how to put compacted
messages back into the shape it came in.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, get_args

from baseaicore import SuiteError

from cutctx._cli.frameworks import Codec, codec_of
from cutctx.formats import FormatName, resolve
from cutctx.formats._detect import detect
from cutctx.formats._format import presentation_of

if TYPE_CHECKING:
    from cutctx.formats import Format

__all__ = ["FORMATS", "CliError", "Conversation", "expand", "read", "read_text"]

FORMATS: Final[tuple[str, ...]] = get_args(FormatName.__value__)
"""The names ``--format`` takes: every format ``cutctx.formats.resolve`` knows by name."""


class CliError(Exception):
    """A failure the command line reports in one line and turns into an exit code."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def _format(name: str, fmt: str) -> tuple[Format[Any], Codec | None]:
    """Return the format ``--format fmt`` names and its codec (a missing extra is one line)."""
    try:
        chosen = resolve(fmt)
        return chosen, codec_of(chosen)
    except ImportError as missing:
        raise CliError(f"{name}: --format {fmt}: {missing}") from None


@dataclass(frozen=True, slots=True)
class Conversation:
    """One input: its messages, its format, and the shape to write compacted messages back in.

    ``body`` is the request body the messages came in (``None`` for a bare list), ``key`` the
    field of the body that holds them, ``system`` the request-level system text (Anthropic's
    ``system``, Responses' ``instructions``), ``jsonl`` whether the input was one message a line.
    """

    name: str
    messages: list[Any]
    format: Format[Any]
    body: dict[str, Any] | None = None
    key: str = "messages"
    system: Any = None
    jsonl: bool = False
    codec: Codec | None = None

    def reshaped(self, messages: list[Any]) -> str:
        """Return ``messages`` as the text of a file of this conversation's own shape."""
        if self.codec is not None:
            messages = self.codec.dump(messages)
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
    given, codec = _format(name, fmt) if fmt is not None else (None, None)
    if given is not None and codec is not None:
        return _objects(name, data, given, codec, jsonl=jsonl)
    if isinstance(data, list):
        messages: list[Any] = data
        chosen = given or detect(messages, None)
        return Conversation(name, messages, chosen, jsonl=jsonl)
    if isinstance(data, dict) and not jsonl:
        for key in ("messages", "input", "contents"):
            if key in data:
                messages = data[key]
                if not isinstance(messages, list):
                    raise CliError(
                        f"{name}: the request body's {key!r} must be a list of messages, "
                        f"got {type(messages).__name__}"
                    )
                chosen = given or detect(messages, data)
                # Chat Completions keeps its system in the list: no field
                field = presentation_of(chosen).system_field
                system = data.get(field) if field is not None else None
                return Conversation(name, messages, chosen, data, key, system)
    raise CliError(
        f"{name}: expected a list of messages or a request body with 'messages', 'input' or "
        f"'contents', got {type(data).__name__}"
    )


def _objects(
    name: str, data: object, fmt: Format[Any], codec: Codec, *, jsonl: bool
) -> Conversation:
    """Return the conversation of a framework's file: a list of its serialized messages."""
    if not isinstance(data, list):
        raise CliError(
            f"{name}: --format {fmt.name} reads a list of messages as {codec.writer} writes "
            f"them, got {type(data).__name__}"
        )
    try:
        messages = codec.load(data)
    except (SuiteError, ValueError, TypeError, KeyError) as error:  # pydantic's is a ValueError
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise CliError(
            f"{name}: not {fmt.name} messages as {codec.writer} writes them: {reason:.160}"
        ) from None
    return Conversation(name, messages, fmt, jsonl=jsonl, codec=codec)


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
