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
    """A Chat Completions conversation; in some, every exchange numbers its calls from
    ``call_0`` (as some OpenAI-compatible servers do)."""
    messages: list[dict[str, Any]] = []
    reuse = draw(st.booleans())
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
            ids = [f"call_{k if reuse else call + k}" for k in range(count)]
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
def responses_conversations(  # noqa: PLR0912 - one branch per kind of item
    draw: st.DrawFn, max_events: int = 8
) -> list[dict[str, Any]]:
    """A Responses API input list."""
    items: list[dict[str, Any]] = []
    if draw(st.booleans()):
        items.append({"role": "developer", "content": draw(texts())})
    call = 0
    for _ in range(draw(st.integers(0, max_events))):
        event = draw(
            st.sampled_from(["user", "assistant", "tools", "tools", "reasoned", "hosted", "hosted"])
        )
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
        elif event == "hosted":
            if draw(st.booleans()):
                items.append(reasoning)
            items.extend(draw(hosted_items(f"h{call}")))
            call += 1
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


SCREENSHOT = "data:image/png;base64," + png(1280, 800)


@st.composite
def hosted_items(draw: st.DrawFn, key: str) -> list[dict[str, Any]]:  # noqa: PLR0911 - one per family
    """One unit of hosted-tool items, as the Responses API returns them: a call and its output
    (custom tool, computer, local shell, shell, apply patch), an MCP approval request with (or
    without) its response, a self-contained hosted call, a compaction item, or items of a type
    cutctx does not know (alone, or two sharing a ``call_id``)."""
    kind = draw(
        st.sampled_from(
            [
                "custom",
                "computer",
                "local_shell",
                "shell",
                "apply_patch",
                "approval",
                "self_contained",
                "self_contained",
                "self_contained",
                "compaction",
                "unknown",
            ]
        )
    )
    call_id = f"call_{key}"
    if kind == "custom":
        body = draw(bodies())
        return [
            {"type": "custom_tool_call", "call_id": call_id, "name": "sh", "input": draw(texts())},
            {
                "type": "custom_tool_call_output",
                "call_id": call_id,
                "output": body if draw(st.booleans()) else [{"type": "input_text", "text": body}],
            },
        ]
    if kind == "computer":
        return [
            {
                "type": "computer_call",
                "id": f"cu_{key}",
                "call_id": call_id,
                "action": {"type": "click", "button": "left", "x": 10, "y": 20},
                "pending_safety_checks": [],
                "status": "completed",
            },
            {
                "type": "computer_call_output",
                "call_id": call_id,
                "output": {"type": "computer_screenshot", "image_url": SCREENSHOT},
            },
        ]
    if kind == "local_shell":
        output: dict[str, Any] = {"type": "local_shell_call_output", "output": draw(bodies())}
        output["call_id" if draw(st.booleans()) else "id"] = call_id
        return [
            {
                "type": "local_shell_call",
                "id": f"ls_{key}",
                "call_id": call_id,
                "action": {"type": "exec", "command": ["ls", draw(texts(20))], "env": {}},
                "status": "completed",
            },
            output,
        ]
    if kind == "shell":
        return [
            {
                "type": "shell_call",
                "call_id": call_id,
                "action": {"commands": [draw(texts(30))]},
                "status": "completed",
            },
            {
                "type": "shell_call_output",
                "call_id": call_id,
                "output": [
                    {
                        "stdout": draw(bodies()),
                        "stderr": "",
                        "outcome": {"type": "exit", "exit_code": 0},
                    }
                ],
            },
        ]
    if kind == "apply_patch":
        return [
            {
                "type": "apply_patch_call",
                "call_id": call_id,
                "operation": {"type": "update_file", "path": "a.py", "diff": draw(texts())},
                "status": "completed",
            },
            {
                "type": "apply_patch_call_output",
                "call_id": call_id,
                "status": "completed",
                "output": draw(st.none() | bodies()),
            },
        ]
    if kind == "approval":
        request = {
            "type": "mcp_approval_request",
            "id": f"mcpr_{key}",
            "server_label": "deepwiki",
            "name": "ask",
            "arguments": draw(texts(40)),
        }
        if draw(st.booleans()):
            return [request]
        response = {
            "type": "mcp_approval_response",
            "approval_request_id": f"mcpr_{key}",
            "approve": draw(st.booleans()),
        }
        return [request, response]
    if kind == "self_contained":
        return [draw(_self_contained(key))]
    if kind == "compaction":
        return [{"type": "compaction", "id": f"cmp_{key}", "encrypted_content": draw(texts(80))}]
    unknown = {"type": "x_future_call", "call_id": call_id, "payload": {"q": draw(texts(30))}}
    if draw(st.booleans()):
        return [unknown]
    return [unknown, {"type": "x_future_call_output", "call_id": call_id, "data": draw(bodies())}]


