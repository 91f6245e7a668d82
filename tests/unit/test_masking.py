"""ObservationMaskingPolicy: the 0.1 masking rules, with figures computed by hand.

A default stub is the 30-character label, ``" (original: "`` (12), the count's digits,
``" tokens, sha256:"`` (16), 64 hex digits and ``")"`` (1): 123 characters plus the digits. So a
3-digit count gives 126 characters, priced ``ceil(126 / 4) = 32`` tokens by the default estimator;
a 2-digit count gives 125 characters, also 32 tokens.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import pytest
from baseaicore import ValidationError, sha256_of

from cutctx import (
    DEFAULT_PLACEHOLDER,
    Action,
    BudgetUnsatisfiable,
    CharRatioEstimator,
    CompactionBudget,
    CompactionExecutor,
    ObservationMaskingPolicy,
    Role,
    TokenizerEstimator,
    Transcript,
    TranscriptTurn,
)
from tests.golden_cases import assistant, system, tool, user

if TYPE_CHECKING:
    from cutctx import CompactionPlan


def sha(text: str) -> str:
    """The 0.1 stub digest: SHA-256 of ``json.dumps(text, ensure_ascii=False)`` as UTF-8."""
    return hashlib.sha256(json.dumps(text, ensure_ascii=False).encode("utf-8")).hexdigest()


def actions(plan: CompactionPlan) -> dict[str, str]:
    return {action.turn_id: action.action.value for action in plan.actions}


def masked_ids(plan: CompactionPlan) -> list[str]:
    return [a.turn_id for a in plan.actions if a.action is Action.MASK]


class WordCounter:
    """An estimator with no ``name``: plans record its qualified class name."""

    def estimate_tokens(self, text: str) -> int:
        return len(text.split())


class TestObservationMaskingPolicy:
    def test_name_and_version_are_the_0_1_figures(self) -> None:
        policy = ObservationMaskingPolicy()
        assert (policy.name, policy.version) == ("observation_masking", "1.0.0")

    def test_defaults_are_two_recent_results_the_default_label_and_four_chars_per_token(
        self,
    ) -> None:
        policy = ObservationMaskingPolicy()
        assert policy.keep_recent_results == 2
        assert policy.placeholder == DEFAULT_PLACEHOLDER == "[tool result masked by cutctx]"
        assert policy.estimator == CharRatioEstimator(4.0)
        assert (policy.exclude_tools, policy.min_reclaim) == ((), 0)
        assert repr(policy) == (
            "ObservationMaskingPolicy(keep_recent_results=2, "
            "placeholder='[tool result masked by cutctx]', "
            "estimator=CharRatioEstimator(chars_per_token=4.0), "
            "exclude_tools=(), min_reclaim=0)"
        )

    def test_stub_text_is_label_count_and_sha256_of_the_body_as_a_json_string(self) -> None:
        policy = ObservationMaskingPolicy(placeholder="[gone]")
        content = 'caf\u00e9 \u4e2d "log"\n'
        assert policy.stub(content, 77) == f"[gone] (original: 77 tokens, sha256:{sha(content)})"
        # As 0.1 (baseaicore.sha256_of): the quoted, escaped JSON string as UTF-8, not the raw body.
        assert sha(content) == sha256_of(content)
        assert sha(content) != hashlib.sha256(content.encode("utf-8")).hexdigest()

    def test_the_stub_of_1200_ls_carries_the_01_digest(self) -> None:
        digest = "d1fd6a834c71465d6eeb3623b9c5a2ac60c49d069ffc469bc131b4ff506e55a2"
        stub = ObservationMaskingPolicy().stub("L" * 1200, 300)
        assert stub == f"{DEFAULT_PLACEHOLDER} (original: 300 tokens, sha256:{digest})"

    def test_default_stub_of_a_900_token_result_is_126_chars_priced_32_tokens(self) -> None:
        body = "<4 kB of build log>"
        transcript = Transcript(
            (user("u", 10), assistant("a", 10, "c"), tool("t", 900, "c", content=body))
        )
        plan = ObservationMaskingPolicy(keep_recent_results=0).decide(
            transcript, CompactionBudget(100, 0)
        )
        replacement = plan.actions[2].replacement
        assert replacement is not None
        expected = f"[tool result masked by cutctx] (original: 900 tokens, sha256:{sha(body)})"
        assert replacement.content == expected
        assert len(expected) == 126
        assert replacement.token_estimate == 32
        assert plan.tokens_after_estimate == 10 + 10 + 32
        assert plan.budget_unmet is False
        assert plan.estimator_ratio == 4.0

    def test_stub_never_holds_an_excerpt_of_the_original(self) -> None:
        secret = "password=hunter2 token=abc123 " * 20
        transcript = Transcript((tool("t", 500, content=secret), user("u", 5)))
        plan = ObservationMaskingPolicy(keep_recent_results=0).decide(
            transcript, CompactionBudget(50, 1)
        )
        replacement = plan.actions[0].replacement
        assert replacement is not None
        assert "hunter2" not in replacement.content
        assert "password" not in replacement.content
        assert replacement.content.startswith(DEFAULT_PLACEHOLDER + " (original: 500 tokens")

    def test_only_tool_turns_are_masked(self) -> None:
        transcript = Transcript(
            (
                user("u", 900),
                assistant("a", 900, "c"),
                tool("t", 900, "c"),
                assistant("b", 900),
            )
        )
        plan = ObservationMaskingPolicy(keep_recent_results=0).decide(
            transcript, CompactionBudget(10, 0)
        )
        assert actions(plan) == {"u": "keep", "a": "keep", "t": "mask", "b": "keep"}
        # 900 * 3 kept + one 32-token stub, far over 10: masking alone cannot fit, and says so.
        assert plan.tokens_after_estimate == 2700 + 32
        assert plan.budget_unmet is True

    def test_the_last_keep_recent_results_tool_turns_are_never_masked_even_far_over_budget(
        self,
    ) -> None:
        transcript = Transcript(tuple(tool(f"t{k}", 400) for k in range(5)))
        plan = ObservationMaskingPolicy(keep_recent_results=2).decide(
            transcript, CompactionBudget(0, 0)
        )
        assert masked_ids(plan) == ["t0", "t1", "t2"]
        assert plan.tokens_after_estimate == 3 * 32 + 2 * 400
        assert plan.budget_unmet is True

    def test_the_floor_counts_untouchable_tool_turns_too_so_it_never_moves(self) -> None:
        # t2 is pinned. The last two TOOL turns are t1 and t2, pinned or not: only t0 may go.
        # (Counting only the maskable turns would protect t0 and t1 and mask nothing.)
        transcript = Transcript(
            (tool("t0", 400), tool("t1", 400), tool("t2", 400, pinned=True), user("u", 1))
        )
        for max_tokens in (400, 900, 1200, 1201):
            plan = ObservationMaskingPolicy(keep_recent_results=2).decide(
                transcript, CompactionBudget(max_tokens, 0)
            )
            assert set(masked_ids(plan)) <= {"t0"}
        plan = ObservationMaskingPolicy(keep_recent_results=2).decide(
            transcript, CompactionBudget(400, 0)
        )
        assert masked_ids(plan) == ["t0"]

    def test_the_floor_counts_tool_turns_in_the_protected_tail_too(self) -> None:
        transcript = Transcript((tool("t0", 400), tool("t1", 400), user("u", 1), tool("t2", 400)))
        plan = ObservationMaskingPolicy(keep_recent_results=1).decide(
            transcript, CompactionBudget(400, 1)
        )
        # t2 is both protected and the one recent result; t0 and t1 are eligible.
        assert masked_ids(plan) == ["t0", "t1"]

    def test_masks_oldest_first_and_stops_as_soon_as_the_estimate_fits(self) -> None:
        transcript = Transcript((*(tool(f"t{k}", 100) for k in range(4)), user("u", 20)))
        # Total 420. Each mask saves 100 - 32 = 68: one gives 352, two give 284.
        plan = ObservationMaskingPolicy(keep_recent_results=0).decide(
            transcript, CompactionBudget(300, 0)
        )
        assert masked_ids(plan) == ["t0", "t1"]
        assert plan.tokens_after_estimate == 284
        exactly = ObservationMaskingPolicy(keep_recent_results=0).decide(
            transcript, CompactionBudget(352, 0)
        )
        assert masked_ids(exactly) == ["t0"]

    def test_a_transcript_that_fits_is_left_alone_and_records_no_ratio(self) -> None:
        transcript = Transcript((tool("t0", 100), tool("t1", 100), tool("t2", 100)))
        plan = ObservationMaskingPolicy(keep_recent_results=0).decide(
            transcript, CompactionBudget(300, 0)
        )
        assert masked_ids(plan) == []
        assert plan.estimator_ratio is None
        assert plan.tokens_after_estimate == 300

    def test_a_stub_that_would_cost_as_much_as_the_original_is_skipped(self) -> None:
        # Count 32 -> 125 characters -> 32 tokens: not smaller, skipped. Count 33 -> 32 < 33.
        transcript = Transcript((tool("t0", 32), tool("t1", 33), user("u", 1)))
        plan = ObservationMaskingPolicy(keep_recent_results=0).decide(
            transcript, CompactionBudget(0, 0)
        )
        assert masked_ids(plan) == ["t1"]
        assert plan.tokens_after_estimate == 32 + 32 + 1

    def test_never_makes_a_turn_bigger_and_records_no_ratio_when_every_stub_is_skipped(
        self,
    ) -> None:
        transcript = Transcript((tool("t0", 0), tool("t1", 5), tool("t2", 31), user("u", 1)))
        plan = ObservationMaskingPolicy(keep_recent_results=0).decide(
            transcript, CompactionBudget(0, 0)
        )
        assert masked_ids(plan) == []
        assert plan.estimator_ratio is None
        assert plan.budget_unmet is True

    def test_an_already_masked_turn_is_not_masked_again(self) -> None:
        transcript = Transcript((tool("t0", 400), tool("t1", 400), user("u", 1)))
        policy = ObservationMaskingPolicy(keep_recent_results=0)
        first = policy.decide(transcript, CompactionBudget(100, 0))
        view = CompactionExecutor().apply(transcript, first).transcript
        assert [turn.metadata.get("cutctx.kind") for turn in view.turns] == [
            "masked",
            "masked",
            None,
        ]
        # Fed back in, the masked turns are left alone even with a cheaper estimator.
        cheap = ObservationMaskingPolicy(
            keep_recent_results=0, estimator=CharRatioEstimator(1000.0)
        )
        again = cheap.decide(view, CompactionBudget(0, 0))
        assert masked_ids(again) == []
        # A turn that merely claims the kind is skipped too: the metadata is the marker.
        marked = TranscriptTurn(
            "m", tool("m", 400).role, "x" * 1600, 400, metadata={"cutctx.kind": "masked"}
        )
        plan = policy.decide(Transcript((marked, user("u", 1))), CompactionBudget(0, 0))
        assert masked_ids(plan) == []

    def test_a_masked_turn_keeps_id_role_call_and_position_and_gains_the_masked_kind(
        self,
    ) -> None:
        transcript = Transcript(
            (assistant("a", 10, "c"), tool("t", 400, "c"), user("u", 10, pinned=True))
        )
        plan = ObservationMaskingPolicy(keep_recent_results=0).decide(
            transcript, CompactionBudget(60, 0)
        )
        view = CompactionExecutor().apply(transcript, plan).transcript
        masked = view.turns[1]
        assert (masked.turn_id, masked.role, masked.tool_call_id) == ("t", "tool", "c")
        assert dict(masked.metadata) == {"cutctx.kind": "masked"}
        assert masked.token_estimate == 32
        assert view.token_estimate() == plan.tokens_after_estimate == 52
        assert sum(turn.token_estimate for turn in view.turns) == 52

    def test_untouchable_tool_turns_are_never_masked(self) -> None:
        transcript = Transcript(
            (
                system("s", 5),
                tool("pinned", 400, pinned=True),
                tool("free", 400),
                tool("tail", 400),
            )
        )
        plan = ObservationMaskingPolicy(keep_recent_results=0).decide(
            transcript, CompactionBudget(805, 1)
        )
        assert masked_ids(plan) == ["free"]
        assert plan.tokens_after_estimate == 5 + 400 + 32 + 400

    def test_a_custom_ratio_prices_the_stub_and_rides_on_the_plan(self) -> None:
        transcript = Transcript((tool("t", 900), user("u", 1)))
        policy = ObservationMaskingPolicy(keep_recent_results=0, estimator=CharRatioEstimator(2.0))
        plan = policy.decide(transcript, CompactionBudget(100, 0))
        replacement = plan.actions[0].replacement
        assert replacement is not None
        assert replacement.token_estimate == 63  # ceil(126 / 2)
        assert plan.estimator_ratio == 2.0
        assert "estimator_name" not in plan.to_dict()

    @pytest.mark.parametrize(
        ("estimator", "used", "ratio"),
        [
            (None, True, 4.0),
            (None, False, None),
            (CharRatioEstimator(2.5), True, 2.5),
            (CharRatioEstimator(2.5), False, None),
            (TokenizerEstimator(lambda text: [0] * len(text.split()), name="words"), True, None),
            (WordCounter(), True, None),
        ],
        ids=["default used", "default unused", "ratio used", "ratio unused", "named", "other"],
    )
    def test_estimator_ratio_if_used_is_the_character_ratio_only_when_it_priced_a_stub(
        self, estimator: Any, used: bool, ratio: float | None
    ) -> None:
        policy = ObservationMaskingPolicy(estimator=estimator)
        assert policy.estimator_ratio_if_used(used) == ratio

    @pytest.mark.parametrize("max_tokens", [100, 2000])
    def test_estimator_ratio_if_used_is_what_the_plan_records(self, max_tokens: int) -> None:
        transcript = Transcript((tool("t", 900), user("u", 1)))
        policy = ObservationMaskingPolicy(keep_recent_results=0)
        plan = policy.decide(transcript, CompactionBudget(max_tokens, 0))
        used = any(action.action is Action.MASK for action in plan.actions)
        assert used is (max_tokens == 100)
        assert plan.estimator_ratio == policy.estimator_ratio_if_used(used)

    def test_estimator_ratio_if_used_refuses_a_non_bool(self) -> None:
        with pytest.raises(ValidationError, match="estimated_anything"):
            ObservationMaskingPolicy().estimator_ratio_if_used(1)  # type: ignore[arg-type]

    def test_another_estimator_is_recorded_by_name_and_sees_the_whole_stub(self) -> None:
        seen: list[str] = []

        def encode(text: str) -> list[int]:
            seen.append(text)
            return [0] * len(text.split())

        transcript = Transcript((tool("t", 900, content="body"), user("u", 1)))
        estimator = TokenizerEstimator(encode, name="words", per_message=3)
        plan = ObservationMaskingPolicy(keep_recent_results=0, estimator=estimator).decide(
            transcript, CompactionBudget(100, 0)
        )
        stub = f"{DEFAULT_PLACEHOLDER} (original: 900 tokens, sha256:{sha('body')})"
        assert seen == [stub]
        # Nine words ("[tool", "result", "masked", "by", "cutctx]", "(original:", "900",
        # "tokens,", "sha256:...)") plus three for the message.
        assert plan.actions[0].replacement is not None
        assert plan.actions[0].replacement.token_estimate == 12
        assert (plan.estimator_ratio, plan.estimator_name) == (None, "words")

    def test_an_estimator_without_a_name_is_recorded_by_its_qualified_class_name(self) -> None:
        transcript = Transcript((tool("t", 900), user("u", 1)))
        plan = ObservationMaskingPolicy(keep_recent_results=0, estimator=WordCounter()).decide(
            transcript, CompactionBudget(100, 0)
        )
        assert plan.estimator_name == "tests.unit.test_masking.WordCounter"
        assert plan.estimator_ratio is None

    def test_budget_unsatisfiable_names_both_numbers_and_the_untouchable_count(self) -> None:
        transcript = Transcript((system("s", 50), tool("t", 400), user("u", 60, pinned=True)))
        with pytest.raises(BudgetUnsatisfiable) as caught:
            ObservationMaskingPolicy().decide(transcript, CompactionBudget(109, 0))
        error = caught.value
        assert error.code == "COMPACTION_BUDGET_UNSATISFIABLE"
        assert error.details == {
            "untouchable_tokens": 110,
            "max_tokens": 109,
            "untouchable_turn_count": 2,
        }
        # Exactly at the untouchable total is satisfiable (the rule is "strictly greater").
        plan = ObservationMaskingPolicy(keep_recent_results=0).decide(
            transcript, CompactionBudget(110, 0)
        )
        assert plan.budget_unmet is True
        assert masked_ids(plan) == ["t"]

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            ({"keep_recent_results": -1}, "keep_recent_results"),
            ({"keep_recent_results": True}, "keep_recent_results"),
            ({"keep_recent_results": 1.0}, "keep_recent_results"),
            ({"placeholder": ""}, "placeholder"),
            ({"placeholder": "   "}, "placeholder"),
            ({"placeholder": "\t\n"}, "placeholder"),
            ({"placeholder": 3}, "placeholder"),
            ({"estimator": object()}, "estimator"),
        ],
    )
    def test_bad_configuration_raises_a_validation_error_naming_the_field(
        self, arguments: dict[str, Any], field: str
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            ObservationMaskingPolicy(**arguments)
        assert caught.value.details["field"] == f"ObservationMaskingPolicy.{field}"

    def test_decide_refuses_arguments_that_are_not_cutctx_values(self) -> None:
        policy = ObservationMaskingPolicy()
        with pytest.raises(ValidationError):
            policy.decide([], CompactionBudget(1))  # type: ignore[arg-type]
        with pytest.raises(ValidationError):
            policy.decide(Transcript(()), 10)  # type: ignore[arg-type]


@pytest.mark.parametrize("length", [0, 1, 4095, 4096, 4097, 8192, 20_000])
def test_a_body_is_digested_whole_whatever_its_length(length: int) -> None:
    """A long body is hashed a slice at a time (bounded memory); the digest must still be the
    0.1 digest of the whole body, at and around every slice boundary, for non-ASCII and escaped
    characters too."""
    content = ('aé中𝄞"\\\n\x01' * (length // 8 + 1))[:length]
    stub = ObservationMaskingPolicy().stub(content, 99)
    assert stub.endswith(f"sha256:{sha(content)})")


def named(turn: TranscriptTurn, tool_name: str) -> TranscriptTurn:
    """``turn`` recording the tool that produced it, as the formats do."""
    return TranscriptTurn(
        turn.turn_id,
        turn.role,
        turn.content,
        turn.token_estimate,
        turn.tool_call_id,
        turn.pinned,
        {"cutctx.tool_name": tool_name},
    )


def three_results() -> Transcript:
    """610 tokens: results of 200 (memory), 150 (search) and 200 (search), then a question."""
    return Transcript(
        (
            system("s", 10),
            assistant("a1", 10, "c1"),
            named(tool("r1", 200, "c1"), "memory"),
            assistant("a2", 10, "c2"),
            named(tool("r2", 150, "c2"), "search"),
            assistant("a3", 10, "c3"),
            named(tool("r3", 200, "c3"), "search"),
            user("u", 20),
        )
    )


class TestMaskingKnobs:
    """``exclude_tools`` and ``min_reclaim``; each stub of a 3-digit count costs 32 tokens."""

    def test_results_of_an_excluded_tool_are_never_masked(self) -> None:
        policy = ObservationMaskingPolicy(0, exclude_tools=("memory",))
        plan = policy.decide(three_results(), CompactionBudget(100, 1))
        assert masked_ids(plan) == ["r2", "r3"]
        # 610 - 118 - 168 = 324: still over, but memory stays whole.
        assert (plan.tokens_after_estimate, plan.budget_unmet) == (324, True)
        assert policy.exclude_tools == ("memory",)

    def test_a_result_without_a_tool_name_is_not_excluded(self) -> None:
        transcript = Transcript((assistant("a1", 10, "c1"), tool("r1", 200, "c1"), user("u", 5)))
        policy = ObservationMaskingPolicy(0, exclude_tools=("memory",))
        assert masked_ids(policy.decide(transcript, CompactionBudget(100, 1))) == ["r1"]

    def test_min_reclaim_keeps_masking_past_the_fit(self) -> None:
        # Masking r1 alone fits 500 (442) but reclaims only 168 of the 250 asked; r2 adds 118.
        policy = ObservationMaskingPolicy(0, min_reclaim=250)
        plan = policy.decide(three_results(), CompactionBudget(500, 1))
        assert masked_ids(plan) == ["r1", "r2"]
        assert plan.tokens_after_estimate == 610 - 168 - 118
        assert policy.min_reclaim == 250

    def test_min_reclaim_masks_nothing_when_every_eligible_result_gives_less(self) -> None:
        # All three together reclaim 168 + 118 + 168 = 454.
        policy = ObservationMaskingPolicy(0, min_reclaim=455)
        plan = policy.decide(three_results(), CompactionBudget(500, 1))
        assert masked_ids(plan) == []
        assert (plan.tokens_after_estimate, plan.budget_unmet, plan.estimator_ratio) == (
            610,
            True,
            None,
        )
        plan = ObservationMaskingPolicy(0, min_reclaim=454).decide(
            three_results(), CompactionBudget(500, 1)
        )
        assert masked_ids(plan) == ["r1", "r2", "r3"]

    def test_min_reclaim_never_masks_a_transcript_that_fits(self) -> None:
        policy = ObservationMaskingPolicy(0, min_reclaim=100)
        assert masked_ids(policy.decide(three_results(), CompactionBudget(610, 1))) == []

    def test_excluded_results_do_not_count_towards_min_reclaim(self) -> None:
        # Without memory's r1 the eligible give 118 + 168 = 286.
        policy = ObservationMaskingPolicy(0, exclude_tools=["memory"], min_reclaim=300)
        assert masked_ids(policy.decide(three_results(), CompactionBudget(500, 1))) == []

    def test_the_defaults_plan_as_without_the_knobs(self) -> None:
        budget = CompactionBudget(400, 1)
        plain = ObservationMaskingPolicy(0).decide(three_results(), budget)
        knobs = ObservationMaskingPolicy(0, exclude_tools=(), min_reclaim=0).decide(
            three_results(), budget
        )
        assert knobs.to_json() == plain.to_json()
        assert plain.policy_name == "observation_masking"
        assert masked_ids(plain) == ["r1", "r2"]

    def test_the_knobs_are_in_the_repr(self) -> None:
        policy = ObservationMaskingPolicy(exclude_tools=("memory", "shell"), min_reclaim=64)
        assert repr(policy).endswith("exclude_tools=('memory', 'shell'), min_reclaim=64)")

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            ({"exclude_tools": "memory"}, "exclude_tools"),
            ({"exclude_tools": ("memory", "")}, "exclude_tools"),
            ({"exclude_tools": (3,)}, "exclude_tools"),
            ({"min_reclaim": -1}, "min_reclaim"),
            ({"min_reclaim": 1.5}, "min_reclaim"),
        ],
    )
    def test_bad_knobs_raise_a_validation_error_naming_the_field(
        self, arguments: dict[str, Any], field: str
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            ObservationMaskingPolicy(**arguments)
        assert caught.value.details["field"] == f"ObservationMaskingPolicy.{field}"


class TestStubsOfExcerptedTurns:
    """A turn marked as an excerpt is stubbed with its original's figures, read from metadata."""

    @staticmethod
    def excerpted(metadata: dict[str, str]) -> Transcript:
        body = "head\n[cutctx: 9 lines left out (90 tokens), sha256:" + "a" * 64 + "]\ntail\n"
        marks = {"cutctx.kind": "excerpt", **metadata}
        return Transcript((TranscriptTurn("r", Role.TOOL, body, 40, "c", metadata=marks),))

    @pytest.mark.parametrize(
        "estimator", [None, TokenizerEstimator(lambda text: [0] * len(text.split()), name="w")]
    )
    def test_the_stub_names_the_original_estimate_and_digest(
        self, estimator: TokenizerEstimator | None
    ) -> None:
        transcript = self.excerpted(
            {"cutctx.original_tokens": "900", "cutctx.original_sha256": "b" * 64}
        )
        plan = ObservationMaskingPolicy(0, estimator=estimator).decide(
            transcript, CompactionBudget(0, 0)
        )
        stub = plan.actions[0].replacement
        assert stub is not None
        assert stub.content == f"{DEFAULT_PLACEHOLDER} (original: 900 tokens, sha256:{'b' * 64})"

    @pytest.mark.parametrize(
        "metadata",
        [
            {"cutctx.original_tokens": "nine", "cutctx.original_sha256": "b" * 64},
            {"cutctx.original_tokens": "٩٠٠", "cutctx.original_sha256": "b" * 64},
            {"cutctx.original_tokens": "900", "cutctx.original_sha256": "B" * 64},
            {"cutctx.original_tokens": "900", "cutctx.original_sha256": "b" * 63},
            {"cutctx.original_tokens": "900"},
        ],
    )
    def test_malformed_marks_name_the_turn_itself(self, metadata: dict[str, str]) -> None:
        transcript = self.excerpted(metadata)
        plan = ObservationMaskingPolicy(0).decide(transcript, CompactionBudget(0, 0))
        stub = plan.actions[0].replacement
        turn = transcript.turns[0]
        assert stub is not None
        assert stub.content == (
            f"{DEFAULT_PLACEHOLDER} (original: 40 tokens, sha256:{sha256_of(turn.content)})"
        )
