"""Hypothesis strategies for agent-loop sessions, and helpers to read the requests a loop sends.

A session is a growing conversation in one provider format: step 0 sends the task (after a system
message, in Chat, when there is one), and each later step appends what an agent loop appends
before its next request — an assistant message calling one to three tools and their results, or
an assistant reply and a new user message, now and then nothing at all (the same history again).
Every history the session yields is a valid request of its format. Every text starts with a
unique tag (``[7]``), so a message, block or result can be recognised in any request the window
builds; tool results are told apart by their call ids.

``units`` reads a request as a list of ``(key, form)``: one unit per Chat message or per Anthropic
content block (so merged Anthropic messages still show their parts), the form its canonical JSON
with ``cache_control`` markers removed (markers are not part of a message's promises).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

from cutctx.formats import anthropic
from tests.format_validators import SUMMARY_OPENING

if TYPE_CHECKING:
    from collections.abc import Iterator

FILLER = "lorem ipsum dolor sit amet build cache error \u00e9t\u00e9 \u4e2d\u6587 {} : , "
FORMATS = ("openai_chat", "anthropic")
Key = tuple[str, str]
Unit = tuple[Key, str]


@dataclass(frozen=True)
class Session:
    """A session: its format, request-level ``system`` and the messages each step appends."""

    format: str
    system: str | list[dict[str, Any]] | None
    steps: tuple[tuple[dict[str, Any], ...], ...]

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The full history after the last step."""
        return [message for step in self.steps for message in step]

    def lengths(self) -> list[int]:
        """The history's length at each step."""
        lengths: list[int] = []
        total = 0
        for step in self.steps:
            total += len(step)
            lengths.append(total)
        return lengths

    def histories(
        self, messages: list[dict[str, Any]] | None = None
    ) -> Iterator[list[dict[str, Any]]]:
        """Each step's history: a new list holding the same message objects, grown at its end
        (of ``messages``, a copy of the full history, when given)."""
        source = self.messages if messages is None else messages
        for length in self.lengths():
            yield source[:length]

    def task_messages(self, keep_first: int) -> list[dict[str, Any]]:
        """The first ``keep_first`` non-system messages of the full history."""
        others = [m for m in self.messages if m.get("role") not in ("system", "developer")]
        return others[:keep_first]