@st.composite
def _self_contained(draw: st.DrawFn, key: str) -> dict[str, Any]:  # noqa: PLR0911 - one per type
    kind = draw(
        st.sampled_from(
            [
                "web_search_call",
                "file_search_call",
                "code_interpreter_call",
                "image_generation_call",
                "mcp_call",
                "mcp_list_tools",
                "item_reference",
                "x_future_item",
            ]
        )
    )
    if kind == "web_search_call":
        action = {"type": "search", "query": draw(texts(30))}
        return {"type": kind, "id": f"ws_{key}", "status": "completed", "action": action}
    if kind == "file_search_call":
        results = [{"file_id": "file-1", "filename": "a.md", "score": 0.5, "text": draw(bodies())}]
        return {
            "type": kind,
            "id": f"fs_{key}",
            "queries": [draw(texts(20))],
            "status": "completed",
            "results": results,
        }
    if kind == "code_interpreter_call":
        return {
            "type": kind,
            "id": f"ci_{key}",
            "code": draw(texts()),
            "container_id": "cntr_1",
            "outputs": [{"type": "logs", "logs": draw(bodies())}],
            "status": "completed",
        }
    if kind == "image_generation_call":
        size = draw(st.tuples(st.integers(1, 3000), st.integers(1, 3000)))
        return {"type": kind, "id": f"ig_{key}", "status": "completed", "result": png(*size)}
    if kind == "mcp_call":
        return {
            "type": kind,
            "id": f"mcp_{key}",
            "server_label": "deepwiki",
            "name": "ask",
            "arguments": draw(texts(40)),
            "output": draw(st.none() | bodies()),
        }
    if kind == "mcp_list_tools":
        tools = [{"name": "ask", "input_schema": {"type": "object"}}]
        return {"type": kind, "id": f"mcpl_{key}", "server_label": "deepwiki", "tools": tools}
    if kind == "item_reference":
        if draw(st.booleans()):
            return {"id": f"msg_ref_{key}"}
        return {"type": "item_reference", "id": f"msg_ref_{key}"}
    return {"type": kind, "id": f"x_{key}", "blob": draw(texts())}


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
        thinking: list[dict[str, Any]] = draw(
            st.sampled_from(
                [
                    [],
                    [],
                    [{"type": "thinking", "thinking": draw(texts(60)), "signature": "c2ln"}],
                    [{"type": "redacted_thinking", "data": draw(texts(60))}],
                ]
            )
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
            server = draw(anthropic_server_blocks(f"{use}")) if draw(st.booleans()) else []
            use += 1
            if bool(thinking) or bool(server) or draw(st.booleans()):
                content: Any = [
                    *thinking,
                    *server,
                    _maybe_cached(draw, {"type": "text", "text": draw(texts())}),
                ]
            else:
                content = draw(texts())
            messages.append({"role": "assistant", "content": content})
            user: Any = draw(texts())
            if draw(st.integers(0, 2)) == 0:
                user = [*draw(anthropic_user_blocks()), {"type": "text", "text": user}]
            messages.append({"role": "user", "content": user})
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


SERVER_RESULTS = (
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
)


@st.composite
def anthropic_server_blocks(draw: st.DrawFn, key: str) -> list[dict[str, Any]]:
    """Blocks of one assistant message the API runs itself: a server tool use and its result,
    an MCP tool use and its result, the provider's compaction summary, or an unknown block."""
    kind = draw(st.sampled_from(["server", "server", "mcp", "compaction", "unknown"]))
    if kind == "server":
        result = draw(st.sampled_from(SERVER_RESULTS))
        use = {
            "type": "server_tool_use",
            "id": f"srvtoolu_{key}",
            "name": result.removesuffix("_tool_result"),
            "input": {"query": draw(texts(30))},
        }
        if result == "web_search_tool_result":
            body: Any = [
                {
                    "type": "web_search_result",
                    "url": "https://example.com/",
                    "title": draw(texts(20)),
                    "encrypted_content": draw(bodies()),
                    "page_age": None,
                }
            ]
        else:
            body = {
                "type": f"{result.removesuffix('_tool_result')}_result",
                "stdout": draw(bodies()),
            }
        return [use, {"type": result, "tool_use_id": f"srvtoolu_{key}", "content": body}]
    if kind == "mcp":
        return [
            {
                "type": "mcp_tool_use",
                "id": f"mcptoolu_{key}",
                "name": "ask",
                "server_name": "wiki",
                "input": {"q": draw(texts(30))},
            },
            {
                "type": "mcp_tool_result",
                "tool_use_id": f"mcptoolu_{key}",
                "is_error": False,
                "content": [{"type": "text", "text": draw(bodies())}],
            },
        ]
    if kind == "compaction":
        return [{"type": "compaction", "content": draw(st.none() | texts())}]
    return [{"type": "x_future_block", "data": {"v": draw(texts(30))}}]


@st.composite
def anthropic_user_blocks(draw: st.DrawFn) -> list[dict[str, Any]]:
    """User-side blocks: a search result, a document with citations, a container upload."""
    kind = draw(st.sampled_from(["search_result", "document", "container_upload"]))
    if kind == "search_result":
        return [
            {
                "type": "search_result",
                "source": "https://example.com/kb",
                "title": draw(texts(20)),
                "content": [{"type": "text", "text": draw(bodies())}],
                "citations": {"enabled": True},
            }
        ]
    if kind == "document":
        source: dict[str, Any] = draw(
            st.sampled_from(
                [
                    {"type": "text", "media_type": "text/plain", "data": "a plain text."},
                    {"type": "content", "content": [{"type": "text", "text": "chunk one."}]},
                    {"type": "url", "url": "https://example.com/a.pdf"},
                ]
            )
        )
        document: dict[str, Any] = {"type": "document", "source": source}
        document["citations"] = {"enabled": True}
        if draw(st.booleans()):
            document["title"] = draw(texts(20))
            document["context"] = draw(texts(40))
        return [document]
    return [{"type": "container_upload", "file_id": "file_011"}]


@st.composite
def anthropic_runs(draw: st.DrawFn, max_events: int = 8) -> list[dict[str, Any]]:
    """A Messages API conversation as clients send it when they do not merge: some messages
    split into runs of one role (a user text then more text, results then the text beside them,
    an assistant's words then its tool uses), and ``role: "system"`` messages after user
    messages. The API merges each run into one turn."""
    messages = draw(anthropic_conversations(max_events))
    out: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        content = message["content"]
        split = draw(st.integers(0, 2)) == 0
        if split and message["role"] == "user" and isinstance(content, str):
            out.append({"role": "user", "content": content})
            out.append({"role": "user", "content": [{"type": "text", "text": draw(texts(30))}]})
        elif split and message["role"] == "user" and isinstance(content, list):
            results = [b for b in content if b.get("type") == "tool_result"]
            rest = [b for b in content if b.get("type") != "tool_result"]
            if results and rest:
                out.append({"role": "user", "content": results})
                out.append({"role": "user", "content": rest})
            elif len(results) > 1:  # the last result in a message of its own
                out.append({"role": "user", "content": results[:-1]})
                out.append({"role": "user", "content": results[-1:]})
            else:
                out.append(message)
        elif split and message["role"] == "assistant" and isinstance(content, list):
            uses = [b for b in content if b.get("type") == "tool_use"]
            head = [b for b in content if b.get("type") != "tool_use"]
            if uses and head:
                out.append({"role": "assistant", "content": head})
                out.append({"role": "assistant", "content": uses})
            else:
                out.append(message)
        else:
            out.append(message)
        following = messages[position + 1] if position + 1 < len(messages) else None
        if message["role"] == "user" and following is not None and draw(st.integers(0, 3)) == 0:
            note: Any = draw(texts(40))
            if draw(st.booleans()):
                note = [{"type": "text", "text": note}]
            out.append({"role": "system", "content": note})
    return out
