"""Independent oracles for the provider formats: request validators and token counters.

Written from the providers' documented rules and the pricing rules in ``docs/formats/``, without
importing the code under test. A validator returns the list of rules a request breaks (empty when
the provider would accept it); a counter prices a request the way the guides say.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

Encode = Callable[[str], Sequence[int]]
THINKING = ("thinking", "redacted_thinking")


# -- validators ---------------------------------------------------------------------------------


SUMMARY_OPENING = "[Summary of earlier turns"


def _no_content(content: object) -> bool:
    return content is None or content in ("", [])


def chat_problems(messages: list[dict[str, Any]]) -> list[str]:
    """Chat Completions: known roles; user messages have content; an assistant message names
    each call id once; tool messages answer, right after it, every call of the assistant message
    before them, each exactly once. A later exchange may use an id again (servers that number
    their calls from ``call_0`` in every turn do)."""
    problems: list[str] = []
    if not messages:
        problems.append("no messages")
    waiting: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            problems.append(f"{index}: role {role!r}")
        if role == "user" and _no_content(message.get("content")):
            problems.append(f"{index}: user message without content")
        if role == "tool":
            call = message.get("tool_call_id")
            if call not in waiting:
                problems.append(f"{index}: tool message for {call!r} answers no open call")
            waiting.discard(call)
            continue
        if waiting:
            problems.append(f"{index}: calls {sorted(waiting)} left unanswered")
            waiting = set()
        if role == "assistant":
            ids = [call["id"] for call in message.get("tool_calls") or []]
            if len(set(ids)) != len(ids):
                problems.append(f"{index}: one message names a call id twice")
            waiting = set(ids)
    if waiting:
        problems.append(f"end: calls {sorted(waiting)} left unanswered")
    return problems


RESPONSES_PAIRS = {
    "function_call_output": "function_call",
    "custom_tool_call_output": "custom_tool_call",
    "computer_call_output": "computer_call",
    "local_shell_call_output": "local_shell_call",
    "shell_call_output": "shell_call",
    "apply_patch_call_output": "apply_patch_call",
}
RESPONSES_SELF_CONTAINED = (
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
    "item_reference",
    "mcp_approval_request",
    "compaction",
    "additional_tools",
)
# The outputs whose schema keeps their body as the text field ``output``: the only items that
# may come back edited, and then in ``output`` alone.
RESPONSES_MASKABLE = (
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "apply_patch_call_output",
)


def _item_kind(item: dict[str, Any]) -> str:
    kind = item.get("type")
    if kind is None:
        return "message" if "role" in item else "item_reference"
    assert isinstance(kind, str)
    return kind


def _answers(item: dict[str, Any]) -> str:
    if "call_id" in item:
        return str(item["call_id"])
    return str(item["id"])  # local_shell_call_output names its call by id


def responses_problems(  # noqa: PLR0912 - one branch per documented rule
    items: list[dict[str, Any]], original: list[dict[str, Any]] | None = None
) -> list[str]:
    """Responses input: every output follows its call (same kind) once, every call is answered,
    call ids are used once, an approval response follows its request, user messages have
    content, a reasoning item is followed by an item; and given the original input: a reasoning
    item is followed by the same item it preceded there, compaction items all stay, an item of
    an unknown type stays byte for byte with every item sharing its call_id (or all go),
    additional_tools items all stay, and
    the only edited items are maskable outputs (in ``output``) and labelled summaries."""
    problems: list[str] = []
    if not items:
        problems.append("no items")
    calls: dict[str, str] = {}
    answered: set[str] = set()
    approvals: set[str] = set()
    for index, item in enumerate(items):
        kind = _item_kind(item)
        if kind in RESPONSES_PAIRS.values():
            if item["call_id"] in calls:
                problems.append(f"{index}: call id {item['call_id']} twice")
            calls[item["call_id"]] = kind
        elif kind in RESPONSES_PAIRS:
            call = _answers(item)
            if calls.get(call) != RESPONSES_PAIRS[kind] or call in answered:
                problems.append(f"{index}: output for {call!r} has no earlier call")
            answered.add(call)
        elif kind == "mcp_approval_request":
            approvals.add(item["id"])
        elif kind == "mcp_approval_response":
            if item["approval_request_id"] not in approvals:
                problems.append(f"{index}: approval response without its request")
            approvals.discard(item["approval_request_id"])
        elif kind == "reasoning":
            if index + 1 >= len(items) or _item_kind(items[index + 1]) in RESPONSES_PAIRS:
                problems.append(f"{index}: reasoning not followed by its item")
        elif kind == "message":
            if item.get("role") not in ("system", "developer", "user", "assistant"):
                problems.append(f"{index}: role {item.get('role')!r}")
            if item.get("role") == "user" and _no_content(item.get("content")):
                problems.append(f"{index}: user message without content")
        elif kind not in RESPONSES_SELF_CONTAINED and original is None:
            problems.append(f"{index}: unknown type {kind!r}")
    problems.extend(f"call {call!r} unanswered" for call in calls if call not in answered)
    if original is not None:
        problems.extend(_responses_against(items, original))
    return problems


def _responses_against(  # noqa: PLR0912 - one branch per rule
    items: list[dict[str, Any]], original: list[dict[str, Any]]
) -> list[str]:
    problems: list[str] = []
    # An item equal to an original one is that item sent again as a copy (the format sends a
    # message that carried context-clipper's keys as a copy without them): count it as kept.
    # Items keep their order: each is matched to the first original after the previous match
    # that is it (or equal to it), so of equal messages the right one is found.
    identical = {id(o) for o in original}
    matched: list[dict[str, Any]] = []
    start = 0
    for item in items:
        found = next(
            (
                position
                for position in range(start, len(original))
                if original[position] is item
                or (id(item) not in identical and original[position] == item)
            ),
            None,
        )
        if found is None:
            matched.append(item)
        else:
            matched.append(original[found])
            start = found + 1
    items = matched
    kept = {id(item) for item in items}
    follower = {
        id(item): original[i + 1] if i + 1 < len(original) else None
        for i, item in enumerate(original)
        if _item_kind(item) == "reasoning"
    }
    for index, item in enumerate(items):
        if id(item) in follower:
            after = items[index + 1] if index + 1 < len(items) else None
            if after is not follower[id(item)]:
                problems.append(f"{index}: reasoning separated from the item it preceded")
    known = {"message", "reasoning", *RESPONSES_PAIRS, *RESPONSES_PAIRS.values()}
    known |= {*RESPONSES_SELF_CONTAINED, "mcp_approval_response"}
    for position, item in enumerate(original):
        kind = _item_kind(item)
        if kind in ("compaction", "additional_tools") and id(item) not in kept:
            problems.append(f"original {position}: {kind} item removed")
        if kind not in known and isinstance(item.get("call_id"), str):
            sharing = [other for other in original if other.get("call_id") == item["call_id"]]
            present = {id(other) in kept for other in sharing}
            if len(present) > 1:
                problems.append(f"original {position}: call_id {item['call_id']} split")
    # An output names its call by call_id; local_shell_call_output by its id.
    by_call = {
        (_item_kind(item), item.get("call_id", item.get("id"))): item
        for item in original
        if _item_kind(item) in RESPONSES_MASKABLE
    }
    for index, item in enumerate(items):
        if id(item) in {id(o) for o in original}:
            continue
        kind = _item_kind(item)
        if kind == "message" and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str) and content.startswith(SUMMARY_OPENING):
                continue
        source = by_call.get((kind, item.get("call_id", item.get("id"))))
        if source is None:
            problems.append(f"{index}: an item was edited or invented")
            continue
        if {k: v for k, v in item.items() if k != "output"} != {
            k: v for k, v in source.items() if k != "output"
        }:
            problems.append(f"{index}: a masked output changed more than its output")
    return problems


def _blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    assert isinstance(content, list)
    return content


ANTHROPIC_USES = ("tool_use", "server_tool_use", "mcp_tool_use")
ANTHROPIC_FILLER = "(earlier turns were compacted)"  # the documented filler message's text
ANTHROPIC_IN_MESSAGE = {
    "web_search_tool_result": "server_tool_use",
    "web_fetch_tool_result": "server_tool_use",
    "code_execution_tool_result": "server_tool_use",
    "bash_code_execution_tool_result": "server_tool_use",
    "text_editor_code_execution_tool_result": "server_tool_use",
    "tool_search_tool_result": "server_tool_use",
    "mcp_tool_result": "mcp_tool_use",
}


def merged_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns the Messages API makes of ``messages``: each run of adjacent user (or
    assistant) messages is one turn, their blocks concatenated (a string is one text block); a
    ``system`` message is a turn of its own."""
    turns: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if index and role in ("user", "assistant") and messages[index - 1].get("role") == role:
            turns[-1]["content"] = _blocks(turns[-1]["content"]) + _blocks(message.get("content"))
        else:
            turns.append({"role": role, "content": message.get("content")})
    return turns


