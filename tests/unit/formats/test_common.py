"""``cutctx.formats._common``: what the formats share (image sizes, pricing, the binding)."""

from __future__ import annotations

import base64
import math

import pytest
from baseaicore import ValidationError

from cutctx import (
    CharRatioEstimator,
    CompactionBudget,
    CompactionExecutor,
    DropOldestPolicy,
    TokenEstimator,
)
from cutctx.formats import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, Binding, openai_chat
from cutctx.formats._common import SUMMARY_LABEL, Pricer, image_size, openai_image_tokens
from tests.format_validators import png
from tests.unit.formats.helpers import WORDS


class TestImageSize:
    def test_reads_png_and_gif_headers(self) -> None:
        gif = base64.b64encode(
            b"GIF89a" + (640).to_bytes(2, "little") + (480).to_bytes(2, "little")
        ).decode()
        assert image_size(png(800, 600)) == (800, 600)
        assert image_size(gif) == (640, 480)

    @pytest.mark.parametrize(
        "data",
        ["%%%notbase64", base64.b64encode(b"\xff\xd8\xff\xe0JFIF").decode(), png(0, 10), "A"],
    )
    def test_returns_none_when_no_size_can_be_read(self, data: str) -> None:
        assert image_size(data) is None

    def test_a_non_base64_data_url_is_priced_as_unsized(self) -> None:
        assert openai_image_tokens("data:image/png," + png(10, 10), "high") == 1445
        assert openai_image_tokens(None, None) == 1445
        assert openai_image_tokens("data:image/png;base64," + png(10, 10), "high") == 85 + 170


class TestPricer:
    def test_refuses_an_estimator_that_returns_a_non_count(self) -> None:
        class Bad:
            def estimate_tokens(self, text: str) -> int:
                del text
                return -1

        bad: TokenEstimator = Bad()
        with pytest.raises(ValidationError, match="must return an int"):
            Pricer.of("openai_chat", bad).text("x")

    def test_prices_roles_only_for_chat_with_a_tokenizer(self) -> None:
        assert OPENAI_CHAT.pricer(WORDS).role("user") == 1
        assert ANTHROPIC.pricer(WORDS).role("user") == 0
        assert OPENAI_RESPONSES.pricer(WORDS).role("user") == 0
        assert OPENAI_CHAT.pricer(None).role("user") == 0
        assert Pricer.of("openai_chat", WORDS, roles=True).role("user") == 1

    def test_prices_a_summary_as_the_user_message_it_becomes(self) -> None:
        # framing 3, the role "user" 1 (Chat only), the label's 11 words and the text's 2
        assert OPENAI_CHAT.price_summary("two words", estimator=WORDS) == 3 + 1 + 11 + 2
        assert ANTHROPIC.price_summary("two words", estimator=WORDS) == 3 + 11 + 2
        text = f"{SUMMARY_LABEL}\n\ntwo words"
        chars = CharRatioEstimator()
        assert OPENAI_CHAT.price_summary("two words", estimator=chars) == math.ceil(len(text) / 4)


class TestBinding:
    def test_is_exported_read_only_and_accepts_a_compacted_view(self) -> None:
        messages = [{"role": "user", "content": "hi"}]
        transcript, binding = openai_chat.to_transcript(messages)
        assert isinstance(binding, Binding)
        assert Binding.__module__ == "cutctx.formats"
        with pytest.raises(TypeError):
            binding.parts["m9"] = binding.parts["m0"]  # type: ignore[index]
        plan = DropOldestPolicy().decide(transcript, CompactionBudget(100))
        compacted = CompactionExecutor().apply(transcript, plan)
        assert openai_chat.from_transcript(compacted, binding) == messages