class _Tags:
    """Hands out the unique tags texts start with."""

    def __init__(self) -> None:
        self.next = 0

    def text(self, draw: st.DrawFn, low: int, high: int) -> str:
        """A tagged text of ``low`` to ``high`` filler characters, ending in a non-space."""
        self.next += 1
        size = draw(st.integers(low, high))
        start = draw(st.integers(0, len(FILLER) - 1))
        body = (FILLER * (size // len(FILLER) + 2))[start : start + size]
        return f"[{self.next}] {body}".rstrip() + "."


@st.composite
def sessions(draw: st.DrawFn, max_steps: int = 30, fmt: str | None = None) -> Session:
    """A session of up to ``max_steps`` steps in ``fmt`` (drawn when ``None``)."""
    name = draw(st.sampled_from(FORMATS)) if fmt is None else fmt
    tags = _Tags()
    steps = chat_steps(draw, tags, max_steps) if name == "openai_chat" else None
    if steps is not None:
        system: str | list[dict[str, Any]] | None = (
            tags.text(draw, 20, 200) if draw(st.integers(0, 3)) == 0 else None
        )
        return Session(name, system, steps)
    markers = draw(st.integers(0, 3))
    system_choice = draw(st.integers(0, 2))
    if system_choice == 0:
        system = None
    elif system_choice == 1:
        system = tags.text(draw, 20, 300)
    else:
        block: dict[str, Any] = {"type": "text", "text": tags.text(draw, 20, 300)}
        if markers:
            block["cache_control"] = {"type": "ephemeral"}
            markers -= 1
        system = [block]
    return Session(name, system, anthropic_steps(draw, tags, max_steps, markers))


def chat_steps(
    draw: st.DrawFn, tags: _Tags, max_steps: int
) -> tuple[tuple[dict[str, Any], ...], ...]:
    """A Chat Completions session's steps."""
    first: list[dict[str, Any]] = []
    if draw(st.booleans()):
        first.append({"role": "system", "content": tags.text(draw, 20, 300)})
    first.append({"role": "user", "content": tags.text(draw, 10, 300)})
    steps = [tuple(first)]
    call = 0
    for _ in range(draw(st.integers(0, max_steps - 1))):
        event = draw(st.sampled_from(["tools", "tools", "tools", "chat", "same"]))
        if event == "same":
            steps.append(())
            continue
        if event == "chat":
            added: list[dict[str, Any]] = [
                {"role": "assistant", "content": tags.text(draw, 5, 300)}
            ]
            if draw(st.integers(0, 5)) == 0:
                added.append({"role": "developer", "content": tags.text(draw, 5, 80)})
            user: Any = tags.text(draw, 5, 300)
            if draw(st.integers(0, 3)) == 0:
                user = [{"type": "text", "text": user}]
            added.append({"role": "user", "content": user})
            steps.append(tuple(added))
            continue
        ids = [f"call_{call + k}" for k in range(draw(st.integers(1, 3)))]
        call += len(ids)
        assistant = {
            "role": "assistant",
            "content": tags.text(draw, 5, 200),
            "tool_calls": [
                {
                    "id": i,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": i})},
                }
                for i in ids
            ],
        }
        results: list[dict[str, Any]] = []
        for i in draw(st.permutations(ids)):
            body = tags.text(draw, 20, 1_200)
            content: Any = body if draw(st.booleans()) else [{"type": "text", "text": body}]
            results.append({"role": "tool", "tool_call_id": i, "content": content})
        steps.append((assistant, *results))
    return tuple(steps)


def anthropic_steps(
    draw: st.DrawFn, tags: _Tags, max_steps: int, markers: int
) -> tuple[tuple[dict[str, Any], ...], ...]:
    """A Messages API session's steps, with at most ``markers`` of the caller's cache markers."""

    def marked(block: dict[str, Any]) -> dict[str, Any]:
        nonlocal markers
        if markers and draw(st.integers(0, 9)) == 0:
            block["cache_control"] = {"type": "ephemeral"}
            markers -= 1
        return block

    task: Any = tags.text(draw, 10, 300)
    if draw(st.booleans()):
        task = [marked({"type": "text", "text": task})]
    steps: list[tuple[dict[str, Any], ...]] = [({"role": "user", "content": task},)]
    use = 0
    for _ in range(draw(st.integers(0, max_steps - 1))):
        event = draw(st.sampled_from(["tools", "tools", "tools", "chat", "same"]))
        if event == "same":
            steps.append(())
            continue
        thinking: list[dict[str, Any]] = []
        if draw(st.integers(0, 4)) == 0:
            thinking = [
                {"type": "thinking", "thinking": tags.text(draw, 5, 100), "signature": "c2ln"}
            ]
        if event == "chat":
            reply: Any = [*thinking, marked({"type": "text", "text": tags.text(draw, 5, 300)})]
            if not thinking and draw(st.booleans()):
                reply = tags.text(draw, 5, 300)
            user: Any = tags.text(draw, 5, 300)
            if draw(st.booleans()):
                user = [marked({"type": "text", "text": user})]
            steps.append(
                ({"role": "assistant", "content": reply}, {"role": "user", "content": user})
            )
            continue
        ids = [f"toolu_{use + k}" for k in range(draw(st.integers(1, 3)))]
        use += len(ids)
        note = [{"type": "text", "text": tags.text(draw, 5, 200)}] if draw(st.booleans()) else []
        uses = [
            {"type": "tool_use", "id": i, "name": "read_file", "input": {"path": i}} for i in ids
        ]
        results: list[dict[str, Any]] = []
        for i in ids:
            body = tags.text(draw, 20, 1_200)
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": i}
            result["content"] = body if draw(st.booleans()) else [{"type": "text", "text": body}]
            if draw(st.integers(0, 5)) == 0:
                result["is_error"] = True
            results.append(marked(result))
        if draw(st.integers(0, 4)) == 0:
            results.append({"type": "text", "text": tags.text(draw, 5, 100)})
        steps.append(
            (
                {"role": "assistant", "content": [*thinking, *note, *uses]},
                {"role": "user", "content": results},
            )
        )
    return tuple(steps)


# -- reading requests ---------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """``value`` without ``cache_control`` keys on its blocks."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def canonical(value: Any) -> str:
    """The canonical JSON of ``value``, ``cache_control`` markers removed, and a message's text
    content as one text block (the form a window's marker turns it into)."""
    plain = _plain(value)
    if isinstance(plain, dict) and isinstance(plain.get("content"), str) and "role" in plain:
        plain["content"] = [{"type": "text", "text": plain["content"]}]
    return json.dumps(plain, sort_keys=True, ensure_ascii=False)


def _tag(text: str) -> str | None:
    if text.startswith(SUMMARY_OPENING):  # a summary the window wrote: keyed by its whole text
        return None
    if text.startswith("["):
        end = text.find("]")
        if end > 0:
            return text[: end + 1]
    return None


def _first_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                return str(part["text"])
    return ""


def units(fmt: str, request: list[dict[str, Any]]) -> list[Unit]:
    """The request's units, in order: ``(key, form)`` per Chat message or Anthropic block.

    Keys: ``("result", call id)`` for a tool result, ``("use", id)`` for a tool call block,
    ``("tag", tag)`` for a tagged text (or a message whose text is tagged), ``("summary", text)``
    for any other text (what the window wrote); Anthropic's filler message is skipped.
    """
    out: list[Unit] = []
    for message in request:
        if fmt == "openai_chat":
            if message.get("role") == "tool":
                key: Key = ("result", str(message["tool_call_id"]))
            else:
                text = _first_text(message.get("content"))
                tag = _tag(text)
                key = ("tag", tag) if tag is not None else ("summary", text)
            out.append((key, canonical(message)))
            continue
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            kind = block.get("type")
            if kind == "tool_result":
                key = ("result", str(block["tool_use_id"]))
            elif kind == "tool_use":
                key = ("use", str(block["id"]))
            else:
                text = str(block.get("text", block.get("thinking", "")))
                if kind == "text" and text == anthropic.FILLER_TEXT:
                    continue
                tag = _tag(text)
                key = ("tag", tag) if tag is not None else ("summary", text)
            out.append((key, canonical(block)))
    return out


def original_forms(session: Session) -> dict[Key, str]:
    """Each unit of the full history in its original form."""
    return dict(units(session.format, session.messages))


def result_bodies(session: Session) -> dict[Key, str]:
    """The raw text of every tool result, by its key."""
    bodies: dict[Key, str] = {}
    for message in session.messages:
        if session.format == "openai_chat":
            if message.get("role") == "tool":
                bodies["result", message["tool_call_id"]] = _first_text(message["content"])
            continue
        content = message["content"]
        if isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_result":
                    bodies["result", block["tool_use_id"]] = _first_text(block["content"])
    return bodies


def marked_keys(fmt: str, request: list[dict[str, Any]]) -> set[Key]:
    """The keys of the Anthropic blocks of ``request`` that carry a ``cache_control`` marker."""
    if fmt != "anthropic":
        return set()
    marked: set[Key] = set()
    for message in request:
        content = message["content"]
        if not isinstance(content, list):
            continue
        for block in content:
            if "cache_control" in block:
                marked.update(key for key, _ in units(fmt, [{"content": [block]}]))
    return marked


def edited(message: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``message`` whose first text (or tool result) says something else."""

    def change(content: Any) -> Any:
        if isinstance(content, str):
            return content + " Edited."
        blocks = [dict(block) for block in content]
        for block in blocks:
            if block.get("type") == "text":
                block["text"] += " Edited."
                return blocks
            if block.get("type") == "tool_result":
                block["content"] = change(block["content"])
                return blocks
        blocks.append({"type": "text", "text": "Edited."})
        return blocks

    copy = dict(message)
    copy["content"] = change(message["content"]) if message.get("content") else "Edited."
    return copy