def anthropic_problems(  # noqa: PLR0912 - one branch per rule
    messages: list[dict[str, Any]], original: list[dict[str, Any]] | None = None
) -> list[str]:
    """Messages API, on the turns it merges the messages into (``merged_turns``): user first;
    each tool_use answered in the next turn and each tool_result answering the turn before,
    tool results first in their turn, thinking first in its turn; a ``system`` message only
    after a user (or system) message, holding text alone; no empty text, no trailing whitespace
    at the very end, every tool use id used once, and each server or MCP tool result in the
    assistant message of its use, after it."""
    problems: list[str] = []
    if not messages:
        return ["no messages"]
    if messages[0].get("role") != "user":
        problems.append("0: does not open with a user message")
    for index, message in enumerate(messages):
        for block in _blocks(message.get("content")):
            if block.get("type") == "text" and not block.get("text"):
                problems.append(f"messages[{index}]: empty text block")
        if isinstance(message.get("content"), str) and not message["content"]:
            problems.append(f"messages[{index}]: empty content")
        if message.get("role") == "system" and (
            not index or messages[index - 1].get("role") == "assistant"
        ):
            problems.append(f"messages[{index}]: a system message not after a user message")
    previous_uses: set[str] = set()
    every_use: set[str] = set()
    for index, message in enumerate(merged_turns(messages)):
        role = message.get("role")
        if role not in ("user", "assistant", "system"):
            problems.append(f"{index}: role {role!r}")
        content = message.get("content")
        blocks = _blocks(content)
        if role == "system":
            if previous_uses:
                problems.append(f"{index}: tool_use {sorted(previous_uses)} unanswered")
            if not blocks or any(block.get("type") != "text" for block in blocks):
                problems.append(f"{index}: a system message holds other than text")
            continue
        if not blocks:
            problems.append(f"{index}: no content blocks")
        kinds = [block.get("type") for block in blocks]
        uses = [b["id"] for b in blocks if b.get("type") in ANTHROPIC_USES]
        if len(set(uses)) != len(uses) or every_use & set(uses):
            problems.append(f"{index}: a tool use id used twice")
        every_use |= set(uses)
        for position, block in enumerate(blocks):
            opener = ANTHROPIC_IN_MESSAGE.get(block.get("type", ""))
            if opener is None:
                continue
            if role != "assistant" or not any(
                b.get("type") == opener and b.get("id") == block.get("tool_use_id")
                for b in blocks[:position]
            ):
                problems.append(f"{index}: {block['type']} apart from its {opener}")
        results = {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}
        if role == "user":
            if results != previous_uses:
                problems.append(
                    f"{index}: answers {sorted(results)}, expected {sorted(previous_uses)}"
                )
            first_other = next((i for i, k in enumerate(kinds) if k != "tool_result"), len(kinds))
            if "tool_result" in kinds[first_other:]:
                problems.append(f"{index}: a tool_result after other content")
            previous_uses = set()
        else:
            if previous_uses:
                problems.append(f"{index}: tool_use {sorted(previous_uses)} unanswered")
            first_other = next((i for i, k in enumerate(kinds) if k not in THINKING), len(kinds))
            if any(kind in THINKING for kind in kinds[first_other:]):
                problems.append(f"{index}: thinking block after other content")
            if "compaction" in kinds[first_other + 1 :]:  # only thinking may come before it
                problems.append(f"{index}: compaction block after other content")
            previous_uses = {b["id"] for b in blocks if b.get("type") == "tool_use"}
    if previous_uses:
        problems.append(f"end: tool_use {sorted(previous_uses)} unanswered")
    if original is not None:
        problems.extend(_anthropic_against(messages, original))
    last = messages[-1]
    if last.get("role") == "assistant":
        tail = _blocks(last.get("content"))[-1]
        if tail.get("type") == "text" and tail["text"] != tail["text"].rstrip():
            problems.append("end: final assistant text ends with whitespace")
    return problems


