"""How each Gemini part is read and priced, and the contents as the format reads them.

A part reads as the text a summarizer is shown (a text part its text; a thought ``""``; a
function call a ``[tool call name {args}]`` line; executable code its code; a code result its
output; media a label line such as ``[image]``) and is priced as ``docs/formats/gemini.md``
says. Keys are read in either spelling the API and the SDK accept (``function_call`` or
``functionCall``); a masked copy keeps the spelling it was given.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

from cutctx.formats._common import AUDIO_TOKENS, FILE_TOKENS, check_dict, fail, shown, text_field
from cutctx.formats._images import image_size

if TYPE_CHECKING:
    from cutctx.formats._common import Pricer

__all__ = [
    "FORMAT",
    "IMAGE_SMALL_EDGE",
    "IMAGE_TILE",
    "IMAGE_TILE_TOKENS",
    "IMAGE_UNSIZED_TOKENS",
    "body_of",
    "calls_of",
    "field",
    "gemini_image_tokens",
    "part_of",
    "read_content",
    "responses_of",
    "strict_json",
]

FORMAT: Final = "gemini"

IMAGE_TILE_TOKENS: Final = 258
"""Gemini prices an image with both sides at most ``IMAGE_SMALL_EDGE`` px at this, and a larger
one at this per ``IMAGE_TILE`` x ``IMAGE_TILE`` px tile."""

IMAGE_SMALL_EDGE: Final = 384
IMAGE_TILE: Final = 768

IMAGE_UNSIZED_TOKENS: Final = 8 * IMAGE_TILE_TOKENS
"""An image whose size cannot be read (a file URI, a corrupt header): the price of 8 tiles
(a 1 536 x 3 072 px image). The tile rule has no ceiling, so this is a stated guess."""

# The part's data fields (a part holds one of them), in the snake_case the SDK dumps.
_DATA: Final = (
    "text",
    "inline_data",
    "file_data",
    "function_call",
    "function_response",
    "executable_code",
    "code_execution_result",
)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


_SPELLINGS: Final = {name: (name, _camel(name)) for name in (*_DATA, "thought_signature")}


def field(value: Mapping[str, Any], name: str) -> tuple[str, Any]:
    """Return the key ``name`` is spelt with in ``value`` (snake or camel case) and its value.

    The snake_case key when neither is present (its value ``None``).
    """
    for key in _SPELLINGS.get(name, (name, _camel(name))):
        if key in value:
            return key, value[key]
    return name, None


def read_content(index: int, message: object) -> dict[str, Any]:
    """Return content ``index`` read as a dict; an SDK object is dumped as JSON data (base64).

    A dict whose ``parts`` list holds SDK objects is read into a new dict with those parts
    dumped; anything else is left for the reader to judge. The caller's object is never changed.
    """
    read: Any = message
    if type(message) is not dict:
        read = dict(message) if isinstance(message, Mapping) else _dump(message)
        if not isinstance(read, dict):
            raise fail(
                FORMAT, index, f"the message must be an object, got {type(message).__name__}"
            )
    parts = read.get("parts")
    if type(parts) is list and not all(type(part) is dict for part in parts):
        read = {**read, "parts": [_dumped(part) for part in parts]}
    return cast("dict[str, Any]", read)


def _dump(value: object) -> object:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json", exclude_none=True) if callable(dump) else None


def _dumped(part: object) -> object:
    if type(part) is dict or isinstance(part, Mapping):
        return part
    read = _dump(part)
    return read if isinstance(read, dict) else part


def _data_key(index: int, part: Mapping[str, Any], where: str) -> str | None:
    """Return the data field ``part`` holds (snake_case), or ``None``; raise if it holds two."""
    found = [name for name in _DATA if field(part, name)[1] is not None]
    if len(found) > 1:
        raise fail(FORMAT, index, f"{where} holds both {found[0]} and {found[1]} (one per part)")
    return found[0] if found else None


def strict_json(index: int, value: object, where: str) -> str:
    """Return ``value`` as compact JSON, or raise naming ``where`` if JSON cannot hold it."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        raise fail(FORMAT, index, f"{where} is not JSON data: {shown(value)}") from None


