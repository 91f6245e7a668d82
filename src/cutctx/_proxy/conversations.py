"""Which conversation a request continues: digests of its history's prefixes.

``prefix_digests(messages, salt=...)[i]`` names ``messages[: i + 1]``: a chain of SHA-256 over
each message's canonical JSON (keys sorted, no spaces), the chain seeded with ``salt`` (what else
tells conversations apart: the API path, the model, the system prompt's digest). Every
``cache_control`` key is left out at any depth first: clients move their cache markers every
request, and a moved marker is not a new history. A store keeps the digest of the history each
conversation served last; the next request of that conversation has it among its prefixes'
digests (``Store.continued``). One pass over the messages, and they are never changed.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import TYPE_CHECKING, Final

from cutctx import ValidationError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["new_conversation_id", "prefix_digests"]

MARKER: Final = "cache_control"
_SEED: Final = b"cutctx-proxy-history\0"


def prefix_digests(messages: Sequence[object], *, salt: str) -> list[str]:
    """Return one hex SHA-256 digest per prefix: ``[i]`` names ``messages[: i + 1]``.

    Equal messages (as JSON data, key order aside, ``cache_control`` aside) under an equal
    ``salt`` give equal digests; the digests of a prefix are a prefix of the digests.

    >>> one = prefix_digests([{"role": "user", "content": "hi"}], salt="/v1/messages")
    >>> two = prefix_digests(
    ...     [{"content": "hi", "role": "user", "cache_control": {"type": "ephemeral"}},
    ...      {"role": "assistant", "content": "hello"}],
    ...     salt="/v1/messages",
    ... )
    >>> two[0] == one[0], len(two)
    (True, 2)

    Raises:
        ValidationError: for a message that is not JSON data (naming its index).
    """
    digest = hashlib.sha256(_SEED + salt.encode("utf-8", "surrogatepass")).digest()
    out: list[str] = []
    for index, message in enumerate(messages):
        try:
            text = json.dumps(_unmarked(message), sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError) as error:
            raise ValidationError(
                f"prefix_digests: message {index} is not JSON data: {error}",
                details={"index": index},
            ) from None
        # ensure_ascii (the default) makes the text ASCII, lone surrogates included
        digest = hashlib.sha256(digest + text.encode("ascii")).digest()
        out.append(digest.hex())
    return out


def new_conversation_id() -> str:
    """Return a new random conversation id (32 hex digits; never derived from content)."""
    return secrets.token_hex(16)


def _unmarked(value: object) -> object:
    """``value`` without its ``cache_control`` keys, at any depth (a copy where one is left out)."""
    if isinstance(value, dict):
        return {key: _unmarked(item) for key, item in value.items() if key != MARKER}
    if isinstance(value, list | tuple):
        return [_unmarked(item) for item in value]
    return value
