"""The counts a state packs into one string (``cutctx._loop.packed``): exact, narrow, checked."""

from __future__ import annotations

import base64
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cutctx._loop.packed import pack, unpack

COUNTS = st.lists(st.integers(min_value=0, max_value=(1 << 64) - 1), max_size=300)


@given(COUNTS)
def test_unpacking_a_packed_list_gives_back_the_same_counts(counts: list[int]) -> None:
    """Invariant: ``unpack(pack(counts)) == counts`` for any non-negative counts under 2**64,
    whatever their widths (the state's prices come back exactly)."""
    packed = pack(counts)
    assert isinstance(packed, str)
    assert unpack(packed) == counts


@given(COUNTS)
def test_the_packing_is_the_narrowest_width_every_count_fits(counts: list[int]) -> None:
    """Invariant: the width code is the narrowest of 16, 32 and 64 bits the largest count fits,
    and the body is exactly that many bytes a count (so equal counts pack to equal text)."""
    packed = pack(counts)
    assert isinstance(packed, str)
    top = max(counts, default=0)
    code = "H" if top < 1 << 16 else "I" if top < 1 << 32 else "Q"
    assert packed[0] == code
    assert len(base64.b64decode(packed[1:])) == len(counts) * struct.calcsize("<" + code)


def test_the_bytes_are_little_endian_base64_after_the_width_code() -> None:
    assert pack([1, 258]) == "H" + base64.b64encode(b"\x01\x00\x02\x01").decode()
    assert pack([70_000]) == "I" + base64.b64encode((70_000).to_bytes(4, "little")).decode()
    assert pack([]) == "H"
    assert unpack("H") == []


def test_a_count_too_large_to_pack_leaves_the_list_as_it_is() -> None:
    counts = [3, 1 << 64]
    made = pack(counts)
    assert made == counts
    assert made is not counts  # a copy: the state never shares the caller's list


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "not a list of packed counts"),
        ("X" + base64.b64encode(b"\x00\x00").decode(), "not a list of packed counts"),
        ("H!!!!", "not a list of packed counts"),
        ("I" + base64.b64encode(b"\x00\x00").decode(), "2 bytes are not a whole number of 4"),
    ],
)
def test_a_text_pack_does_not_make_is_refused(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        unpack(text)
