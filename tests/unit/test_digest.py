"""Canonical JSON and the digests: 0.1's JSON-string SHA-256, sliced, and never raising.

The oracle here is the definition itself, written the plain way: ``json.dumps(text,
ensure_ascii=False)`` encoded whole, with each lone surrogate as its ``\\udXXX`` escape; for text
without surrogates it is also ``baseaicore.sha256_of(text)``.
"""

from __future__ import annotations

import hashlib
import json
from types import MappingProxyType

import pytest
from baseaicore import ValidationError, sha256_of
from hypothesis import given
from hypothesis import strategies as st

from cutctx import (
    CompactionBudget,
    CompactionExecutor,
    ObservationMaskingPolicy,
    Role,
    SummarizingPolicy,
    Transcript,
    TranscriptTurn,
    default_chain,
)
from cutctx._core.digest import (
    _SLICE,
    body_digest,
    canonical_digest,
    canonical_json,
    is_plain,
    json_digest,
    json_string,
    json_string_digest,
    utf8,
    value_digest,
)
from cutctx._core.values import group_id_for
from tests.strategies import ANY_TEXT, AWKWARD, JSON_DATA

L_1200 = "d1fd6a834c71465d6eeb3623b9c5a2ac60c49d069ffc469bc131b4ff506e55a2"
SPAN_IDS = ("u1", "a1", "t1", "a2", "a3", "t2", "a4", "a5", "t3", "u2")
SPAN_GROUP = "span-df373641db082650"
LONE = "\udcff"  # what surrogateescape decoding makes of the byte 0xff


def oracle(text: str) -> str:
    """The definition: the whole JSON string at once, lone surrogates as their JSON escape."""
    encoded = json.dumps(text, ensure_ascii=False).encode("utf-8", "backslashreplace")
    return hashlib.sha256(encoded).hexdigest()


