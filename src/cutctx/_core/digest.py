r"""The digests a plan carries: SHA-256 over a text's JSON string encoding, as UTF-8.

A masked stub's digest and a summary group's id are the SHA-256 of a text written as a JSON
string — ``json.dumps(text, ensure_ascii=False)``, quotes and escapes included — as UTF-8 bytes,
which is what ``baseaicore.sha256_of(text)`` computes. A plan's hash is the SHA-256 of its
canonical JSON, as UTF-8 bytes.

A Python ``str`` may hold a lone surrogate (``surrogateescape`` decoding makes them), which
UTF-8 cannot encode. Every digest here writes each surrogate code point as its JSON escape
``\udXXX`` instead (lower-case hex, as ``json.dumps`` writes it), so no digest ever raises;
text without surrogates hashes exactly as before. See docs/design.md, "Digests".
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

__all__ = ["json_string_digest", "utf8"]

_SLICE: Final = 4096
"""Characters escaped and encoded at a time: hashing a long body never copies it whole."""

_QUOTE: Final = b'"'
_ESCAPE: Final = json.encoder.encode_basestring
"""The string encoder ``json.dumps(ensure_ascii=False)`` itself uses; it returns the text quoted."""


def utf8(text: str) -> bytes:
    r"""Return ``text`` as UTF-8, each lone surrogate written as its JSON escape ``\udXXX``.

    For text without surrogates this is ``text.encode("utf-8")``; the error handler runs only for
    the code points UTF-8 cannot encode, which are exactly the surrogates.
    """
    return text.encode("utf-8", "backslashreplace")


def json_string_digest(text: str) -> str:
    """Return the SHA-256 hex digest of ``text`` written as a JSON string, as UTF-8.

    It equals ``baseaicore.sha256_of(text)`` (the digest 0.1 writes into stubs and group ids)
    for any text without lone surrogates, and never raises. A text longer than ``_SLICE``
    characters is escaped and hashed a slice at a time: JSON escapes each character on its own
    (a Python ``str`` holds code points, never surrogate pairs), so the slices' bytes, joined,
    are the whole text's.
    """
    if len(text) <= _SLICE:
        return hashlib.sha256(utf8(_ESCAPE(text))).hexdigest()
    digest = hashlib.sha256(_QUOTE)
    for start in range(0, len(text), _SLICE):
        # Each slice comes back quoted; the view drops its quotes without a copy.
        digest.update(memoryview(utf8(_ESCAPE(text[start : start + _SLICE])))[1:-1])
    digest.update(_QUOTE)
    return digest.hexdigest()
