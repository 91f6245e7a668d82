"""Real image files made with Pillow, base64-encoded as the providers take them, and the
providers' documented image-token rules restated independently of cutctx."""

from __future__ import annotations

import base64
import io
import math
from fractions import Fraction
from typing import Final

from PIL import Image

ENCODINGS: Final = (
    "png",
    "jpeg",
    "jpeg-exif",
    "jpeg-progressive",
    "gif",
    "webp-lossy",
    "webp-lossless",
    "webp-alpha",
)
"""Every encoding the tests make: the four formats, with each header layout cutctx must read
(a JPEG after an EXIF segment, a progressive frame; WebP's VP8, VP8L and VP8X chunks)."""


def exif_with_thumbnail(width: int, height: int) -> bytes:
    """An APP1 EXIF segment that embeds a whole JPEG thumbnail of ``width`` x ``height``.

    Its frame header is a decoy: a reader that does not step over APPn segments reads this
    size instead of the image's.
    """
    exif = Image.Exif()
    exif[0x0112] = 1  # orientation: upright
    exif[0x010F] = "cutctx tests"  # make
    thumbnail = io.BytesIO()
    Image.new("RGB", (width, height), (200, 10, 10)).save(thumbnail, "JPEG", quality=30)
    body = exif.tobytes() + thumbnail.getvalue()  # "Exif\0\0", TIFF data, then the JPEG
    return b"\xff\xe1" + (len(body) + 2).to_bytes(2, "big") + body


def image_bytes(encoding: str, width: int, height: int) -> bytes:
    """A real ``width`` x ``height`` image file in ``encoding`` (one of ``ENCODINGS``)."""
    mode = "RGBA" if encoding == "webp-alpha" else "RGB"
    colour = (30, 120, 220, 128) if mode == "RGBA" else (30, 120, 220)
    image = Image.new(mode, (width, height), colour)
    out = io.BytesIO()
    if encoding == "png":
        image.save(out, "PNG", compress_level=1)
    elif encoding == "jpeg":
        image.save(out, "JPEG", quality=50)
    elif encoding == "jpeg-exif":
        exif = Image.Exif()
        exif[0x0112] = 1
        image.save(out, "JPEG", quality=50, exif=exif.tobytes(), icc_profile=b"\x00" * 3000)
        data = out.getvalue()
        # A second EXIF segment with a thumbnail of another size, right after SOI.
        return data[:2] + exif_with_thumbnail(17, 9) + data[2:]
    elif encoding == "jpeg-progressive":
        image.save(out, "JPEG", quality=50, progressive=True)
    elif encoding == "gif":
        image.save(out, "GIF")
    elif encoding == "webp-lossy":
        image.save(out, "WEBP", quality=10, method=0)
    elif encoding == "webp-lossless":
        image.save(out, "WEBP", lossless=True, quality=0, method=0)
    elif encoding == "webp-alpha":
        image.save(out, "WEBP", quality=10, method=0)
    else:
        raise AssertionError(encoding)
    return out.getvalue()


def image_base64(encoding: str, width: int, height: int) -> str:
    """The base64 text of ``image_bytes``, as an API's ``data`` field holds it."""
    return base64.b64encode(image_bytes(encoding, width, height)).decode("ascii")


def anthropic_formula(width: int, height: int) -> float:
    """Anthropic's rule: scale down (aspect kept) to a long edge <= 1568 px and an area <=
    1092 x 1092 px, then ``width * height / 750``."""
    scale = min(1.0, 1568 / max(width, height), math.sqrt(1092 * 1092 / (width * height)))
    return (width * scale) * (height * scale) / 750


def openai_formula(width: int, height: int, detail: str | None = "high") -> int:
    """OpenAI's rule: 85 at low detail; else fit in 2048 x 2048, shortest side down to 768,
    then 85 + 170 per 512-px tile."""
    if detail == "low":
        return 85
    w, h = Fraction(width), Fraction(height)
    if w > 2048 or h > 2048:
        factor = Fraction(2048) / max(w, h)
        w, h = w * factor, h * factor
    if min(w, h) > 768:
        factor = Fraction(768) / min(w, h)
        w, h = w * factor, h * factor
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)
