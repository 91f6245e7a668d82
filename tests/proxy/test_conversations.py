"""The digests that find the conversation a request's history continues."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cutctx import ValidationError
from cutctx._proxy.conversations import new_conversation_id, prefix_digests

SALT = "/v1/messages model=claude system=abc"
MARKER = {"type": "ephemeral", "ttl": "1h"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["role", "content", "text", "type", "cache_control", "id"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
histories = st.lists(json_values, max_size=8)


def history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "text", "text": "Fix the build."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Running the tests."}]},
        {"role": "user", "content": [{"type": "text", "text": "Go on."}]},
    ]


def marked(messages: list[dict[str, Any]], index: int) -> list[dict[str, Any]]:
    """``messages`` with a cache marker on the last block of message ``index``."""
    out = copy.deepcopy(messages)
    out[index]["content"][-1]["cache_control"] = dict(MARKER)
    return out


def oracle(messages: list[Any], salt: str) -> list[str]:
    """The chain written out the slow way: each digest over the whole prefix, not chained."""
    out = []
    for end in range(1, len(messages) + 1):
        digest = hashlib.sha256(b"cutctx-proxy-history\0" + salt.encode()).digest()
        for message in messages[:end]:
            text = json.dumps(strip(message), sort_keys=True, separators=(",", ":"))
            digest = hashlib.sha256(digest + text.encode()).digest()
        out.append(digest.hex())
    return out


def strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


class TestPrefixDigests:
    def test_one_digest_per_message_each_naming_its_prefix(self) -> None:
        digests = prefix_digests(history(), salt=SALT)
        assert len(digests) == 3
        assert len(set(digests)) == 3
        assert all(len(digest) == 64 for digest in digests)
        assert digests == oracle(history(), SALT)

    def test_a_moved_cache_marker_is_the_same_history(self) -> None:
        """Claude Code marks the last message anew every request."""
        first = prefix_digests(marked(history()[:2], 1), salt=SALT)
        second = prefix_digests(marked(history(), 2), salt=SALT)
        assert second[:2] == first
        assert prefix_digests(history(), salt=SALT) == second

    def test_a_marker_at_any_depth_or_on_the_message_is_left_out(self) -> None:
        deep = history()
        deep[0]["cache_control"] = dict(MARKER)
        deep[1]["content"][0]["extra"] = {"nested": [{"cache_control": MARKER, "k": 1}]}
        plain = history()
        plain[1]["content"][0]["extra"] = {"nested": [{"k": 1}]}
        assert prefix_digests(deep, salt=SALT) == prefix_digests(plain, salt=SALT)

    def test_key_order_does_not_matter_but_content_does(self) -> None:
        reordered = [dict(reversed(list(message.items()))) for message in history()]
        assert prefix_digests(reordered, salt=SALT) == prefix_digests(history(), salt=SALT)
        edited = history()
        edited[1]["content"][0]["text"] = "Running the linter."
        digests = prefix_digests(edited, salt=SALT)
        assert digests[0] == prefix_digests(history(), salt=SALT)[0]
        assert digests[1:] != prefix_digests(history(), salt=SALT)[1:]

    def test_a_text_that_mentions_cache_control_is_content(self) -> None:
        said = [{"role": "user", "content": "cache_control"}]
        other = [{"role": "user", "content": "something else"}]
        assert prefix_digests(said, salt=SALT) != prefix_digests(other, salt=SALT)

    def test_another_salt_gives_other_digests(self) -> None:
        one = prefix_digests(history(), salt=SALT)
        two = prefix_digests(history(), salt="/v1/chat/completions")
        assert not set(one) & set(two)

    def test_the_messages_are_never_changed(self) -> None:
        messages = marked(history(), 2)
        before = copy.deepcopy(messages)
        prefix_digests(messages, salt=SALT)
        assert messages == before
        assert messages[2]["content"][-1]["cache_control"] == MARKER

    def test_no_messages_give_no_digests(self) -> None:
        assert prefix_digests([], salt=SALT) == []

    def test_a_message_that_is_not_json_names_its_index(self) -> None:
        with pytest.raises(ValidationError, match="message 1 is not JSON data") as raised:
            prefix_digests([{"role": "user"}, {"content": object()}], salt=SALT)
        assert raised.value.details == {"index": 1}

    @given(histories, histories)
    def test_the_digests_of_a_prefix_are_a_prefix_of_the_digests(
        self, head: list[Any], tail: list[Any]
    ) -> None:
        """The invariant ``Store.continued`` rests on: a history's digests begin with those of
        every history it continues, so the digest a conversation saved is found among them."""
        whole = prefix_digests([*head, *tail], salt=SALT)
        assert whole[: len(head)] == prefix_digests(head, salt=SALT)
        assert len(whole) == len(head) + len(tail)

    @given(histories)
    def test_the_digests_ignore_every_cache_marker_and_never_change_the_messages(
        self, messages: list[Any]
    ) -> None:
        """What a moved, added or removed marker would break: a history with its markers and
        one without them have the same digests, and neither is changed by hashing it."""
        before = copy.deepcopy(messages)
        assert prefix_digests(messages, salt=SALT) == prefix_digests(strip(messages), salt=SALT)
        assert prefix_digests(messages, salt=SALT) == oracle(messages, SALT)
        assert messages == before


class TestNewConversationId:
    def test_ids_are_random_hex(self) -> None:
        ids = {new_conversation_id() for _ in range(100)}
        assert len(ids) == 100
        assert all(len(name) == 32 and int(name, 16) >= 0 for name in ids)