def _call(index: int, part: Mapping[str, Any], where: str) -> tuple[str, str, str | None]:
    """Return a function call's name, its arguments as JSON and its id (or ``None``)."""
    key, call = field(part, "function_call")
    call = check_dict(FORMAT, index, call, f"{where}.{key}")
    name = text_field(FORMAT, index, call.get("name"), f"{where}.{key}.name")
    args = call.get("args")
    if args is not None and not isinstance(args, Mapping):
        raise fail(FORMAT, index, f"{where}.{key}.args must be an object, got {shown(args)}")
    arguments = strict_json(index, {} if args is None else args, f"{where}.{key}.args")
    call_id = call.get("id")
    if call_id is not None:
        call_id = text_field(FORMAT, index, call_id, f"{where}.{key}.id")
    return name, arguments, call_id


def calls_of(index: int, parts: Sequence[Any]) -> list[tuple[int, str, str | None]]:
    """Return each function call of a content's ``parts``: position, name and id."""
    found: list[tuple[int, str, str | None]] = []
    for position, part in enumerate(parts):
        if isinstance(part, Mapping) and field(part, "function_call")[1] is not None:
            name, _, call_id = _call(index, part, f"parts[{position}]")
            found.append((position, name, call_id))
    return found


def responses_of(index: int, parts: Sequence[Any]) -> list[tuple[int, str, str | None]]:
    """Return each function response of a content's ``parts``: position, name and id."""
    found: list[tuple[int, str, str | None]] = []
    for position, part in enumerate(parts):
        if not isinstance(part, Mapping):
            continue
        key, response = field(part, "function_response")
        if response is None:
            continue
        where = f"parts[{position}].{key}"
        response = check_dict(FORMAT, index, response, where)
        name = text_field(FORMAT, index, response.get("name"), f"{where}.name")
        call_id = response.get("id")
        if call_id is not None:
            call_id = text_field(FORMAT, index, call_id, f"{where}.id")
        found.append((position, name, call_id))
    return found


def body_of(pricer: Pricer, index: int, part: Mapping[str, Any], where: str) -> tuple[str, int]:
    """Read and price a function response's body: its ``response`` and its media ``parts``.

    A ``response`` of one string field (``{"output": text}``, ``{"result": text}``) reads and
    costs as that text, any other as its JSON; the name is priced on the call.
    """
    key, response = field(part, "function_response")
    response = check_dict(FORMAT, index, response, f"{where}.{key}")
    body = response.get("response")
    if body is None:
        text = ""
    elif not isinstance(body, Mapping):
        raise fail(FORMAT, index, f"{where}.{key}.response must be an object, got {shown(body)}")
    elif len(body) == 1 and isinstance(next(iter(body.values())), str):
        text = next(iter(body.values()))
    else:
        text = strict_json(index, body, f"{where}.{key}.response")
    cost = pricer.text(text)
    media = response.get("parts")
    if media is not None:
        if not isinstance(media, list | tuple):
            raise fail(FORMAT, index, f"{where}.{key}.parts must be a list")
        for position, value in enumerate(media):
            cost += part_of(pricer, index, value, f"{where}.{key}.parts[{position}]")[1]
    return text, cost


# Base64 text in either alphabet (the API's JSON writes the standard one, pydantic's JSON mode
# the URL-safe one), padded or not: the one text shape a thought signature may take.
_BASE64: Final = re.compile(
    r"(?:[A-Za-z0-9+/_-]{4})*(?:[A-Za-z0-9+/_-]{2}(?:==)?|[A-Za-z0-9+/_-]{3}=?)?"
)


