"""Hypothesis strategies for provider conversations that the providers would accept.

Each strategy draws a valid request of its format: agent runs with parallel tool calls and their
results (in shuffled order where the format allows it), system and developer messages in the
middle, multi-part content with images, names, refusals, unknown keys, thinking blocks, reasoning
items and cache markers. Texts end in a non-space character, as Anthropic demands of a final
assistant message.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.format_validators import png

ALPHABET = 'abcdefgh xyz\n\u00e9\u4e2d{}":,'


@st.composite
def texts(draw: st.DrawFn, max_size: int = 120) -> str:
    """A non-empty text that does not end in whitespace."""
    body = draw(st.text(alphabet=ALPHABET, max_size=max_size))
    return body + draw(st.sampled_from("abz.!\u00e9"))


def bodies() -> st.SearchStrategy[str]:
    """A tool result body: mostly short, sometimes long enough that masking it pays."""
    long = st.text(alphabet=ALPHABET, min_size=300, max_size=1500).map(lambda text: text + ".")
    return texts(60) | long


def _image_part(draw: st.DrawFn) -> dict[str, Any]:
    detail = draw(st.sampled_from(["low", "high", "auto", None]))
    if draw(st.booleans()):
        size = draw(st.tuples(st.integers(1, 5000), st.integers(1, 5000)))
        url = "data:image/png;base64," + png(*size)
    else:
        url = "https://example.com/cat.jpg"
    image: dict[str, Any] = {"url": url}
    if detail is not None:
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


@st.composite
def chat_conversations(  # noqa: PLR0912 - one branch per kind of message
    draw: st.DrawFn, max_events: int = 8
) -> list[dict[str, Any]]:
    """A Chat Completions conversation."""
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append(
            {"role": draw(st.sampled_from(["system", "developer"])), "content": draw(texts())}
        )
    call = 0
    for _ in range(draw(st.integers(0, max_events))):
        event = draw(st.sampled_from(["user", "user", "assistant", "tools", "tools", "system"]))
        if event == "user":
            if draw(st.booleans()):
                content: Any = draw(texts())
            else:
                content = [{"type": "text", "text": draw(texts())}]
                if draw(st.booleans()):
                    content.append(_image_part(draw))
            message: dict[str, Any] = {"role": "user", "content": content}
            if draw(st.booleans()):
                message["name"] = "alice"
            messages.append(message)
        elif event == "assistant":
            message = {"role": "assistant", "content": draw(texts())}
            if draw(st.integers(0, 5)) == 0:
                message["refusal"] = draw(texts(20))
            if draw(st.integers(0, 5)) == 0:
                message["x_vendor"] = {"kept": True}
            messages.append(message)
        elif event == "system":
            messages.append({"role": "developer", "content": draw(texts(40))})
        else:
            count = draw(st.integers(1, 3))
            ids = [f"call_{call + k}" for k in range(count)]
            call += count
            messages.append(
                {
                    "role": "assistant",
                    "content": draw(st.none() | texts(30)),
                    "tool_calls": [
                        {
                            "id": i,
                            "type": "function",
                            "function": {"name": "lookup", "arguments": draw(texts(40))},
                        }
                        for i in ids
                    ],
                }
            )
            for i in draw(st.permutations(ids)):
                body = draw(bodies())
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": i,
                        "content": body
                        if draw(st.booleans())
                        else [{"type": "text", "text": body}],
                    }
                )
    return messages


@st.composite
def responses_conversations(draw: st.DrawFn, max_events: int = 8) -> list[dict[str, Any]]:
    """A Responses API input list."""
    items: list[dict[str, Any]] = []
    if draw(st.booleans()):
        items.append({"role": "developer", "content": draw(texts())})
    call = 0
    for _ in range(draw(st.integers(0, max_events))):
        event = draw(st.sampled_from(["user", "assistant", "tools", "tools", "reasoned"]))
        reasoning = {
            "type": "reasoning",
            "id": f"rs_{len(items)}",
            "summary": [{"type": "summary_text", "text": draw(texts(40))}],
            "encrypted_content": "gAAAA" * 10,
        }
        if event == "user":
            if draw(st.booleans()):
                items.append({"role": "user", "content": draw(texts())})
            else:
                content: list[dict[str, Any]] = [{"type": "input_text", "text": draw(texts())}]
                if draw(st.booleans()):
                    content.append(
                        {
                            "type": "input_image",
                            "detail": "low",
                            "image_url": "https://example.com/a.png",
                        }
                    )
                items.append({"type": "message", "role": "user", "content": content})
        elif event == "assistant":
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "id": f"msg_{len(items)}",
                    "content": [{"type": "output_text", "text": draw(texts())}],
                }
            )
        elif event == "reasoned":
            items.append(reasoning)
            items.append({"role": "assistant", "content": draw(texts())})
        else:
            count = draw(st.integers(1, 3))
            ids = [f"call_{call + k}" for k in range(count)]
            call += count
            if draw(st.booleans()):
                items.append(reasoning)
            for i in ids:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": i,
                        "name": "lookup",
                        "arguments": draw(texts(40)),
                        "id": f"fc_{i}",
                    }
                )
            for i in draw(st.permutations(ids)):
                body = draw(bodies())
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": i,
                        "output": body
                        if draw(st.booleans())
                        else [{"type": "input_text", "text": body}],
                    }
                )
    return items


def _maybe_cached(draw: st.DrawFn, block: dict[str, Any]) -> dict[str, Any]:
    if draw(st.integers(0, 6)) == 0:
        block["cache_control"] = {"type": "ephemeral"}
    return block


@st.composite
def anthropic_conversations(draw: st.DrawFn, max_events: int = 8) -> list[dict[str, Any]]:
    """A Messages API conversation: user first, strict alternation, tool_use answered next."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": draw(texts())}]
    use = 0
    for _ in range(draw(st.integers(0, max_events))):
        thinking: list[dict[str, Any]] = (
            [{"type": "thinking", "thinking": draw(texts(60)), "signature": "c2ln"}]
            if draw(st.booleans())
            else []
        )
        if draw(st.booleans()):
            count = draw(st.integers(1, 3))
            ids = [f"toolu_{use + k}" for k in range(count)]
            use += count
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        *thinking,
                        *(
                            [{"type": "text", "text": draw(texts(40))}]
                            if draw(st.booleans())
                            else []
                        ),
                        *(
                            {
                                "type": "tool_use",
                                "id": i,
                                "name": "lookup",
                                "input": {"q": draw(texts(30))},
                            }
                            for i in ids
                        ),
                    ],
                }
            )
            results: list[dict[str, Any]] = []
            for i in ids:
                body = draw(bodies())
                result: dict[str, Any] = {"type": "tool_result", "tool_use_id": i}
                shape = draw(st.integers(0, 3))
                if shape == 0:
                    result["content"] = body
                elif shape == 1:
                    result["content"] = [{"type": "text", "text": body}]
                elif shape == 2:
                    result["content"] = [
                        {"type": "text", "text": body},
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": png(draw(st.integers(1, 3000)), draw(st.integers(1, 3000))),
                            },
                        },
                    ]
                    result["is_error"] = False
                results.append(_maybe_cached(draw, result))
            if draw(st.integers(0, 3)) == 0:
                results.append({"type": "text", "text": draw(texts(30))})
            messages.append({"role": "user", "content": results})
        else:
            if bool(thinking) or draw(st.booleans()):
                content: Any = [
                    *thinking,
                    _maybe_cached(draw, {"type": "text", "text": draw(texts())}),
                ]
            else:
                content = draw(texts())
            messages.append({"role": "assistant", "content": content})
            messages.append({"role": "user", "content": draw(texts())})
    if draw(st.booleans()) and messages[-1]["role"] == "user":
        messages.append({"role": "assistant", "content": draw(texts())})
    return messages


@st.composite
def anthropic_systems(draw: st.DrawFn) -> str | list[dict[str, Any]] | None:
    """A top-level system prompt: absent, a string, or cached text blocks."""
    choice = draw(st.integers(0, 2))
    if choice == 0:
        return None
    if choice == 1:
        return draw(texts())
    return [{"type": "text", "text": draw(texts()), "cache_control": {"type": "ephemeral"}}]