def _anthropic_against(messages: list[dict[str, Any]], original: list[dict[str, Any]]) -> list[str]:
    """Given the original conversation: every block that comes back is the caller's own block
    object, except text blocks (a merged string, a summary, a filler) and masked tool results;
    and every block of a message holding a compaction block comes back."""
    problems: list[str] = []
    blocks = {
        id(block): block
        for message in original
        if isinstance(message["content"], list)
        for block in message["content"]
    }
    returned: set[int] = set()
    for index, message in enumerate(messages):
        if not isinstance(message["content"], list):
            continue
        for block in message["content"]:
            returned.add(id(block))
            if id(block) not in blocks and block.get("type") not in ("text", "tool_result"):
                problems.append(f"{index}: a {block.get('type')} block was edited or invented")
    for position, message in enumerate(original):
        content = message["content"]
        compacting = isinstance(content, list) and any(
            b.get("type") == "compaction" for b in content
        )
        if compacting and any(id(b) not in returned for b in content) and message not in messages:
            problems.append(f"original {position}: a compaction message was removed")
    return problems


def anthropic_cache_problems(
    messages: list[dict[str, Any]], system: str | list[dict[str, Any]] | None = None
) -> list[str]:
    """Messages API prompt caching: at most four ``cache_control`` breakpoints in a request,
    the blocks of ``system`` included."""
    blocks = [] if system is None or isinstance(system, str) else list(system)
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            blocks.extend(content)
    markers = sum(1 for block in blocks if isinstance(block, dict) and "cache_control" in block)
    return [f"{markers} cache_control breakpoints, more than four"] if markers > 4 else []


