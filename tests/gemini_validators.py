"""Independent oracles for the Gemini format: a request validator and a token counter.

Written from Gemini's documented request rules (contents of roles ``user`` and ``model``;
function calls answered by the next content, one ``function_response`` per call with the same
name and id; thought signatures sent back unchanged) and from ``docs/formats/gemini.md``'s
pricing rules, without importing the code under test. Contents are the snake_case dicts the
strategies draw (or that ``model_dump(mode="json")`` gives).
"""

from __future__ import annotations

import base64
import json
import math
from collections import Counter
from typing import Any

from tests.format_validators import SUMMARY_OPENING, Encode

FILLER = "(earlier turns were compacted)"


def _calls(content: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [
        (part["function_call"]["name"], part["function_call"].get("id"))
        for part in content["parts"]
        if "function_call" in part
    ]


def _responses(content: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [
        (part["function_response"]["name"], part["function_response"].get("id"))
        for part in content["parts"]
        if "function_response" in part
    ]


def _is_summary(content: dict[str, Any]) -> bool:
    parts = content["parts"]
    return (
        content["role"] == "user"
        and bool(parts)
        and str(parts[0].get("text", "")).startswith(SUMMARY_OPENING)
    )


def gemini_problems(
    contents: list[dict[str, Any]], original: list[dict[str, Any]] | None = None
) -> list[str]:
    """Roles user/model; parts a non-empty list; a user content first; every model content's
    calls answered by the very next content, one response per call (same names, same ids);
    responses only there; and given the original history: no new same-role neighbours, a
    summary never next to a content holding responses, every signed part sent in a content
    equal to its original, every masked response keeping its name and id."""
    problems: list[str] = []
    if not contents:
        return ["no contents"]
    if contents[0].get("role") != "user":
        problems.append("0: the request does not open with a user content")
    waiting: list[tuple[str, str | None]] = []
    for index, content in enumerate(contents):
        role = content.get("role")
        if role not in ("user", "model"):
            problems.append(f"{index}: role {role!r}")
        parts = content.get("parts")
        if not isinstance(parts, list) or not parts:
            problems.append(f"{index}: parts not a non-empty list")
            continue
        responses = _responses(content)
        if waiting:
            if role != "user" or Counter(responses) != Counter(waiting):
                problems.append(f"{index}: calls {waiting} not answered here ({responses})")
        elif responses:
            problems.append(f"{index}: responses {responses} answer no call")
        if role == "model" and responses:
            problems.append(f"{index}: responses in a model content")
        calls = _calls(content)
        if role == "user" and calls:
            problems.append(f"{index}: calls in a user content")
        waiting = calls
    if waiting:
        problems.append(f"end: calls {waiting} left unanswered")
    if original is not None:
        problems.extend(_against(contents, original))
    return problems


def _source(content: dict[str, Any], original: list[dict[str, Any]], start: int) -> int | None:
    """The index of the original ``content`` is (or is a masked copy of), from ``start`` on."""
    for index in range(start, len(original)):
        if original[index] is content:
            return index
    for index in range(start, len(original)):
        old = original[index]
        if old["role"] != content["role"] or len(old["parts"]) != len(content["parts"]):
            continue
        if all(
            new is was
            or (
                "function_response" in new
                and "function_response" in was
                and new["function_response"]["name"] == was["function_response"]["name"]
                and new["function_response"].get("id") == was["function_response"].get("id")
            )
            for new, was in zip(content["parts"], old["parts"], strict=True)
        ):
            return index
    return None


def _against(  # noqa: PLR0912 - one branch per rule
    contents: list[dict[str, Any]], original: list[dict[str, Any]]
) -> list[str]:
    problems: list[str] = []
    sources: list[int | None] = []
    start = 0
    for content in contents:
        found = _source(content, original, start)
        sources.append(found)
        if found is not None:
            start = found + 1
    signed_originals = [
        content
        for content in original
        if any("thought_signature" in part or part.get("thought") for part in content["parts"])
    ]
    for index, content in enumerate(contents):
        for part in content["parts"]:
            if ("thought_signature" in part or part.get("thought")) and not any(
                content == old for old in signed_originals
            ):
                problems.append(f"{index}: a signed or thought part outside its unchanged content")
                break
        if "function_response" in str(content) and sources[index] is None:
            problems.append(f"{index}: a content holding responses matches no original")
        if index == 0:
            continue
        before = contents[index - 1]
        if before["role"] == content["role"]:
            was, now = sources[index - 1], sources[index]
            if was is None or now is None or now != was + 1:
                problems.append(f"{index}: a new pair of {content['role']} neighbours")
        if (_is_summary(content) and _responses(before)) or (
            _is_summary(before) and _responses(content)
        ):
            problems.append(f"{index}: a summary next to a content holding responses")
    for index, content in enumerate(contents):
        for part in content["parts"]:
            response = part.get("function_response")
            if response is not None and response not in _all_responses(original):
                body = response.get("response")
                allowed = [{"output"}]  # the field a stub may take: "output", or the one string
                for old in _all_responses(original):  # field of a response it may stand for
                    old_body: dict[str, Any] = old.get("response") or {}
                    same = old["name"] == response["name"] and old.get("id") == response.get("id")
                    if (
                        same
                        and len(old_body) == 1
                        and isinstance(next(iter(old_body.values())), str)
                    ):
                        allowed.append(set(old_body))
                if set(body) not in allowed or not all(
                    isinstance(value, str) for value in body.values()
                ):
                    problems.append(f"{index}: a changed response that is not a stub")
    return problems


def _all_responses(original: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        part["function_response"]
        for content in original
        for part in content["parts"]
        if "function_response" in part
    ]


# -- the counter ----------------------------------------------------------------------------


def png_size(data: str | bytes) -> tuple[int, int] | None:
    """The size of a PNG from its base64 text (either alphabet) or raw bytes, else ``None``."""
    raw = data if isinstance(data, bytes) else base64.urlsafe_b64decode(data.encode())
    if not raw.startswith(b"\x89PNG") or len(raw) < 24:
        return None
    return int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")


def gemini_image(data: object) -> int:
    """Gemini's rule restated: 258 when both sides are at most 384 px, else 258 per 768 x 768
    tile; 2 064 (8 tiles) when the size is unknown."""
    size = png_size(data) if isinstance(data, str | bytes) else None
    if size is None:
        return 8 * 258
    width, height = size
    if width <= 384 and height <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def gemini_tokens(
    contents: list[dict[str, Any]],
    encode: Encode,
    framing: int,
    system: str | dict[str, Any] | None = None,
) -> int:
    """Gemini pricing as the guide states it: framing per content and per function call; texts
    (thoughts too), code and code output by the tokenizer; a call's name twice (its response's
    is priced with it) and its compact JSON args; a response's body as its one string field's
    text or its JSON; images by the tile rule, audio 1 000, other media 3 000; a signature
    nothing; any other part its JSON without the signature. Every model content reserves one
    filler content's price (two if it calls functions); a filler content costs nothing."""

    def count(text: str) -> int:
        return len(encode(text))

    def media(value: dict[str, Any], inline: bool) -> int:
        mime = value.get("mime_type", "")
        if mime.startswith("image/"):
            return gemini_image(value.get("data") if inline else None)
        if mime.startswith("audio/"):
            return 1000
        return 3000

    def part_cost(part: dict[str, Any]) -> int:  # noqa: PLR0911 - one return per kind
        if "text" in part:
            return count(part["text"])
        if "inline_data" in part:
            return media(part["inline_data"], inline=True)
        if "file_data" in part:
            return media(part["file_data"], inline=False)
        if "function_call" in part:
            call = part["function_call"]
            return framing + 2 * count(call["name"]) + count(_json(call.get("args") or {}))
        if "function_response" in part:
            response = part["function_response"]
            body = response.get("response")
            if body is None:
                total = 0
            elif len(body) == 1 and isinstance(next(iter(body.values())), str):
                total = count(next(iter(body.values())))
            else:
                total = count(_json(body))
            return total + sum(part_cost(inner) for inner in response.get("parts", []))
        if "executable_code" in part:
            return count(part["executable_code"]["code"])
        if "code_execution_result" in part:
            return count(part["code_execution_result"].get("output", ""))
        rest = {key: value for key, value in part.items() if key != "thought_signature"}
        if not rest or set(rest) == {"thought"}:
            return 0
        return count(_json(rest))

    total = 0
    if system is not None:
        texts = [system] if isinstance(system, str) else [p["text"] for p in system["parts"]]
        total += framing + sum(count(text) for text in texts)
    filler = framing + count(FILLER)
    for content in contents:
        if content["parts"] != [{"text": FILLER}]:
            total += framing + sum(part_cost(part) for part in content["parts"])
        if content["role"] == "model":
            calls = any("function_call" in part for part in content["parts"])
            total += filler * (2 if calls else 1)
    return total