class TestJsonStringDigest:
    def test_1200_ls_give_the_01_digest(self) -> None:
        assert json_string_digest("L" * 1200) == L_1200
        assert sha256_of("L" * 1200) == L_1200

    def test_it_is_the_digest_of_the_quoted_string_not_of_the_raw_text(self) -> None:
        assert json_string_digest("ab") == hashlib.sha256(b'"ab"').hexdigest()
        assert json_string_digest('a"b') == hashlib.sha256(b'"a\\"b"').hexdigest()
        assert json_string_digest("\0") == hashlib.sha256(b'"\\u0000"').hexdigest()
        assert json_string_digest("ab") != hashlib.sha256(b"ab").hexdigest()

    @pytest.mark.parametrize(
        "length",
        [0, 1, _SLICE - 1, _SLICE, _SLICE + 1, 2 * _SLICE - 1, 2 * _SLICE, 2 * _SLICE + 1, 20_000],
    )
    @pytest.mark.parametrize("offset", range(len(AWKWARD)))
    def test_slices_join_to_the_whole_at_every_boundary(self, length: int, offset: int) -> None:
        """Every awkward character lands on each side of every slice boundary for some offset."""
        text = ((AWKWARD * (length // len(AWKWARD) + 2))[offset:])[:length]
        assert json_string_digest(text) == oracle(text) == sha256_of(text)

    @pytest.mark.parametrize("boundary", [_SLICE, 2 * _SLICE])
    def test_a_surrogate_pair_split_by_a_slice_boundary_hashes_as_the_whole(
        self, boundary: int
    ) -> None:
        """A high and a low surrogate side by side are two code points in a str: each slice
        escapes its own, and the joined bytes are the whole text's."""
        text = "x" * (boundary - 1) + "\ud83d\ude00" + "y" * 10
        assert json_string_digest(text) == oracle(text)

    def test_a_lone_surrogate_is_hashed_as_its_json_escape(self) -> None:
        assert json_string_digest(LONE) == hashlib.sha256(b'"\\udcff"').hexdigest()
        assert json_string_digest("a" + LONE * 5000) == oracle("a" + LONE * 5000)

    def test_the_escape_of_a_lone_surrogate_reads_back_as_the_same_text(self) -> None:
        text = "log \udcff\ud800 end"
        assert json.loads(utf8(json.dumps(text, ensure_ascii=False))) == text

    def test_a_lone_surrogate_and_its_escape_spelled_out_hash_differently(self) -> None:
        """The text of six characters ``\\udcff`` is written with an escaped backslash."""
        assert json_string_digest(LONE) != json_string_digest("\\udcff")

    @given(ANY_TEXT)
    def test_the_digest_equals_the_definition_for_any_str(self, text: str) -> None:
        """Any Python str, surrogates included: sliced hashing gives the definition's digest."""
        long = text * (_SLICE // max(1, len(text)) + 1)  # over one slice unless empty
        assert json_string_digest(text) == oracle(text)
        assert json_string_digest(long) == oracle(long)


class TestUtf8:
    @given(st.text())
    def test_text_without_surrogates_is_plain_utf8(self, text: str) -> None:
        """The surrogate rule changes nothing for text UTF-8 can encode."""
        assert utf8(text) == text.encode("utf-8")

    def test_a_lone_surrogate_becomes_its_json_escape(self) -> None:
        assert utf8("a\udcffb\ud800") == b"a\\udcffb\\ud800"


def frozen(value: object) -> object:
    """``value`` with every dict a read-only mapping and every list a tuple (a record's copy)."""
    if isinstance(value, dict):
        return MappingProxyType({key: frozen(item) for key, item in value.items()})
    if isinstance(value, list):
        return tuple(frozen(item) for item in value)
    return value


class TestCanonicalJson:
    def test_keys_are_sorted_without_whitespace_and_non_ascii_is_kept(self) -> None:
        assert canonical_json({"b": [1, 2.5], "a": "é中", "c": None}) == (
            '{"a":"é中","b":[1,2.5],"c":null}'
        )

    @given(JSON_DATA)
    def test_it_is_json_dumps_with_sorted_keys_and_no_whitespace_for_any_data(
        self, value: object
    ) -> None:
        """The definition: ``json.dumps`` sorted, compact, non-ASCII as is, for any JSON data."""
        expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert canonical_json(value) == expected

    @given(JSON_DATA)
    def test_read_only_mappings_and_tuples_write_as_the_dicts_and_lists_they_hold(
        self, value: object
    ) -> None:
        """A record's frozen copy of JSON data writes exactly as the data it was copied from."""
        assert canonical_json(frozen(value)) == canonical_json(value)

    def test_a_number_json_cannot_write_is_refused(self) -> None:
        with pytest.raises(ValueError, match="JSON compliant"):
            canonical_json({"ratio": float("nan")})

    def test_a_value_that_is_not_json_data_is_refused_naming_its_type(self) -> None:
        with pytest.raises(TypeError, match="set is not JSON data"):
            canonical_json({"a": {1, 2}})


class TestIsPlain:
    @pytest.mark.parametrize("text", ["", "[masked]", "é中 𝄞", LONE])
    def test_text_json_writes_as_it_is_is_plain(self, text: str) -> None:
        assert is_plain(text)
        assert json_string(text) == f'"{text}"'

    @pytest.mark.parametrize("text", ['a"b', "a\\b", "a\nb", "\x00", "\x1f"])
    def test_text_json_escapes_is_not(self, text: str) -> None:
        assert not is_plain(text)


class TestJsonDigest:
    @given(ANY_TEXT, st.integers(min_value=0, max_value=8))
    def test_pieces_hash_as_the_text_they_join_to(self, text: str, cut: int) -> None:
        """Hashing in pieces is hashing the whole: the pieces' bytes join to the text's."""
        cut = min(cut, len(text))
        whole = hashlib.sha256(utf8(text)).hexdigest()
        assert json_digest(text) == whole
        assert json_digest(iter((text[:cut], text[cut:]))) == whole
        assert json_digest(list(text)) == whole

    def test_valid_text_is_hashed_as_plain_utf8(self) -> None:
        assert json_digest('{"a":"é"}') == hashlib.sha256('{"a":"é"}'.encode()).hexdigest()

    def test_a_lone_surrogate_is_hashed_as_its_json_escape(self) -> None:
        assert json_digest(f'["{LONE}"]') == hashlib.sha256(b'["\\udcff"]').hexdigest()


class TestCanonicalDigest:
    @given(JSON_DATA)
    def test_it_is_the_digest_of_the_canonical_json(self, value: object) -> None:
        """Any JSON data, surrogates included: the SHA-256 of ``canonical_json`` via ``utf8``."""
        expected = hashlib.sha256(utf8(canonical_json(value))).hexdigest()
        assert canonical_digest(value) == expected
        assert canonical_digest(frozen(value)) == expected


class TestValueDigest:
    @pytest.mark.parametrize(
        "value", ["", "Be careful.", [{"type": "text", "text": "é中"}], {"b": 1, "a": -0.0}]
    )
    def test_it_is_baseaicore_sha256_of_for_values_without_surrogates(self, value: object) -> None:
        assert value_digest(value) == sha256_of(value)

    def test_a_lone_surrogate_is_hashed_as_its_json_escape_where_sha256_of_raises(self) -> None:
        with pytest.raises(UnicodeEncodeError):
            sha256_of("a" + LONE)
        assert value_digest("a" + LONE) == hashlib.sha256(b'"a\\udcff"').hexdigest()
        assert value_digest("a" + LONE) != value_digest("a\\udcff")

    def test_a_value_baseaicore_refuses_is_a_validation_error(self) -> None:
        with pytest.raises(ValidationError):
            value_digest({"a": {1, 2}})


class TestBodyDigest:
    @pytest.mark.parametrize("length", [0, 1, _SLICE - 1, _SLICE, _SLICE + 1, 3 * _SLICE + 7])
    def test_it_is_the_sha256_of_the_raw_text_as_utf8_in_slices(self, length: int) -> None:
        text = (AWKWARD * (length // len(AWKWARD) + 1))[:length]
        assert body_digest(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()

    @given(ANY_TEXT)
    def test_any_str_is_its_surrogatepass_bytes(self, text: str) -> None:
        """Any str, surrogates included, and hashed whole or in slices: its surrogatepass bytes."""
        long = text * (_SLICE // max(1, len(text)) + 1)
        for each in (text, long):
            expected = hashlib.sha256(each.encode("utf-8", "surrogatepass")).hexdigest()
            assert body_digest(each) == expected

    def test_a_lone_surrogate_and_its_escape_spelled_out_hash_differently(self) -> None:
        """A raw body could spell the JSON escape out, so a surrogate is not hashed as it."""
        assert body_digest(LONE) == hashlib.sha256(b"\xed\xb3\xbf").hexdigest()
        assert body_digest(LONE) != body_digest("\\udcff")


class TestGroupIdFor:
    def test_the_01_group_id_of_a_ten_turn_span(self) -> None:
        assert group_id_for(SPAN_IDS) == SPAN_GROUP
        assert "span-" + sha256_of("\0".join(SPAN_IDS))[:16] == SPAN_GROUP

    def test_the_summarizing_policy_names_that_span_so(self) -> None:
        user, assistant, tool = Role.USER, Role.ASSISTANT, Role.TOOL
        turns = (
            TranscriptTurn("u1", user, "question", 10),
            TranscriptTurn("a1", assistant, "call", 10, "c1"),
            TranscriptTurn("t1", tool, "result", 10, "c1"),
            TranscriptTurn("a2", assistant, "thinking", 10),
            TranscriptTurn("a3", assistant, "call", 10, "c2"),
            TranscriptTurn("t2", tool, "result", 10, "c2"),
            TranscriptTurn("a4", assistant, "thinking", 10),
            TranscriptTurn("a5", assistant, "call", 10, "c3"),
            TranscriptTurn("t3", tool, "result", 10, "c3"),
            TranscriptTurn("u2", user, "thanks", 10),
            TranscriptTurn("u3", user, "next", 10),
        )
        plan = SummarizingPolicy("recap").decide(Transcript(turns), CompactionBudget(50, 1))
        (request,) = plan.summarization_requests
        assert request.turn_ids == SPAN_IDS
        assert request.group_id == SPAN_GROUP

    def test_turn_ids_with_lone_surrogates_get_a_group_id(self) -> None:
        ids = ("a\udcff", "b")
        assert group_id_for(ids) == "span-" + oracle("a\udcff\0b")[:16]


class TestNoDigestRaisesOnLoneSurrogates:
    def test_plan_apply_and_hash_over_surrogateescaped_text(self) -> None:
        """Text decoded with surrogateescape (ids, bodies, the label, the prompt id) is
        masked, summarized, hashed and applied without an error, and the hash covers it."""
        body = b"build log \xff\xfe".decode("utf-8", "surrogateescape")
        odd = "\udc80"
        turns = [TranscriptTurn("s" + odd, Role.SYSTEM, "rules", 5)]
        for n in range(6):
            call = f"c{n}{odd}"
            turns.append(TranscriptTurn(f"a{n}{odd}", Role.ASSISTANT, "call", 5, call))
            turns.append(TranscriptTurn(f"t{n}{odd}", Role.TOOL, body * 100, 400, call))
        turns.append(TranscriptTurn("u" + odd, Role.USER, "and now?", 5))
        transcript = Transcript(tuple(turns))
        chain = default_chain(prompt_id="recap" + odd, keep_recent_results=1)
        plan = chain.decide(transcript, CompactionBudget(300, 1))
        assert plan.summarization_requests
        masking = ObservationMaskingPolicy(0, "[gone" + odd + "]")
        masked = masking.decide(transcript, CompactionBudget(2000, 1))
        for each in (plan, masked):
            expected = hashlib.sha256(utf8(each.canonical_json())).hexdigest()
            assert each.plan_hash() == expected
            summaries = {r.group_id: "recap" + odd for r in each.summarization_requests}
            report = CompactionExecutor().apply(transcript, each, summaries).report
            assert report.plan_hash == expected
        stub = next(a.replacement for a in masked.actions if a.replacement is not None)
        assert stub.content.endswith(f"sha256:{oracle(body * 100)})")