def _check_signature(index: int, part: Mapping[str, Any], where: str) -> None:
    """Raise for a ``thought_signature`` that is neither bytes nor base64 text."""
    key, signature = field(part, "thought_signature")
    if signature is None or isinstance(signature, bytes | bytearray):
        return
    if isinstance(signature, str) and _BASE64.fullmatch(signature) is not None:
        return
    got = "text that is not base64" if isinstance(signature, str) else type(signature).__name__
    raise fail(FORMAT, index, f"{where}.{key} must be bytes or base64 text, got {got}", field=key)


def part_of(pricer: Pricer, index: int, value: object, where: str) -> tuple[str, int]:  # noqa: PLR0911 - one branch per kind of part
    """Render (for summarizers) and price one part."""
    part = check_dict(FORMAT, index, value, where)
    kind = _data_key(index, part, where)
    _check_signature(index, part, where)
    thought = part.get("thought")
    if thought is not None and not isinstance(thought, bool):
        raise fail(FORMAT, index, f"{where}.thought must be true or false")
    if kind == "text":
        text = text_field(FORMAT, index, part["text"], f"{where}.text")
        return ("" if thought else text), pricer.text(text)
    if kind in ("inline_data", "file_data"):
        return _media(index, part, kind, where)
    if kind == "function_call":
        name, arguments, _ = _call(index, part, where)
        # The response's name is priced here: a response costs its body alone, as a stub does.
        price = pricer.framing + 2 * pricer.text(name) + pricer.text(arguments)
        return f"[tool call {name} {arguments}]", price
    if kind == "function_response":
        return body_of(pricer, index, part, where)
    if kind == "executable_code":
        key, code = field(part, kind)
        code = check_dict(FORMAT, index, code, f"{where}.{key}")
        text = text_field(FORMAT, index, code.get("code"), f"{where}.{key}.code")
        return text, pricer.text(text)
    if kind == "code_execution_result":
        key, result = field(part, kind)
        result = check_dict(FORMAT, index, result, f"{where}.{key}")
        output = result.get("output")
        text = "" if output is None else text_field(FORMAT, index, output, f"{where}.{key}.output")
        return text, pricer.text(text)
    rest = {
        name: item for name, item in part.items() if name not in _SPELLINGS["thought_signature"]
    }
    if not rest or rest == {"thought": thought}:
        return "", 0  # a signature alone (the end of a thought): sent, not priced
    return "[part]", pricer.text(strict_json(index, rest, where))


def _media(index: int, part: Mapping[str, Any], kind: str, where: str) -> tuple[str, int]:
    key, media = field(part, kind)
    media = check_dict(FORMAT, index, media, f"{where}.{key}")
    _, mime = field(media, "mime_type")
    mime = mime if isinstance(mime, str) else ""
    if mime.startswith("image/"):
        data = media.get("data") if kind == "inline_data" else None
        return "[image]", gemini_image_tokens(data)
    if mime.startswith("audio/"):
        return "[audio]", AUDIO_TOKENS
    if mime.startswith("video/"):
        return "[video]", FILE_TOKENS
    return "[file]", FILE_TOKENS


def gemini_image_tokens(data: object) -> int:
    """Price an image from its size: 258 if both sides are at most 384 px, else 258 a tile.

    The tiles are 768 x 768 px (``ceil(w / 768) * ceil(h / 768)`` of them). ``data`` is base64
    text (either alphabet) or raw bytes; an image whose size cannot be read costs
    ``IMAGE_UNSIZED_TOKENS``.
    """
    if isinstance(data, bytes | bytearray):
        data = base64.b64encode(data).decode("ascii")
    size = image_size(data.replace("-", "+").replace("_", "/")) if isinstance(data, str) else None
    if size is None:
        return IMAGE_UNSIZED_TOKENS
    width, height = size
    if width <= IMAGE_SMALL_EDGE and height <= IMAGE_SMALL_EDGE:
        return IMAGE_TILE_TOKENS
    tiles = -(-width // IMAGE_TILE) * -(-height // IMAGE_TILE)
    return IMAGE_TILE_TOKENS * tiles
