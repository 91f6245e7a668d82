"""Image pricing: read an image's size from the head of its base64 data, then apply a rule.

The size is metadata in every format the providers accept, so only the bytes that hold it are
decoded, never the whole image: 24 bytes of a PNG, 10 of a GIF, 30 of a WebP, and for a JPEG the
two-byte marker and length of each segment before its frame header (an ``APPn`` segment, EXIF
and its thumbnail included, is stepped over, never read). An image whose size cannot be read —
a URL, a file id, a corrupt or truncated header, base64 with line breaks — is priced at the most
the provider's rule allows, so it is never under-priced.
"""

from __future__ import annotations

import base64
from typing import Final

__all__ = [
    "ANTHROPIC_IMAGE_MAX_TOKENS",
    "ANTHROPIC_IMAGE_PIXELS_PER_TOKEN",
    "OPENAI_IMAGE_BASE_TOKENS",
    "OPENAI_IMAGE_TILE_TOKENS",
    "OPENAI_IMAGE_UNSIZED_TOKENS",
    "anthropic_image_tokens",
    "image_size",
    "openai_image_tokens",
]

OPENAI_IMAGE_BASE_TOKENS: Final = 85
"""An OpenAI image at ``detail: "low"`` costs this; at high detail it is the base per image."""

OPENAI_IMAGE_TILE_TOKENS: Final = 170
"""An OpenAI high-detail image costs this per 512-pixel tile, on top of the base."""

OPENAI_IMAGE_UNSIZED_TOKENS: Final = OPENAI_IMAGE_BASE_TOKENS + 8 * OPENAI_IMAGE_TILE_TOKENS
"""A high- or auto-detail OpenAI image whose size cannot be read: the most the tile rule allows
(768 x 2048 px, 8 tiles, 1 445 tokens)."""

ANTHROPIC_IMAGE_PIXELS_PER_TOKEN: Final = 750
"""Anthropic prices an image at ``width * height / 750`` tokens (after scaling)."""

ANTHROPIC_IMAGE_MAX_TOKENS: Final = 1_600
"""Anthropic scales larger images down to about this many tokens (the documented ~1 600); an
image whose size cannot be read is priced at it (the rule itself tops out at 1 590)."""

_ANTHROPIC_MAX_EDGE: Final = 1_568
_ANTHROPIC_MAX_AREA: Final = 1_092 * 1_092
_OPENAI_FIT: Final = 2_048
_OPENAI_SHORT_SIDE: Final = 768
_OPENAI_TILE: Final = 512

