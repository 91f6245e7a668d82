"""The digests a plan carries: 0.1's JSON-string SHA-256, sliced, and never raising.

The oracle here is the definition itself, written the plain way: ``json.dumps(text,
ensure_ascii=False)`` encoded whole, with each lone surrogate as its ``\\udXXX`` escape; for text
without surrogates it is also ``baseaicore.sha256_of(text)``.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from baseaicore import sha256_of
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
from cutctx._core.digest import _SLICE, json_string_digest, utf8
from cutctx._core.values import group_id_for

L_1200 = "d1fd6a834c71465d6eeb3623b9c5a2ac60c49d069ffc469bc131b4ff506e55a2"
SPAN_IDS = ("u1", "a1", "t1", "a2", "a3", "t2", "a4", "a5", "t3", "u2")
SPAN_GROUP = "span-df373641db082650"
# Characters JSON escapes (quote, backslash, control characters), non-ASCII ones and an
# astral one (four UTF-8 bytes).
AWKWARD = '"\\\n\t\x00\x1f\x7fé中𝄞a'
LONE = "\udcff"  # what surrogateescape decoding makes of the byte 0xff


def oracle(text: str) -> str:
    """The definition: the whole JSON string at once, lone surrogates as their JSON escape."""
    encoded = json.dumps(text, ensure_ascii=False).encode("utf-8", "backslashreplace")
    return hashlib.sha256(encoded).hexdigest()


SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, exclude_categories=())
ANY_TEXT = st.text(st.sampled_from(AWKWARD) | SURROGATES | st.characters(exclude_categories=()))


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