# -- counters -----------------------------------------------------------------------------------


def png(width: int, height: int) -> str:
    """The base64 of a PNG signature and IHDR chunk of the given size (enough to read it)."""
    header = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    header += width.to_bytes(4, "big") + height.to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
    return base64.b64encode(header).decode("ascii")


def openai_image(url: str, detail: str | None) -> int:
    """OpenAI's documented image rule, restated: 85 at low detail, else 85 + 170 per tile."""
    if detail == "low":
        return 85
    if not url.startswith("data:image/png;base64,"):
        return 1445
    raw = base64.b64decode(url.split(",", 1)[1][:44])
    width = Fraction(int.from_bytes(raw[16:20], "big"))
    height = Fraction(int.from_bytes(raw[20:24], "big"))
    if max(width, height) > 2048:
        ratio = 2048 / max(width, height)
        width, height = width * ratio, height * ratio
    if min(width, height) > 768:
        ratio = 768 / min(width, height)
        width, height = width * ratio, height * ratio
    return 85 + 170 * math.ceil(width / 512) * math.ceil(height / 512)


def chat_tokens(
    messages: list[dict[str, Any]], encode: Encode, framing: int, system: str | None = None
) -> int:
    """Chat Completions pricing: framing per message and per call, every text, role, name (and
    1 more for it), refusal, call name and arguments by the tokenizer, media by the documented
    constants. A tool message's role is priced with the call it answers. The reply's priming is
    the request's, not the messages': ``CHAT_REPLY_PRIMING`` more."""

    def count(text: str) -> int:
        return len(encode(text))

    def content(value: object) -> int:
        if value is None:
            return 0
        if isinstance(value, str):
            return count(value)
        total = 0
        for part in value:  # type: ignore[attr-defined]
            kind = part["type"]
            if kind in ("text", "refusal"):
                total += count(part[kind])
            elif kind == "image_url":
                total += openai_image(part["image_url"]["url"], part["image_url"].get("detail"))
            elif kind == "input_audio":
                total += 1000
            elif kind == "file":
                total += 3000
            else:
                total += count(json.dumps(part, ensure_ascii=False, separators=(",", ":")))
        return total

    total = framing + count("system") + count(system) if system is not None else 0
    for message in messages:
        total += framing + content(message.get("content"))
        if message["role"] == "tool":
            continue
        total += count(message["role"])
        if message.get("name") is not None:
            total += count(message["name"]) + 1
        if message.get("refusal") is not None:
            total += count(message["refusal"])
        for call in message.get("tool_calls") or []:
            body = call.get("function") or call.get("custom")
            total += framing + count(body["name"]) + count(body.get("arguments", body.get("input")))
            total += count("tool")
    return total


CHAT_REPLY_PRIMING = 3
"""What every Chat Completions request adds for the reply (``<|start|>assistant<|message|>``)."""