_PNG: Final = b"\x89PNG\r\n\x1a\n"
_JPEG_SOF: Final = frozenset(
    {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
)
_JPEG_STANDALONE: Final = frozenset({0x01, *range(0xD0, 0xD8)})  # TEM and RST0-7: no length
_JPEG_MAX_SEGMENTS: Final = 256  # real files hold a handful before the frame header


class _Base64:
    """Random access to the bytes of base64 ``data``, decoding only the quads a read touches."""

    __slots__ = ("data", "size")

    def __init__(self, data: str) -> None:
        self.data = data
        # Padding only shortens the last quad; this bound is exact for unpadded data too.
        self.size = len(data) * 3 // 4

    def read(self, start: int, length: int) -> bytes | None:
        """Return ``length`` bytes from ``start``, or ``None`` past the end or on bad base64."""
        if start < 0 or start + length > self.size:
            return None
        first = start // 3
        last = -(-(start + length) // 3)
        chunk = self.data[first * 4 : last * 4]
        try:
            decoded = base64.b64decode(chunk, validate=True)
        except ValueError:  # binascii.Error
            return None
        offset = start - first * 3
        piece = decoded[offset : offset + length]
        return piece if len(piece) == length else None

    def head(self, length: int) -> bytes | None:
        """Return up to the first ``length`` bytes (fewer when the data is shorter)."""
        chunk = self.data[: -(-length // 3) * 4]
        try:
            return base64.b64decode(chunk[: len(chunk) - len(chunk) % 4], validate=True)
        except ValueError:  # binascii.Error
            return None


def image_size(data: str) -> tuple[int, int] | None:
    """Return ``(width, height)`` of a PNG, JPEG, GIF or WebP image from its base64 ``data``.

    ``None`` when the data is none of these or its header cannot be read.

    >>> image_size("R0lGODlhAgABAIAAAAAAAP///yH5BAEAAAAALAAAAAACAAEAAAICBAoAOw==")
    (2, 1)
    """
    source = _Base64(data)
    head = source.head(30)
    if head is None:
        return None
    if head.startswith(_PNG):
        size = _png(head)
    elif head.startswith((b"GIF87a", b"GIF89a")):
        size = int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    elif head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        size = _webp(head)
    elif head.startswith(b"\xff\xd8"):
        size = _jpeg(source)
    else:
        return None
    if size is None or size[0] <= 0 or size[1] <= 0:
        return None
    return size


def _png(head: bytes) -> tuple[int, int] | None:
    if len(head) < 24 or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _webp(head: bytes) -> tuple[int, int] | None:  # noqa: PLR0911 - one branch per chunk kind
    if len(head) < 30:
        return None
    chunk = head[12:16]
    if chunk == b"VP8X":  # canvas size minus one, 24 bits each
        width = int.from_bytes(head[24:27], "little") + 1
        height = int.from_bytes(head[27:30], "little") + 1
        return width, height
    if chunk == b"VP8L":  # signature 0x2f, then 14 bits each of size minus one
        if head[20] != 0x2F:
            return None
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 ":  # a key frame: 3-byte tag, start code, 14-bit sizes
        if head[23:26] != b"\x9d\x01\x2a":
            return None
        width = int.from_bytes(head[26:28], "little") & 0x3FFF
        height = int.from_bytes(head[28:30], "little") & 0x3FFF
        return width, height
    return None


def _jpeg(source: _Base64) -> tuple[int, int] | None:
    """Walk the segments after SOI to the first frame header (SOFn) and read its size."""
    position = 2
    for _ in range(_JPEG_MAX_SEGMENTS):
        marker = source.read(position, 2)
        if marker is None or marker[0] != 0xFF:
            return None
        kind = marker[1]
        if kind == 0xFF:  # a fill byte before the marker
            position += 1
            continue
        if kind in _JPEG_STANDALONE:
            position += 2
            continue
        if kind in (0xD8, 0xD9, 0xDA):  # another SOI, EOI or scan data before any frame
            return None
        if kind in _JPEG_SOF:
            frame = source.read(position + 5, 4)  # after marker, length and precision
            if frame is None:
                return None
            return int.from_bytes(frame[2:4], "big"), int.from_bytes(frame[0:2], "big")
        length = source.read(position + 2, 2)
        if length is None or int.from_bytes(length, "big") < 2:
            return None
        position += 2 + int.from_bytes(length, "big")
    return None


def data_url_payload(url: object) -> str | None:
    """Return the base64 payload of a ``data:...;base64,`` URL, else ``None``."""
    if isinstance(url, str) and url.startswith("data:"):
        head, _, payload = url.partition(",")
        if head.endswith(";base64"):
            return payload
    return None


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def openai_image_tokens(url: object, detail: object) -> int:
    """Price an OpenAI image from its size, never from the length of its data.

    85 at ``detail: "low"``; otherwise fit in 2048 x 2048, then the shortest side down to 768,
    then 85 + 170 per 512-px tile, when ``url`` is a data URL whose size is readable, else
    ``OPENAI_IMAGE_UNSIZED_TOKENS``.
    """
    if detail == "low":
        return OPENAI_IMAGE_BASE_TOKENS
    payload = data_url_payload(url)
    size = image_size(payload) if payload is not None else None
    if size is None:
        return OPENAI_IMAGE_UNSIZED_TOKENS
    width, height = size
    # Exact integer scaling: a side scaled by num/den is side * num / den. If the shortest side
    # is still over 768 after fitting in 2048, the two steps compose to 768 / shortest.
    num, den = 1, 1
    if max(width, height) > _OPENAI_FIT:
        num, den = _OPENAI_FIT, max(width, height)
    if min(width, height) * num > _OPENAI_SHORT_SIDE * den:
        num, den = _OPENAI_SHORT_SIDE, min(width, height)
    tiles = _ceil_div(width * num, den * _OPENAI_TILE) * _ceil_div(height * num, den * _OPENAI_TILE)
    return OPENAI_IMAGE_BASE_TOKENS + OPENAI_IMAGE_TILE_TOKENS * tiles


def anthropic_image_tokens(source: object) -> int:
    """Price an Anthropic image ``source`` at ``width * height / 750``, rounded up, after scaling.

    The image is scaled down (aspect kept) until its long edge is at most 1 568 px and its area
    at most 1 092 x 1 092 px. A base64 source (or a ``data:`` URL) whose size is unreadable, and
    every URL or file source, costs ``ANTHROPIC_IMAGE_MAX_TOKENS``.
    """
    data: object = None
    if isinstance(source, dict):
        data = source.get("data")
        if data is None:
            data = data_url_payload(source.get("url"))
    size = image_size(data) if isinstance(data, str) else None
    if size is None:
        return ANTHROPIC_IMAGE_MAX_TOKENS
    width, height = size
    edge = max(width, height)
    # The area after scaling by s is w * h * s**2, kept exact as num / den; both limits only
    # ever scale down, so the smaller area wins.
    num, den = width * height, 1
    if edge > _ANTHROPIC_MAX_EDGE:
        num, den = width * height * _ANTHROPIC_MAX_EDGE**2, edge**2
    if num > _ANTHROPIC_MAX_AREA * den:
        num, den = _ANTHROPIC_MAX_AREA, 1
    tokens = _ceil_div(num, den * ANTHROPIC_IMAGE_PIXELS_PER_TOKEN)
    return min(tokens, ANTHROPIC_IMAGE_MAX_TOKENS)
