"""Input no provider would send still gets a ``ValidationError``, never a crash from inside.

Values a JSON parser can produce but the formats cannot price (nesting past Python's recursion
limit, integers too long to print, a part whose type is a list) and Python values no parser
produces (a circular dict), in
every format, through ``count_tokens`` and ``compact_messages``; and tool results holding lone
surrogates, which are valid content and are masked like any other.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from baseaicore import ValidationError

from cutctx import ObservationMaskingPolicy, TokenizerEstimator, compact_messages
from cutctx.formats import anthropic, openai_chat, openai_responses

MODULES = [openai_chat, openai_responses, anthropic]


def deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def circular() -> dict[str, Any]:
    part: dict[str, Any] = {"type": "weird"}
    part["self"] = part
    return part


CASES: dict[str, list[Any]] = {
    # Deep enough for every supported Python: 3.13 encodes 5 000 levels, raises at 20 000.
    "nested too deep": [{"role": "user", "content": [{"type": "weird", "v": deep(100_000)}]}],
    "an integer too long to print": [
        {"role": "user", "content": [{"type": "weird", "v": 10**5_000}]}
    ],
    "a role too long to print": [{"role": 10**5_000, "content": "x"}],
    "a circular part": [{"role": "user", "content": [circular()]}],
    "a part whose type is a list": [{"role": "user", "content": [{"type": [], "text": "a"}]}],
}


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.FORMAT)
@pytest.mark.parametrize("case", sorted(CASES))
class TestUnpriceableValues:
    def test_count_tokens_raises_a_validation_error(self, module: Any, case: str) -> None:
        with pytest.raises(ValidationError) as caught:
            module.count_tokens(CASES[case])
        assert "\n" not in str(caught.value)
        assert len(str(caught.value)) < 200

    def test_compact_messages_raises_a_validation_error(self, module: Any, case: str) -> None:
        messages: list[Any] = CASES[case]
        with pytest.raises(ValidationError):
            compact_messages(messages, max_tokens=10, format=module.FORMAT)


def test_a_format_too_long_to_print_is_named_briefly() -> None:
    with pytest.raises(ValidationError, match="got <int>"):
        compact_messages([], max_tokens=1, format=10**5_000)  # type: ignore[arg-type]


class TestLoneSurrogates:
    BODY = "build log \udcff\udc80 (bytes decoded with surrogateescape) " * 40

    def history(self) -> list[dict[str, Any]]:
        call = {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}
        return [
            {"role": "user", "content": "Run the build."},
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": self.BODY},
            {"role": "assistant", "content": "It failed."},
        ]

    @pytest.mark.parametrize(
        "estimator",
        [None, TokenizerEstimator(lambda text: list(text.encode("utf-8")), name="utf-8")],
        ids=["characters", "strict utf-8 tokenizer"],
    )
    def test_a_tool_result_with_lone_surrogates_is_masked(
        self, estimator: TokenizerEstimator | None
    ) -> None:
        done = compact_messages(
            self.history(),
            max_tokens=200,
            format="openai_chat",
            estimator=estimator,
            policy=ObservationMaskingPolicy(0, estimator=estimator),
            protected_recent_turns=1,
        )
        assert done.report.masked_turn_ids == ("m2",)
        stub = done.messages[2]["content"]
        # The digest of the body as a JSON string, each lone surrogate as its \udXXX escape.
        quoted = json.dumps(self.BODY, ensure_ascii=False)
        digest = hashlib.sha256(quoted.encode("utf-8", "backslashreplace")).hexdigest()
        assert stub.endswith(f"sha256:{digest})")
        assert "\udcff" not in stub
