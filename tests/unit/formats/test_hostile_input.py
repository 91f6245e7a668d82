"""Input no provider would send still gets a ``ValidationError``, never a crash from inside.

Values a JSON parser can produce but the formats cannot price (nesting past Python's recursion
limit, integers too long to print, a part whose type is a list) and Python values no parser
produces (a circular dict), in
every format, through ``count_tokens`` and ``compact_messages``; and tool results holding lone
surrogates, which are valid content and are masked like any other. Blocks that hold blocks
(an Anthropic tool result, document or search result; a Bedrock ``toolResult``) hold none the
provider refuses there, so content built to hold itself, or nested thousands of blocks deep, is
refused by name rather than recursed into. A window refuses a message its state could not carry
(one that holds itself, or nested past ``MAX_DEPTH``) and stays as it was.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest
from baseaicore import ValidationError

from cutctx import ContextWindow, ObservationMaskingPolicy, TokenizerEstimator, compact_messages
from cutctx._loop.jsondata import MAX_DEPTH
from cutctx.formats import anthropic, bedrock_converse, openai_chat, openai_responses, resolve

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

    def test_the_error_names_the_message(self, module: Any, case: str) -> None:
        with pytest.raises(ValidationError) as caught:
            module.count_tokens(CASES[case])
        assert caught.value.details["index"] == 0
        assert str(caught.value).startswith(f"{module.FORMAT}: messages[0]: ")

    def test_compact_messages_raises_a_validation_error(self, module: Any, case: str) -> None:
        messages: list[Any] = CASES[case]
        with pytest.raises(ValidationError):
            compact_messages(messages, max_tokens=10, format=module.FORMAT)


def holding_itself(block: dict[str, Any], key: str) -> dict[str, Any]:
    """Return ``block`` with itself appended to the list under ``key`` (in the dict at its end)."""
    inner: Any = block
    *path, last = key.split(".")
    for name in path:
        inner = inner[name]
    inner[last].append(block)
    return block


def nested(depth: int) -> dict[str, Any]:
    """Return a tool result ``depth`` tool results deep, a text at its heart."""
    block: dict[str, Any] = {"type": "text", "text": "x"}
    for _ in range(depth):
        block = {"type": "tool_result", "tool_use_id": "t1", "content": [block]}
    return block


ANTHROPIC_USE = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
}
BEDROCK_USE = {
    "role": "assistant",
    "content": [{"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}}],
}

# Each: the format, the history, and the block the error names.
NESTED: dict[str, tuple[str, list[Any], str]] = {
    "an anthropic tool_result holding itself": (
        "anthropic",
        [
            {"role": "user", "content": "Go."},
            ANTHROPIC_USE,
            {
                "role": "user",
                "content": [
                    holding_itself(
                        {"type": "tool_result", "tool_use_id": "t1", "content": []}, "content"
                    )
                ],
            },
        ],
        "a tool_result block cannot hold a tool_result block",
    ),
    "an anthropic tool_result 5 000 deep": (
        "anthropic",
        [
            {"role": "user", "content": "Go."},
            ANTHROPIC_USE,
            {"role": "user", "content": [nested(5_000)]},
        ],
        "a tool_result block cannot hold a tool_result block",
    ),
    "an anthropic document holding itself": (
        "anthropic",
        [
            {
                "role": "user",
                "content": [
                    holding_itself(
                        {"type": "document", "source": {"type": "content", "content": []}},
                        "source.content",
                    )
                ],
            }
        ],
        "content[0].source.content[0]: a document block cannot hold a document block",
    ),
    "an anthropic search_result holding itself": (
        "anthropic",
        [
            {
                "role": "user",
                "content": [
                    holding_itself(
                        {"type": "search_result", "source": "s", "title": "t", "content": []},
                        "content",
                    )
                ],
            }
        ],
        "a search_result block cannot hold a search_result block",
    ),
    "a bedrock toolResult holding itself": (
        "bedrock_converse",
        [
            {"role": "user", "content": [{"text": "Go."}]},
            BEDROCK_USE,
            {
                "role": "user",
                "content": [
                    holding_itself(
                        {"toolResult": {"toolUseId": "t1", "content": []}}, "toolResult.content"
                    )
                ],
            },
        ],
        "a toolResult cannot hold a toolResult",
    ),
}


@pytest.mark.parametrize("case", sorted(NESTED))
def test_a_block_nested_where_the_provider_refuses_it_is_refused_by_name(case: str) -> None:
    fmt, messages, named = NESTED[case]
    with pytest.raises(ValidationError, match=re.escape(named)):
        resolve(fmt).count_tokens(messages)
    with pytest.raises(ValidationError, match=re.escape(named)):
        compact_messages(messages, max_tokens=10, format=resolve(fmt))
    with pytest.raises(ValidationError, match=re.escape(named)):
        ContextWindow(resolve(fmt), max_tokens=10_000).prepare(messages)


def test_a_block_the_provider_allows_inside_another_still_reads() -> None:
    """A tool result holding a document of text blocks: read, and its text priced."""

    def history(text: str) -> list[dict[str, Any]]:
        source = {"type": "content", "content": [{"type": "text", "text": text}]}
        document = {"type": "document", "source": source}
        result = {"type": "tool_result", "tool_use_id": "t1", "content": [document]}
        return [
            {"role": "user", "content": "Go."},
            ANTHROPIC_USE,
            {"role": "user", "content": [result]},
        ]

    short, long = history("page"), history("page " * 400)
    assert anthropic.count_tokens(long) > anthropic.count_tokens(short) + 300
    assert compact_messages(short, max_tokens=10_000, format="anthropic").messages == short


def deep_message(module: Any, depth: int) -> dict[str, Any]:
    message = {"role": "user", "content": "Hi."}
    extra: Any = "x"
    for _ in range(depth - 1):  # the message itself is the first level
        extra = [extra]
    message["extra"] = extra
    return message if module is not bedrock_converse else {**message, "content": [{"text": "Hi."}]}


def holding_message(module: Any) -> dict[str, Any]:
    message = deep_message(module, 2)
    message["extra"].append(message)
    return message


WINDOW_MODULES = [openai_chat, openai_responses, anthropic, bedrock_converse]


@pytest.mark.parametrize("module", WINDOW_MODULES, ids=lambda module: module.FORMAT)
@pytest.mark.parametrize("case", ["holding itself", "nested past MAX_DEPTH"])
def test_a_window_refuses_a_message_its_state_cannot_carry_and_stays_as_it_was(
    module: Any, case: str
) -> None:
    """Refused at ``prepare`` with a short message naming it (not a hang, not a failing
    ``state()``), and the window goes on as one that never saw it."""
    bad = (
        holding_message(module) if case == "holding itself" else deep_message(module, MAX_DEPTH + 1)
    )
    good = deep_message(module, 3)
    reply = (
        {"role": "assistant", "content": [{"text": "Hello."}]}
        if module is bedrock_converse
        else {"role": "assistant", "content": "Hello."}
    )
    window, fresh = (
        ContextWindow(module.FORMAT, max_tokens=10_000),
        ContextWindow(module.FORMAT, max_tokens=10_000),
    )
    window.prepare([good])
    fresh.prepare([good])
    with pytest.raises(ValidationError) as caught:
        window.prepare([good, reply, bad])
    text = str(caught.value)
    assert text.startswith("ContextWindow: messages[2]['extra']")
    assert (
        "holds itself" if case == "holding itself" else f"deeper than {MAX_DEPTH} levels"
    ) in text
    assert len(text) < 300
    assert window.state() == fresh.state()


@pytest.mark.parametrize("module", WINDOW_MODULES, ids=lambda module: module.FORMAT)
def test_a_message_nested_to_max_depth_has_a_state_that_restores(module: Any) -> None:
    history = [deep_message(module, MAX_DEPTH)]
    window = ContextWindow(module.FORMAT, max_tokens=10_000)
    request = window.prepare(history)
    restored = ContextWindow.from_state(json.loads(json.dumps(window.state())))
    assert restored.prepare(history) == request


def test_a_value_shared_by_two_branches_is_not_a_cycle() -> None:
    shared = {"k": [1, 2]}
    message = {"role": "user", "content": "Hi.", "a": shared, "b": [shared, shared]}
    window = ContextWindow("openai_chat", max_tokens=10_000)
    assert window.prepare([message]) == [message]
    json.dumps(window.state())


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


def _gemini(signature: object) -> list[Any]:
    return [
        {"role": "user", "parts": [{"text": "Go."}]},
        {"role": "model", "parts": [{"text": "Done.", "thought_signature": signature}]},
        {"role": "user", "parts": [{"text": "Thanks."}]},
    ]


_CONVERSE_USER = {"role": "user", "content": [{"text": "Go."}]}
_CONVERSE_REPLY = {"role": "assistant", "content": [{"text": "Done."}]}

# Each: the format, the history, the index the error names and words it says.
REFUSED_EVERYWHERE: dict[str, tuple[str, list[Any], int, str]] = {
    "a converse message that is a string": (
        "bedrock_converse",
        [_CONVERSE_USER, _CONVERSE_REPLY, "Thanks."],
        2,
        "the message must be an object, got str",
    ),
    "a converse message that is a list": (
        "bedrock_converse",
        [_CONVERSE_USER, _CONVERSE_REPLY, [{"text": "Thanks."}]],
        2,
        "the message must be an object, got list",
    ),
    "a converse message that is None": (
        "bedrock_converse",
        [_CONVERSE_USER, None],
        1,
        "the message must be an object, got NoneType",
    ),
    "a converse image whose source is not an object": (
        "bedrock_converse",
        [{"role": "user", "content": [{"image": {"format": "png", "source": "x"}}]}],
        0,
        "content[0].image.source must be an object",
    ),
    "a converse video that is not an object": (
        "bedrock_converse",
        [{"role": "user", "content": [{"text": "Go."}, {"video": "x"}]}],
        0,
        "content[1].video must be an object",
    ),
    "a converse cache point that is not an object": (
        "bedrock_converse",
        [{"role": "user", "content": [{"text": "Go."}, {"cachePoint": "default"}]}],
        0,
        "content[1].cachePoint must be an object",
    ),
    "a gemini thought signature that is a number": (
        "gemini",
        _gemini(12345),
        1,
        "thought_signature must be bytes or base64 text, got int",
    ),
    "a gemini thought signature that is a list": (
        "gemini",
        _gemini(["c2ln"]),
        1,
        "thought_signature must be bytes or base64 text, got list",
    ),
    "a gemini thought signature that is not base64": (
        "gemini",
        _gemini("not base64 at all!"),
        1,
        "thought_signature must be bytes or base64 text, got text that is not base64",
    ),
    "a gemini thought signature one character past a whole group": (
        "gemini",
        _gemini("c2lnbmF0dXJl" + "x"),
        1,
        "got text that is not base64",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED_EVERYWHERE))
class TestRefusedEverywhere:
    """The one-line error naming the index, from every entry point, the history untouched."""

    def check(self, case: str, run: Any) -> None:
        fmt, history, index, words = REFUSED_EVERYWHERE[case]
        before = repr(history)
        with pytest.raises(ValidationError, match=re.escape(words)) as caught:
            run(fmt, history)
        assert caught.value.details["index"] == index
        assert str(caught.value).startswith(f"{fmt}: messages[{index}]: ")
        assert "\n" not in str(caught.value)
        assert repr(history) == before

    def test_to_transcript(self, case: str) -> None:
        self.check(case, lambda fmt, history: resolve(fmt).to_transcript(history))

    def test_count_tokens(self, case: str) -> None:
        self.check(case, lambda fmt, history: resolve(fmt).count_tokens(history))

    def test_compact_messages(self, case: str) -> None:
        self.check(
            case, lambda fmt, history: compact_messages(history, max_tokens=10_000, format=fmt)
        )

    def test_a_window_at_once_and_step_by_step(self, case: str) -> None:
        def run(name: str, history: list[Any]) -> None:
            fmt = resolve(name)
            fresh = ContextWindow(fmt, max_tokens=10_000)
            with pytest.raises(ValidationError):
                fresh.prepare(history)
            window = ContextWindow(fmt, max_tokens=10_000)
            index = REFUSED_EVERYWHERE[case][2]
            if index:
                window.prepare(history[:index])
            window.prepare(history)

        self.check(case, run)


@pytest.mark.parametrize(
    "signature",
    [
        b"\x00\xffsig",
        "CiQBjz1rX2k=",  # the standard alphabet, padded
        "CiQBjz1rX2k",  # unpadded
        "-_-_",  # the URL-safe alphabet (pydantic's JSON mode)
        "",
    ],
)
def test_a_gemini_thought_signature_as_bytes_or_base64_text_is_read(signature: object) -> None:
    transcript, _ = resolve("gemini").to_transcript(_gemini(signature))
    assert len(transcript.turns) == 3