def responses_tokens(
    items: list[dict[str, Any]], encode: Encode, framing: int, system: str | None = None
) -> int:
    """Responses pricing: framing per item; texts, call names and arguments, reasoning summaries,
    text outputs and compaction contents by the tokenizer; screenshots and generated images as
    images; media by the documented constants; any other item by its compact JSON."""

    def count(text: str) -> int:
        return len(encode(text))

    def parts(value: object) -> int:
        if value is None:
            return 0
        if isinstance(value, str):
            return count(value)
        total = 0
        for part in value:  # type: ignore[attr-defined]
            kind = part["type"]
            if kind in ("input_text", "output_text"):
                total += count(part["text"])
            elif kind == "refusal":
                total += count(part["refusal"])
            elif kind == "input_image":
                total += openai_image(part.get("image_url") or "", part.get("detail"))
            elif kind == "input_file":
                total += 3000
            else:
                raise AssertionError(kind)
        return total

    def item_cost(item: dict[str, Any]) -> int:  # noqa: PLR0911 - one return per item family
        kind = _item_kind(item)
        if kind == "message":
            return parts(item.get("content"))
        if kind in ("function_call", "custom_tool_call"):
            return count(item["name"]) + count(item.get("arguments", item.get("input", "")))
        if kind == "reasoning":
            total = sum(count(s["text"]) for s in item.get("summary", []))
            return total + sum(count(s["text"]) for s in item.get("content") or [])
        if kind in ("function_call_output", "custom_tool_call_output"):
            return parts(item.get("output"))
        if kind in ("local_shell_call_output", "apply_patch_call_output"):
            return count(item["output"]) if item.get("output") is not None else 0
        if kind == "computer_call_output":
            return openai_image(item["output"].get("image_url") or "", None)
        if kind == "compaction":
            return count(item["encrypted_content"])
        if kind == "image_generation_call":
            result = item.get("result")
            return 0 if result is None else openai_image(f"data:image/png;base64,{result}", None)
        return count(json.dumps(item, ensure_ascii=False, separators=(",", ":")))

    total = framing + count(system) if system is not None else 0
    for item in items:
        total += framing + item_cost(item)
    return total


def anthropic_image(source: dict[str, Any]) -> int:
    """Anthropic's documented rule, restated: width * height / 750 after fitting the long edge
    in 1568 px and the area in 1092 x 1092 px; 1600 when the size is unknown."""
    if source.get("type") != "base64" or source.get("media_type") != "image/png":
        return 1600
    raw = base64.b64decode(source["data"][:44])
    width = Fraction(int.from_bytes(raw[16:20], "big"))
    height = Fraction(int.from_bytes(raw[20:24], "big"))
    if max(width, height) > 1568:
        ratio = 1568 / max(width, height)
        width, height = width * ratio, height * ratio
    return math.ceil(min(width * height, Fraction(1092 * 1092)) / 750)


def anthropic_tokens(
    messages: list[dict[str, Any]],
    encode: Encode,
    framing: int,
    system: str | list[dict[str, Any]] | None = None,
) -> int:
    """Messages API pricing as the format counts a request: framing per message (the API frames
    a run of one role's messages once; the rest is reserved, in case a cut parts them) and per
    tool use (client, server or MCP);
    texts, thinking, tool names, compact JSON inputs, search results and compaction summaries by
    the tokenizer; images by size; text documents by their texts, others by the constant; any
    other block by its compact JSON. The filler reserves are counted (framing and the filler's
    text): one for the request (on ``system``, given or not), one per assistant message with
    thinking, redacted thinking or compaction and one per ``system`` message; a filler message
    itself costs nothing."""

    def count(text: str) -> int:
        return len(encode(text))

    def block(value: dict[str, Any]) -> int:  # noqa: PLR0911 - one return per block type
        kind = value["type"]
        if kind == "text":
            return count(value["text"])
        if kind == "thinking":
            return count(value["thinking"])
        if kind == "redacted_thinking":
            return count(value["data"])
        if kind in ANTHROPIC_USES:
            arguments = json.dumps(value["input"], ensure_ascii=False, separators=(",", ":"))
            return framing + count(value["name"]) + count(arguments)
        if kind == "tool_result":
            inner = value.get("content")
            return 0 if inner is None else sum(block(b) for b in _blocks(inner))
        if kind == "image":
            return anthropic_image(value["source"])
        if kind == "document":
            source = value["source"]
            extra = sum(count(value[key]) for key in ("title", "context") if key in value)
            if source.get("type") == "text":
                return extra + count(source["data"])
            if source.get("type") == "content":
                return extra + sum(block(b) for b in _blocks(source["content"]))
            return extra + 3000
        if kind == "search_result":
            inner = sum(block(b) for b in value["content"])
            return count(value["title"]) + count(value["source"]) + inner
        if kind == "compaction":
            return 0 if value.get("content") is None else count(value["content"])
        return count(json.dumps(value, ensure_ascii=False, separators=(",", ":")))

    reserve = framing + count(ANTHROPIC_FILLER)
    total = reserve
    if system is not None:
        texts = [system] if isinstance(system, str) else [b["text"] for b in system]
        total += framing + sum(count(text) for text in texts)
    for message in messages:
        if message["role"] == "user" and message["content"] == ANTHROPIC_FILLER:
            continue
        blocks = _blocks(message["content"])
        total += framing + sum(block(b) for b in blocks)
        if message["role"] == "assistant" and any(
            b["type"] in ("thinking", "redacted_thinking", "compaction") for b in blocks
        ):
            total += reserve
        if message["role"] == "system":  # a filler may have to go before it
            total += reserve
    return total
