r"""Canonical JSON and every digest cutctx computes: the one home of both and of the surrogate rule.

**Canonical JSON** (``canonical_json``) is how a plan, a record and each sealed field are written:
sorted keys, no whitespace, non-ASCII characters as they are, no NaN or infinity; a read-only
mapping is written as the object it holds and a tuple as an array. The plan and the transcript
description are written directly for speed (``CompactionPlan.to_json``, ``transcript_digest``),
with the same string encoder (``json_string``), and tests hold them equal to ``canonical_json``.

**The digests**, each a SHA-256 hex digest:

- ``json_digest``: of JSON text as UTF-8 — a plan's hash, a record's seal (``canonical_digest``),
  the transcript digest.
- ``json_string_digest``: of a text *written as a JSON string* (``json.dumps(text,
  ensure_ascii=False)``, quotes and escapes included) as UTF-8 — a masked stub's digest and a
  summary group's id, which is what ``baseaicore.sha256_of(text)`` computes (0.1's digests).
- ``value_digest``: of ``baseaicore.canonical_json(value)`` as UTF-8, which is
  ``baseaicore.sha256_of(value)`` — a request's system text, a message the window has seen.
- ``body_digest``: of a transcript body's raw text, standing for the body in the transcript digest.

**Lone surrogates.** A Python ``str`` may hold a lone surrogate (``surrogateescape`` decoding and
``json.loads("\"\\ud800\"")`` make them), which UTF-8 cannot encode. The rule: no digest ever
raises, and text without lone surrogates hashes exactly as 0.1 (as plain UTF-8); in the JSON
text a digest hashes, each surrogate code point is written as its JSON escape ``\udXXX``
(lower-case hex, as ``json.dumps`` writes it; ``utf8``), which reads back as the same text and
which no other text gives (a literal backslash is ``\\`` in JSON). A body is hashed as raw text,
not JSON, where that escape could be spelled out, so there a lone surrogate is its three
``surrogatepass`` bytes, which no UTF-8 text holds. See docs/design.md, "Digests".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from baseaicore import canonical_json as value_json

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "body_digest",
    "canonical_digest",
    "canonical_json",
    "is_plain",
    "json_digest",
    "json_string",
    "json_string_digest",
    "utf8",
    "value_digest",
]

_SLICE: Final = 4096
"""Characters escaped and encoded at a time: hashing a long body never copies it whole."""

_QUOTE: Final = b'"'

json_string: Final = json.encoder.encode_basestring
"""The string encoder ``json.dumps(ensure_ascii=False)`` itself uses; it returns the text quoted."""


def canonical_json(value: object) -> str:
    """Serialize plain JSON data canonically: sorted keys, no whitespace, non-ASCII kept as is.

    A ``Mapping`` (a record's read-only copies) is written as the object it holds, a tuple as an
    array; a float that is not finite is a ``ValueError``, a value of any other type a
    ``TypeError``.
    """
    # No cycle check: callers pass fresh, acyclic trees (to_dict(), a record's frozen copy), and
    # the check (one id-keyed marker per container) costs more than the rest of the encoding.
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        check_circular=False,
        default=_object,
    )


def _object(value: object) -> dict[Any, Any]:
    """Return a mapping ``json.dumps`` does not write itself as the dict it holds."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON data")


def is_plain(text: str) -> bool:
    """Whether JSON writes ``text`` as it is (no quote, backslash or control character)."""
    return json_string(text)[1:-1] == text


def utf8(text: str) -> bytes:
    r"""Return ``text`` as UTF-8, each lone surrogate written as its JSON escape ``\udXXX``.

    For text without surrogates this is ``text.encode("utf-8")``; the error handler runs only for
    the code points UTF-8 cannot encode, which are exactly the surrogates.
    """
    return text.encode("utf-8", "backslashreplace")


def json_digest(text: str | Iterable[str]) -> str:
    """Return the SHA-256 hex digest of JSON text as UTF-8 (``utf8``), given whole or in pieces.

    Pieces are hashed one at a time, so a caller that yields them never holds the whole text.
    """
    hasher = hashlib.sha256()
    for piece in (text,) if isinstance(text, str) else text:
        hasher.update(utf8(piece))
    return hasher.hexdigest()


def canonical_digest(value: object) -> str:
    """Return the SHA-256 hex digest of ``canonical_json(value)`` as UTF-8."""
    return json_digest(canonical_json(value))


def json_string_digest(text: str) -> str:
    """Return the SHA-256 hex digest of ``text`` written as a JSON string, as UTF-8.

    It equals ``baseaicore.sha256_of(text)`` (the digest 0.1 writes into stubs and group ids)
    for any text without lone surrogates, and never raises. A text longer than ``_SLICE``
    characters is escaped and hashed a slice at a time: JSON escapes each character on its own
    (a Python ``str`` holds code points, never surrogate pairs), so the slices' bytes, joined,
    are the whole text's.
    """
    if len(text) <= _SLICE:
        return hashlib.sha256(utf8(json_string(text))).hexdigest()
    digest = hashlib.sha256(_QUOTE)
    for start in range(0, len(text), _SLICE):
        # Each slice comes back quoted; the view drops its quotes without a copy.
        digest.update(memoryview(utf8(json_string(text[start : start + _SLICE])))[1:-1])
    digest.update(_QUOTE)
    return digest.hexdigest()


def value_digest(value: object) -> str:
    """Return ``baseaicore.sha256_of(value)``, which never raises on a lone surrogate.

    That is the SHA-256 of ``baseaicore.canonical_json(value)`` as UTF-8 (``utf8``), so it equals
    ``sha256_of`` for any value without lone surrogates.

    Raises:
        ValidationError: for a value ``baseaicore.canonical_json`` refuses.
    """
    return json_digest(value_json(value))


def body_digest(content: str) -> str:
    """Return the SHA-256 hex digest of a body's raw text as UTF-8, a slice at a time.

    A lone surrogate is its three ``surrogatepass`` bytes, which no UTF-8 text holds, so a body
    and its escape spelled out never share a digest (see the module docstring).
    """
    if len(content) <= _SLICE:
        return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()
    hasher = hashlib.sha256()
    for start in range(0, len(content), _SLICE):
        hasher.update(content[start : start + _SLICE].encode("utf-8", "surrogatepass"))
    return hasher.hexdigest()
