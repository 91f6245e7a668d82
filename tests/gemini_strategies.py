"""Hypothesis strategies for Gemini histories that the Gemini API would accept.

Agent runs with parallel function calls (with and without ids, the responses shuffled), thought
signatures on the first call and on thought parts, code execution, images of every size
(small, tiled, unreadable), error responses, JSON responses and long results, and now and then
two user contents in a row. Every history opens with the task as a user content.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.format_strategies import bodies, texts
from tests.format_validators import png

TOOLS = ("read_file", "grep", "run_tests", "shell")


def signatures() -> st.SearchStrategy[str]:
    """A thought signature as JSON carries it: base64 text of opaque bytes."""
    import base64  # noqa: PLC0415 - only here

    return st.binary(min_size=4, max_size=40).map(lambda raw: base64.b64encode(raw).decode())


@st.composite
def images(draw: st.DrawFn) -> dict[str, Any]:
    """An inline image: small (one price), large (tiled) or unreadable; or a file URI."""
    kind = draw(st.sampled_from(["small", "large", "broken", "uri"]))
    if kind == "uri":
        return {"file_data": {"mime_type": "image/png", "file_uri": "gs://bucket/cat.png"}}
    if kind == "broken":
        return {"inline_data": {"mime_type": "image/png", "data": "bm90IGFuIGltYWdl"}}
    side = (1, 384) if kind == "small" else (385, 4000)
    size = draw(st.tuples(st.integers(*side), st.integers(*side)))
    return {"inline_data": {"mime_type": "image/png", "data": png(*size)}}


@st.composite
def _response(draw: st.DrawFn, name: str, call_id: str | None) -> dict[str, Any]:
    kind = draw(st.sampled_from(["output", "output", "error", "json"]))
    if kind == "output":
        body: dict[str, Any] = {"output": draw(bodies())}
    elif kind == "error":
        body = {"error": draw(texts(40))}
    else:
        body = {"matches": [draw(texts(20)), draw(texts(20))], "count": draw(st.integers(0, 9))}
    response: dict[str, Any] = {"name": name, "response": body}
    if call_id is not None:
        response["id"] = call_id
    if draw(st.integers(0, 6)) == 0:
        response["parts"] = [{"inline_data": {"mime_type": "image/png", "data": png(8, 8)}}]
    return {"function_response": response}


@st.composite
def gemini_histories(  # noqa: PLR0912 - one branch per kind of event
    draw: st.DrawFn, max_events: int = 8
) -> list[dict[str, Any]]:
    """A Gemini history: the task, then user messages, model replies and function-call steps."""
    history: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": draw(texts())}]}]
    with_ids = draw(st.booleans())
    number = 0
    for _ in range(draw(st.integers(0, max_events))):
        last = history[-1]["role"]
        event = draw(st.sampled_from(["user", "model", "calls", "calls", "calls"]))
        if event == "user" or (event == "model" and last == "model"):
            parts: list[dict[str, Any]] = [{"text": draw(texts())}]
            if draw(st.integers(0, 3)) == 0:
                parts.append(draw(images()))
            history.append({"role": "user", "parts": parts})
            continue
        if last == "model":
            history.append({"role": "user", "parts": [{"text": draw(texts())}]})
        if event == "model":
            parts = []
            if draw(st.booleans()):
                parts.append({"text": draw(texts(40)), "thought": True})
            parts.append({"text": draw(texts())})
            if draw(st.integers(0, 4)) == 0:
                parts.append({"executable_code": {"language": "PYTHON", "code": draw(texts(40))}})
                parts.append(
                    {"code_execution_result": {"outcome": "OUTCOME_OK", "output": draw(texts(30))}}
                )
            if draw(st.booleans()):
                parts[-1] = {**parts[-1], "thought_signature": draw(signatures())}
            history.append({"role": "model", "parts": parts})
            continue
        count = draw(st.integers(1, 3))
        calls: list[tuple[str, str | None]] = []
        parts = []
        if draw(st.booleans()):
            parts.append({"text": draw(texts(40))})
        signed = draw(st.booleans())
        for position in range(count):
            name = draw(st.sampled_from(TOOLS))
            call_id = f"call_{number}" if with_ids else None
            number += 1
            args = {"path": draw(texts(20)), "n": draw(st.integers(0, 99))}
            part: dict[str, Any] = {"function_call": {"name": name, "args": args}}
            if call_id is not None:
                part["function_call"]["id"] = call_id
            if signed and position == 0:
                part["thought_signature"] = draw(signatures())
            parts.append(part)
            calls.append((name, call_id))
        history.append({"role": "model", "parts": parts})
        answers = [draw(_response(name, call_id)) for name, call_id in calls]
        answers = draw(st.permutations(answers))
        if draw(st.integers(0, 5)) == 0:
            answers.append({"text": draw(texts(40))})
        history.append({"role": "user", "parts": answers})
    return history


def systems() -> st.SearchStrategy[Any]:
    """A ``system_instruction``: none, a string, or a content of text parts."""
    return st.none() | texts() | texts().map(lambda text: {"parts": [{"text": text}]})
