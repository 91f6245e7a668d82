"""The estimators' own rules: the character-ratio default and the tokenizer wrapper."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from baseaicore import ValidationError

from cutctx import CharRatioEstimator, TokenEstimator, TokenizerEstimator


def spaces_split(text: str) -> list[int]:
    """A toy tokenizer: one token per whitespace-separated word."""
    return [len(word) for word in text.split()]


class TestCharRatioEstimator:
    def test_default_ratio_is_four_characters_per_token(self) -> None:
        assert CharRatioEstimator().chars_per_token == 4.0

    @pytest.mark.parametrize(
        ("text", "expected"),
        [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 400, 100), ("x" * 401, 101)],
    )
    def test_rounds_up_characters_over_four(self, text: str, expected: int) -> None:
        assert CharRatioEstimator().estimate_tokens(text) == expected

    def test_counts_characters_not_bytes(self) -> None:
        # Five characters, fifteen UTF-8 bytes: ceil(5 / 4) = 2, where bytes would give 4.
        assert CharRatioEstimator().estimate_tokens("中中中中中") == 2

    def test_a_fractional_ratio_divides_exactly(self) -> None:
        # ceil(10 / 2.5) = 4 exactly; ceil(11 / 2.5) = ceil(4.4) = 5.
        estimator = CharRatioEstimator(2.5)
        assert estimator.estimate_tokens("x" * 10) == 4
        assert estimator.estimate_tokens("x" * 11) == 5

    def test_an_int_ratio_is_stored_as_a_float(self) -> None:
        ratio = CharRatioEstimator(3).chars_per_token
        assert type(ratio) is float
        assert ratio == 3.0

    @pytest.mark.parametrize(
        "ratio", [0, 0.0, -1.0, math.nan, math.inf, -math.inf, True, False, "4", None]
    )
    def test_bad_ratio_is_refused(self, ratio: Any) -> None:
        with pytest.raises(ValidationError) as caught:
            CharRatioEstimator(ratio)
        assert caught.value.details["field"] == "CharRatioEstimator.chars_per_token"
        assert "\n" not in str(caught.value)
        assert "finite positive" in str(caught.value)  # 0.1's words
        if ratio is None or isinstance(ratio, int | float | str):
            assert caught.value.details["chars_per_token"] is ratio

    def test_is_a_token_estimator_and_frozen(self) -> None:
        estimator = CharRatioEstimator()
        assert isinstance(estimator, TokenEstimator)
        with pytest.raises(dataclasses.FrozenInstanceError):
            estimator.chars_per_token = 2.0  # type: ignore[misc]
        assert not hasattr(estimator, "__dict__")


class TestTokenizerEstimator:
    def test_adds_the_per_message_cost_to_the_encoded_length(self) -> None:
        estimator = TokenizerEstimator(spaces_split, name="words")
        assert estimator.per_message == 3
        assert estimator.estimate_tokens("one two three") == 6
        assert estimator.estimate_tokens("") == 3

    def test_per_message_may_be_zero(self) -> None:
        estimator = TokenizerEstimator(spaces_split, name="words", per_message=0)
        assert estimator.estimate_tokens("a b") == 2

    def test_name_is_keyword_only(self) -> None:
        with pytest.raises(TypeError):
            TokenizerEstimator(spaces_split, "words")  # type: ignore[call-arg]

    @pytest.mark.parametrize(
        ("kwargs", "field"),
        [
            ({"encode": "not callable", "name": "x"}, "TokenizerEstimator.encode"),
            ({"encode": spaces_split, "name": ""}, "TokenizerEstimator.name"),
            ({"encode": spaces_split, "name": 3}, "TokenizerEstimator.name"),
            ({"encode": spaces_split, "name": "x", "per_message": -1}, "per_message"),
            ({"encode": spaces_split, "name": "x", "per_message": True}, "per_message"),
        ],
    )
    def test_bad_argument_is_refused(self, kwargs: dict[str, Any], field: str) -> None:
        with pytest.raises(ValidationError) as caught:
            TokenizerEstimator(**kwargs)
        assert field in caught.value.details["field"]
        assert "\n" not in str(caught.value)

    def test_is_a_token_estimator_and_frozen(self) -> None:
        estimator = TokenizerEstimator(spaces_split, name="words")
        assert isinstance(estimator, TokenEstimator)
        with pytest.raises(dataclasses.FrozenInstanceError):
            estimator.name = "other"  # type: ignore[misc]
