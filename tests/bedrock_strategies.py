"""Hypothesis strategies for Converse histories that Bedrock would accept.

Agent runs in strict alternation: parallel tool uses (the results shuffled, as many as the
uses), reasoning with signatures or redacted, error results, JSON results, long results, images
as raw bytes (boto3) or base64 text (Converse JSON) of every size, text documents, a guard
block, and a cache point or two. Every history opens with the task as a user message.
"""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import strategies as st

from tests.format_strategies import bodies, texts
from tests.format_validators import png

TOOLS = ("read_file", "grep", "run_tests", "shell")


@st.composite
def images(draw: st.DrawFn) -> dict[str, Any]:
    """An image block: a PNG of any size as bytes or base64 text, or an S3 location."""
    if draw(st.integers(0, 5)) == 0:
        return {"image": {"format": "png", "source": {"s3Location": {"uri": "s3://b/c.png"}}}}
    data = png(draw(st.integers(1, 3000)), draw(st.integers(1, 3000)))
    raw: Any = base64.b64decode(data) if draw(st.booleans()) else data
    return {"image": {"format": "png", "source": {"bytes": raw}}}


@st.composite
def _result(draw: st.DrawFn, use_id: str) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "text", "json", "error", "image"]))
    content: list[dict[str, Any]]
    if kind == "json":
        content = [{"json": {"matches": [draw(texts(20))], "n": draw(st.integers(0, 9))}}]
    elif kind == "image":
        content = [{"text": draw(texts(40))}, draw(images())]
    else:
        content = [{"text": draw(bodies())}]
    result: dict[str, Any] = {"toolUseId": use_id, "content": content}
    if kind == "error":
        result["status"] = "error"
    elif draw(st.booleans()):
        result["status"] = "success"
    return {"toolResult": result}


def _reasoning(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.integers(0, 4)) == 0:
        return {"reasoningContent": {"redactedContent": draw(st.binary(min_size=4, max_size=30))}}
    signature = base64.b64encode(draw(st.binary(min_size=8, max_size=30))).decode()
    return {
        "reasoningContent": {"reasoningText": {"text": draw(texts(60)), "signature": signature}}
    }


@st.composite
def bedrock_histories(draw: st.DrawFn, max_events: int = 8) -> list[dict[str, Any]]:
    """A Converse history: the task, then replies and tool steps, in strict alternation."""
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"text": draw(texts())}]}]
    points = 0
    number = 0
    for _ in range(draw(st.integers(0, max_events))):
        blocks: list[dict[str, Any]] = []
        if draw(st.booleans()):
            blocks.append(_reasoning(draw))
        if draw(st.sampled_from(["reply", "calls", "calls"])) == "reply":
            blocks.append({"text": draw(texts())})
            history.append({"role": "assistant", "content": blocks})
            user: list[dict[str, Any]] = [{"text": draw(texts())}]
            extra = draw(st.sampled_from(["none", "none", "image", "document", "guard"]))
            if extra == "image":
                user.append(draw(images()))
            elif extra == "document":
                source = {"text": draw(texts(80))}
                user.append({"document": {"format": "txt", "name": "notes", "source": source}})
            elif extra == "guard":
                user.append({"guardContent": {"text": {"text": draw(texts(30))}}})
            history.append({"role": "user", "content": user})
        else:
            if draw(st.booleans()):
                blocks.append({"text": draw(texts(40))})
            ids = []
            for _ in range(draw(st.integers(1, 3))):
                use_id = f"tooluse_{number}"
                number += 1
                ids.append(use_id)
                arguments = {"path": draw(texts(20)), "n": draw(st.integers(0, 99))}
                name = draw(st.sampled_from(TOOLS))
                blocks.append({"toolUse": {"toolUseId": use_id, "name": name, "input": arguments}})
            history.append({"role": "assistant", "content": blocks})
            results = draw(st.permutations([draw(_result(use_id)) for use_id in ids]))
            if draw(st.integers(0, 5)) == 0:
                results.append({"text": draw(texts(40))})
            history.append({"role": "user", "content": results})
        if points < 2 and draw(st.integers(0, 4)) == 0:
            history[-1]["content"].append({"cachePoint": {"type": "default"}})
            points += 1
    return history


def systems() -> st.SearchStrategy[Any]:
    """A ``system``: none, a string, or text blocks with a cache point."""
    blocks = texts().map(lambda text: [{"text": text}, {"cachePoint": {"type": "default"}}])
    return st.none() | texts() | blocks
