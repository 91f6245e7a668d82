"""Recall and excerpts in the window: ``window.recall_tool``, ``window.recall``,
``cutctx.recall``, and the excerpts a ``ContextWindow`` sends for results over its cap.

The expectations restate docs/agent-loop.md and docs/contract.md ("Excerpts", "Recall"): the
tool's shape in each format, the stub and elision wording, the page and its continue hint; the
originals' digests are ``baseaicore.sha256_of`` of the text as cutctx reads it.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Literal

import pytest
from baseaicore import ValidationError, sha256_of

from cutctx import CharRatioEstimator, ContextWindow, TextEstimator, TokenEstimator, recall
from cutctx._loop.recall import RecallIndex
from cutctx._policies.stubs import INDEX_LABEL
from cutctx.formats import anthropic, openai_chat, openai_responses
from tests.excerpt_cases import ELISION, lines_of, readings
from tests.format_validators import png
from tests.recall_pages import pages_of

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import ModuleType

FormatName = Literal["openai_chat", "anthropic", "openai_responses"]
FORMATS: dict[FormatName, ModuleType] = {
    "openai_chat": openai_chat,
    "anthropic": anthropic,
    "openai_responses": openai_responses,
}
NAMES: list[FormatName] = sorted(FORMATS)
DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
HINT = re.compile(r"\[cutctx_recall: lines (\d+)-(\d+) of (\d+); continue with start_line=(\d+)\]")
STUB = re.compile(
    r"\[tool result masked by cutctx\] \(original: (\d+) tokens, sha256:([0-9a-f]{64})\)"
)
RECALL_STUB = re.compile(
    r"\[tool result masked by cutctx; cutctx_recall reads it back by this sha256\] "
    r"\(original: (\d+) tokens, sha256:([0-9a-f]{64})\)"
)
TASK = "TASK: find the failing line."


def numbered(lines: int, word: str = "row") -> str:
    """``lines`` distinct lines, each ending in a line break."""
    return "".join(f"{word} {n:04d}: value {n * 7 % 13}\n" for n in range(1, lines + 1))


def call(fmt: FormatName, call_id: str, content: Any) -> list[dict[str, Any]]:
    """An assistant message calling one tool, and its result ``content``."""
    if fmt == "openai_chat":
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "read", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": content},
        ]
    if fmt == "anthropic":
        return [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call_id, "name": "read", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call_id, "content": content}],
            },
        ]
    return [
        {"type": "function_call", "call_id": call_id, "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": call_id, "output": content},
    ]


def result_text(fmt: FormatName, message: dict[str, Any]) -> str:
    """The text of a tool-result message as sent (Anthropic: its text blocks, joined)."""
    if fmt == "openai_chat":
        return str(message["content"])
    if fmt == "openai_responses":
        return str(message["output"])
    content = message["content"][0]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(block["text"] for block in content if block["type"] == "text")


def is_result(fmt: FormatName, message: dict[str, Any]) -> bool:
    """Whether ``message`` is a tool result (Anthropic: a user message of one tool_result)."""
    if fmt == "openai_chat":
        return message.get("role") == "tool"
    if fmt == "openai_responses":
        return message.get("type") == "function_call_output"
    content = message.get("content")
    return isinstance(content, list) and bool(content) and content[0]["type"] == "tool_result"


def price(fmt: FormatName, message: dict[str, Any], estimator: TokenEstimator | None = None) -> int:
    """One message's price by the format's ``count_tokens`` (the request's overhead left out)."""
    module = FORMATS[fmt]
    alone = module.count_tokens([message], estimator=estimator)
    return int(alone - module.count_tokens([], estimator=estimator))


def sizes(step: int) -> int:
    """Lines of step ``step``'s result: mostly small, every fifth one large."""
    return 300 if step % 5 == 4 else 12 + step % 7


def session(fmt: FormatName, steps: int) -> Iterator[list[dict[str, Any]]]:
    """Yield a growing agent history: one tool call and its result a step (a new list each)."""
    history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for step in range(steps):
        history.extend(call(fmt, f"call_{step}", numbered(sizes(step), f"s{step}")))
        if step % 6 == 5:
            history.append({"role": "assistant", "content": f"note {step}"})
            history.append({"role": "user", "content": f"go on {step}"})
        yield list(history)


def originals(steps: int) -> dict[str, str]:
    """The results of ``session``, by their digest."""
    texts = [numbered(sizes(step), f"s{step}") for step in range(steps)]
    return {sha256_of(text): text for text in texts}


def window(fmt: FormatName, **options: Any) -> ContextWindow:
    """A small window with recall on (unless told otherwise)."""
    settings: dict[str, Any] = {"max_tokens": 4000, "keep_first": 1, "recall": True}
    settings.update(options)
    return ContextWindow(fmt, **settings)


def run(made: ContextWindow, fmt: FormatName, steps: int) -> list[list[dict[str, Any]]]:
    """Every request of ``session``."""
    return [made.prepare(history) for history in session(fmt, steps)]


def read_all(answer: Any, digest: str) -> str:
    """Page an original from ``start_line=1`` by the hints; return the pages' lines joined."""
    start, pieces = 1, []
    while True:
        made = str(answer({"sha256": digest, "start_line": start}))
        hint = HINT.search(made)
        if hint is None:
            pieces.append(made)
            return "".join(pieces)
        assert made.endswith(hint.group(0))
        pieces.append(made[: hint.start()])
        start = int(hint.group(4))


def schema_of(fmt: FormatName, tool: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of a tool definition's arguments, where ``fmt`` keeps it."""
    if fmt == "openai_chat":
        return dict(tool["function"]["parameters"])
    if fmt == "anthropic":
        return dict(tool["input_schema"])
    return dict(tool["parameters"])


def one_line(text: str) -> bool:
    return "\n" not in text and text.startswith("[cutctx_recall: ") and text.endswith("]")


class TestContextWindowRecallTool:
    @pytest.mark.parametrize("fmt", NAMES)
    def test_is_the_cutctx_recall_function_in_the_formats_shape(self, fmt: FormatName) -> None:
        tool = window(fmt).recall_tool
        assert tool is not None
        if fmt == "openai_chat":
            assert set(tool) == {"type", "function"}
            assert tool["type"] == "function"
            definition = tool["function"]
            assert set(definition) == {"name", "description", "parameters"}
            schema = definition["parameters"]
        elif fmt == "anthropic":
            definition = tool
            assert set(definition) == {"name", "description", "input_schema"}
            schema = definition["input_schema"]
        else:
            definition = tool
            assert set(definition) == {"type", "name", "description", "parameters"}
            assert tool["type"] == "function"
            schema = definition["parameters"]
        assert definition["name"] == "cutctx_recall"
        assert isinstance(definition["description"], str)
        assert definition["description"]
        assert schema["type"] == "object"
        assert schema["required"] == ["sha256"]
        assert set(schema["properties"]) == {"sha256", "start_line", "start_char", "max_tokens"}
        json.dumps(tool)  # plain JSON data, ready for a request

    @pytest.mark.parametrize("fmt", NAMES)
    def test_its_arguments_are_the_digest_a_start_line_and_a_page_size(
        self, fmt: FormatName
    ) -> None:
        tool = window(fmt).recall_tool
        assert tool is not None
        properties = schema_of(fmt, tool)["properties"]
        assert properties["sha256"]["type"] == "string"
        assert properties["start_line"]["type"] == "integer"
        assert properties["start_line"]["minimum"] == 1
        assert properties["start_line"]["default"] == 1
        assert properties["max_tokens"]["type"] == "integer"
        assert all(property_["description"] for property_ in properties.values())

    @pytest.mark.parametrize(
        ("options", "page"),
        [
            ({}, 1000),  # a quarter of 4 000 by default
            ({"max_result_tokens": 300}, 300),
            ({"max_result_tokens": 0.1}, 400),
            ({"max_result_tokens": None}, 2000),
        ],
    )
    def test_max_tokens_defaults_to_the_windows_cap_or_2000_without_one(
        self, options: dict[str, Any], page: int
    ) -> None:
        for fmt in NAMES:
            tool = window(fmt, **options).recall_tool
            assert tool is not None
            assert schema_of(fmt, tool)["properties"]["max_tokens"]["default"] == page

    def test_is_none_with_recall_off(self) -> None:
        assert window("openai_chat", recall=False).recall_tool is None
        assert ContextWindow("anthropic", max_tokens=1000).recall_tool is None


class TestContextWindowRecall:
    def test_a_restored_window_asked_before_it_saw_its_history_says_so(self) -> None:
        made = window("openai_chat")
        text = numbered(400)
        history = [{"role": "user", "content": TASK}, *call("openai_chat", "c", text)]
        made.prepare(history)
        restored = ContextWindow.from_state(json.loads(json.dumps(made.state())))
        first = restored.recall({"sha256": sha256_of(text)})
        assert "call prepare(history) first" in first
        restored.prepare(history)
        assert restored.recall({"sha256": sha256_of(text)}) == made.recall(
            {"sha256": sha256_of(text)}
        )

    @pytest.mark.parametrize("fmt", NAMES)
    def test_every_stub_and_elision_line_reads_back_its_original_exactly(
        self, fmt: FormatName
    ) -> None:
        made = window(fmt)
        known = originals(60)
        named: set[str] = set()
        for request in run(made, fmt, 60):
            named |= set(DIGEST.findall(json.dumps(request)))
        assert named, "the session must mask or excerpt results"
        assert named <= set(known)
        for digest in named:
            assert read_all(made.recall, digest) == known[digest]

    def test_a_page_is_the_originals_lines_from_start_line_with_one_hint_line(self) -> None:
        made = window("openai_chat")
        text = numbered(400)
        made.prepare([{"role": "user", "content": TASK}, *call("openai_chat", "c", text)])
        page = made.recall({"sha256": sha256_of(text), "start_line": 11})
        body, hint = page.rsplit("\n", 1)
        lines = text.splitlines(keepends=True)
        found = HINT.fullmatch(hint)
        assert found is not None
        first, last, count, following = map(int, found.groups())
        assert (first, count, following) == (11, 400, last + 1)
        assert body + "\n" == "".join(lines[10:last])

    def test_the_last_page_has_no_hint(self) -> None:
        made = window("openai_chat")
        text = numbered(400)
        made.prepare([{"role": "user", "content": TASK}, *call("openai_chat", "c", text)])
        assert made.recall({"sha256": sha256_of(text), "start_line": 399}) == "".join(
            text.splitlines(keepends=True)[398:]
        )

    def test_an_elision_lines_start_line_reads_the_first_line_left_out(self) -> None:
        made = window("anthropic")
        text = numbered(400)
        request = made.prepare([{"role": "user", "content": TASK}, *call("anthropic", "c", text)])
        sent = result_text("anthropic", request[-1])
        said = re.search(
            r"sha256:([0-9a-f]{64}); call cutctx_recall with this sha256 and "
            r"start_line=(\d+) to read them\]",
            sent,
        )
        assert said is not None
        start = int(said.group(2))
        head = sent[: sent.index("[cutctx: ")]
        assert head == "".join(text.splitlines(keepends=True)[: start - 1])
        page = made.recall({"sha256": said.group(1), "start_line": start})
        assert page.startswith(text.splitlines(keepends=True)[start - 1])

    def test_the_arguments_may_be_their_json_text_and_the_digest_may_keep_its_prefix(
        self,
    ) -> None:
        made = window("openai_chat")
        text = numbered(400)
        made.prepare([{"role": "user", "content": TASK}, *call("openai_chat", "c", text)])
        wanted = made.recall({"sha256": sha256_of(text)})
        assert made.recall(json.dumps({"sha256": sha256_of(text)})) == wanted
        assert made.recall({"sha256": "sha256:" + sha256_of(text), "start_line": 1}) == wanted

    @pytest.mark.parametrize("fmt", NAMES)
    def test_max_tokens_sizes_the_page_and_a_larger_one_is_clamped_to_the_cap(
        self, fmt: FormatName
    ) -> None:
        made = window(fmt, max_result_tokens=300)
        text = numbered(400)
        history = [{"role": "user", "content": TASK}, *call(fmt, "c", text)]
        made.prepare(history)
        digest = sha256_of(text)
        small = made.recall({"sha256": digest, "max_tokens": 100})
        capped = made.recall({"sha256": digest})
        assert len(small) < len(capped)
        assert made.recall({"sha256": digest, "max_tokens": 100_000}) == capped
        # Sent back as a tool result, a page fits the cap: it is never excerpted again.
        answered = [*history, *call(fmt, "r", capped)]
        request = made.prepare(answered)
        assert result_text(fmt, request[-1]) == capped
        assert price(fmt, request[-1]) <= 300

    @pytest.mark.parametrize(
        ("arguments", "said"),
        [
            ({"sha256": "0" * 64}, "no tool result with sha256"),
            ({}, "sha256"),
            ({"sha256": 7}, "sha256"),
            ({"sha256": ""}, "sha256"),
            ("{not json", "not JSON"),
            ("[1, 2]", "object"),
            (["sha256"], "object"),
            (None, "object"),
            ({"start_line": 1}, "sha256"),
        ],
    )
    def test_a_bad_call_gives_back_a_one_line_explanation(self, arguments: Any, said: str) -> None:
        made = window("openai_chat")
        made.prepare([{"role": "user", "content": TASK}])
        answer = made.recall(arguments)
        assert one_line(answer), answer
        assert said in answer

    @pytest.mark.parametrize(
        ("extra", "said"),
        [
            ({"start_line": 0}, "start_line"),
            ({"start_line": -3}, "start_line"),
            ({"start_line": "2"}, "start_line"),
            ({"start_line": 2.0}, "start_line"),
            ({"start_line": True}, "start_line"),
            ({"start_line": None}, "start_line"),
            ({"start_line": 401}, "past the end"),
            ({"start_line": 10**30}, "past the end"),
            ({"start_line": 10**5000}, "past the end"),
            ({"start_line": -(10**5000)}, "start_line"),
            ({"start_char": 10**5000}, "past the end of line 1"),
            ({"start_char": 0}, "start_char"),
            ({"start_char": "3"}, "start_char"),
            ({"max_tokens": 0}, "max_tokens"),
            ({"max_tokens": "100"}, "max_tokens"),
            ({"max_tokens": False}, "max_tokens"),
        ],
    )
    def test_a_bad_start_line_or_max_tokens_gives_back_a_one_line_explanation(
        self, extra: dict[str, Any], said: str
    ) -> None:
        made = window("anthropic")
        text = numbered(400)
        made.prepare([{"role": "user", "content": TASK}, *call("anthropic", "c", text)])
        answer = made.recall({"sha256": sha256_of(text), **extra})
        assert one_line(answer), answer
        assert said in answer
        assert len(answer) < 200

    @pytest.mark.parametrize("fmt", NAMES)
    def test_a_one_line_original_is_paged_at_characters_within_the_cap_and_joins_exactly(
        self, fmt: FormatName
    ) -> None:
        original = json.dumps(
            [{"id": n, "name": f"item {n}", "tags": ["a", "b"]} for n in range(2_700)],
            separators=(",", ":"),
        )[:107_780]
        assert "\n" not in original
        assert len(original) == 107_780
        made = window(fmt, max_tokens=8_000, max_result_tokens=2_000)
        made.prepare([{"role": "user", "content": TASK}, *call(fmt, "c", original)])
        digest = sha256_of(original)
        pieces = pages_of(made.recall, digest, original)
        assert "".join(pieces) == original
        assert len(pieces) >= 107_780 // 4 // 2_000
        first = made.recall({"sha256": digest})
        assert first.endswith(f", start_char={len(pieces[0]) + 1}]")
        for arguments in ({"sha256": digest}, {"sha256": digest, "start_char": 50_001}):
            page = made.recall(arguments)
            assert price(fmt, call(fmt, "r", page)[1]) <= 2_000

    def test_a_long_line_read_to_its_end_hands_on_to_the_next_line(self) -> None:
        original = "x" * 9_000 + "\n" + "tail\n"
        made = window("openai_chat", max_tokens=4_000, max_result_tokens=1_000)
        made.prepare([{"role": "user", "content": TASK}, *call("openai_chat", "c", original)])
        pieces = pages_of(made.recall, sha256_of(original), original)
        assert "".join(pieces) == original
        assert pieces[-2].endswith("x\n")
        assert pieces[-1] == "tail\n"
        tiny = made.recall({"sha256": sha256_of(original), "max_tokens": 1})
        assert tiny.startswith("x\n[cutctx_recall: line 1 of 2, characters 1-1 of 9001;")

    def test_an_empty_result_recalls_as_empty(self) -> None:
        made = window("openai_chat")
        made.prepare([{"role": "user", "content": TASK}, *call("openai_chat", "c", "")])
        assert made.recall({"sha256": sha256_of("")}) == ""

    def test_with_recall_off_it_says_so_in_one_line(self) -> None:
        made = window("openai_chat", recall=False, estimator=CharRatioEstimator())
        text = numbered(400)
        made.prepare([{"role": "user", "content": TASK}, *call("openai_chat", "c", text)])
        answer = made.recall({"sha256": sha256_of(text)})
        assert one_line(answer)
        assert "recall" in answer

    def test_a_dropped_result_can_still_be_read_back(self) -> None:
        made = window("openai_chat", max_tokens=2000)
        requests = run(made, "openai_chat", 80)
        sent = json.dumps(requests[-1])
        gone = [step for step in range(80) if f'"call_{step}"' not in sent]
        assert gone, "the session must drop results"
        text = numbered(sizes(gone[0]), f"s{gone[0]}")
        assert sha256_of(text) not in sent
        assert read_all(made.recall, sha256_of(text)) == text

    @pytest.mark.parametrize("fmt", NAMES)
    def test_a_dropped_stub_stays_in_a_recall_index_and_opens_by_its_prefix(
        self, fmt: FormatName
    ) -> None:
        """The stubbed exchanges a cut drops are folded into an index the library writes; each
        result it names opens by the first 12 digits of its digest."""
        made = window(fmt, max_tokens=8000)
        requests = run(made, fmt, 160)
        sent = json.dumps(requests[-1])
        assert INDEX_LABEL in sent
        named = re.findall(r"sha256:([0-9a-f]{12})\b", sent)
        known = {digest[:12]: text for digest, text in originals(160).items()}
        indexed = [prefix for prefix in named if prefix in known]
        assert len(indexed) > 10
        for prefix in indexed[:3]:
            assert read_all(made.recall, prefix) == known[prefix]

    @pytest.mark.parametrize("fmt", NAMES)
    def test_a_window_restored_from_its_state_recalls_what_the_original_could(
        self, fmt: FormatName
    ) -> None:
        made = window(fmt)
        histories = list(session(fmt, 40))
        for history in histories[:-1]:
            made.prepare(history)
        restored = ContextWindow.from_state(json.loads(json.dumps(made.state())))
        assert restored.prepare(histories[-1]) == made.prepare(histories[-1])
        for digest in originals(40):
            for start in (1, 5, 150):
                arguments = {"sha256": digest, "start_line": start}
                assert restored.recall(arguments) == made.recall(arguments)

    def test_stubs_and_elision_lines_name_the_tool(self) -> None:
        texts = [
            message["content"]
            for request in run(window("openai_chat"), "openai_chat", 40)
            for message in request
            if message["role"] == "tool"
        ]
        stubs = [text for text in texts if "masked by cutctx" in text]
        assert stubs
        assert all(RECALL_STUB.fullmatch(text) for text in stubs)
        excerpts = [text for text in texts if "[cutctx: " in text]
        assert excerpts
        assert all(
            "; call cutctx_recall with this sha256 and start_line=" in text for text in excerpts
        )

    @pytest.mark.parametrize("fmt", NAMES)
    def test_with_recall_off_a_stub_is_exactly_the_default_stub(self, fmt: FormatName) -> None:
        requests = run(window(fmt, recall=False), fmt, 40)
        known = originals(40)
        stubs = 0
        for request in requests:
            for message in request:
                if not is_result(fmt, message):
                    continue
                text = result_text(fmt, message)
                if "masked by cutctx" not in text:
                    assert "cutctx_recall" not in text
                    continue
                found = STUB.fullmatch(text)
                assert found is not None, text
                assert found.group(2) in known
                stubs += 1
        assert stubs


def page_of(index: RecallIndex, digest: str) -> str:
    """The index's answer for ``digest`` in Chat, pages of 100 tokens."""
    return index.answer(
        {"sha256": digest}, fmt=openai_chat.OPENAI_CHAT, estimator=CharRatioEstimator(), cap=100
    )


class TestRecallIndex:
    def test_a_prefix_of_twelve_digits_or_more_opens_the_one_result_it_begins(self) -> None:
        index = RecallIndex()
        index.texts.update({"ab" * 32: "first\n", "ab" * 6 + "cd" * 26: "second\n"})
        assert page_of(index, "ab" * 6 + "c") == "second\n"
        assert page_of(index, "sha256:" + "ab" * 7) == "first\n"

    def test_an_ambiguous_or_short_prefix_is_explained_in_one_line(self) -> None:
        index = RecallIndex()
        index.texts.update({"ab" * 32: "first\n", "ab" * 6 + "cd" * 26: "second\n"})
        assert "begins 2 digests" in page_of(index, "ab" * 6)
        assert "no tool result" in page_of(index, "ab" * 5)


class TestRecall:
    def test_a_page_of_no_tokens_is_refused(self) -> None:
        text = numbered(20)
        history = [{"role": "user", "content": TASK}, *call("openai_chat", "c", text)]
        with pytest.raises(ValidationError, match="at least 1"):
            recall(history, {"sha256": sha256_of(text)}, format="openai_chat", max_tokens=0)

    @pytest.mark.parametrize("fmt", NAMES)
    def test_answers_from_the_history_as_the_window_does(self, fmt: FormatName) -> None:
        made = window(fmt)
        histories = list(session(fmt, 40))
        for history in histories:
            made.prepare(history)
        for digest in originals(40):
            for arguments in (
                {"sha256": digest},
                {"sha256": digest, "start_line": 7},
                {"sha256": digest, "start_line": 150, "max_tokens": 60},
                {"sha256": digest, "start_line": 0},
            ):
                alone = recall(histories[-1], arguments, format=fmt, max_tokens=1000)
                assert alone == made.recall(arguments)

    def test_pages_default_to_2000_tokens_and_are_clamped_to_max_tokens(self) -> None:
        text = numbered(2000)
        history = [{"role": "user", "content": TASK}, *call("openai_chat", "c", text)]
        digest = sha256_of(text)
        default = recall(history, {"sha256": digest}, format="openai_chat")
        assert recall(history, {"sha256": digest}, format="openai_chat", max_tokens=2000) == (
            default
        )
        assert price("openai_chat", call("openai_chat", "r", default)[1]) <= 2000
        small = recall(history, {"sha256": digest}, format="openai_chat", max_tokens=200)
        larger = {"sha256": digest, "max_tokens": 5000}
        assert recall(history, larger, format="openai_chat", max_tokens=200) == small
        assert (
            read_all(
                lambda arguments: recall(history, arguments, format="openai_chat", max_tokens=200),
                digest,
            )
            == text
        )

    def test_reads_anthropic_text_blocks_joined_with_a_line_break(self) -> None:
        blocks = [{"type": "text", "text": numbered(30, "a")}, {"type": "text", "text": "tail"}]
        history = [{"role": "user", "content": TASK}, *call("anthropic", "c", blocks)]
        original = numbered(30, "a") + "\ntail"
        assert recall(history, {"sha256": sha256_of(original)}, format="anthropic") == original

    @pytest.mark.parametrize("fmt", NAMES)
    def test_reads_the_history_a_tool_sees_ending_with_the_unanswered_recall_call(
        self, fmt: FormatName
    ) -> None:
        text = numbered(40)
        asking = call(fmt, "r", "")[:1]  # the assistant's call, not answered yet
        if fmt == "openai_responses":  # Responses: a reasoning item and two calls
            asking = [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                *asking,
                *call(fmt, "r2", "")[:1],
            ]
        history = [{"role": "user", "content": TASK}, *call(fmt, "c", text), *asking]
        assert recall(history, {"sha256": sha256_of(text)}, format=fmt) == text

    def test_a_history_malformed_before_its_last_call_is_still_refused(self) -> None:
        history = [
            {"role": "user", "content": TASK},
            *call("openai_chat", "c", "x")[:1],
            {"role": "user", "content": "no result in between"},
            *call("openai_chat", "r", "")[:1],
        ]
        with pytest.raises(ValidationError, match="has no tool message"):
            recall(history, {"sha256": sha256_of("x")}, format="openai_chat")

    def test_a_bad_call_gives_back_a_one_line_explanation(self) -> None:
        history = [{"role": "user", "content": TASK}]
        for arguments in ({"sha256": "f" * 64}, {}, "nope", {"sha256": "f" * 64, "start_line": 0}):
            assert one_line(recall(history, arguments, format="openai_chat"))

    def test_bad_messages_a_bad_format_or_max_tokens_are_refused(self) -> None:
        history = [{"role": "user", "content": TASK}]
        with pytest.raises(ValidationError):
            recall(history, {"sha256": "f" * 64}, format="nope")  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="max_tokens"):
            recall(history, {"sha256": "f" * 64}, format="openai_chat", max_tokens=-1)
        with pytest.raises(ValidationError):
            recall([{"role": "tool"}], {"sha256": "f" * 64}, format="openai_chat")


class TestContextWindowExcerpts:
    @pytest.mark.parametrize(
        ("fmt", "content"),
        [
            ("openai_chat", numbered(400)),
            ("anthropic", numbered(400)),
            (
                "anthropic",
                [
                    {"type": "text", "text": numbered(200, "a")},
                    {"type": "text", "text": numbered(200, "b")},
                ],
            ),
            ("openai_responses", numbered(400)),
        ],
    )
    @pytest.mark.parametrize("recall_on", [False, True])
    def test_a_result_over_the_cap_is_a_prefix_one_elision_line_and_a_suffix_within_it(
        self, fmt: FormatName, content: Any, *, recall_on: bool
    ) -> None:
        made = window(fmt, recall=recall_on)
        request = made.prepare([{"role": "user", "content": TASK}, *call(fmt, "c", content)])
        original = (
            content if isinstance(content, str) else "\n".join(block["text"] for block in content)
        )
        sent = request[-1]
        assert price(fmt, sent) <= 1000
        text = result_text(fmt, sent)
        found = readings(original, text)
        assert len(found) == 1
        head, cut, tail, said = found[0]
        assert cut == 0
        assert head > 0
        assert tail > 0
        assert int(said.group(1)) == len(lines_of(original)) - head - tail
        assert said.group(3) == sha256_of(original)
        assert (said.group(4), said.group(5)) == (
            ("cutctx_recall", str(head + 1)) if recall_on else (None, None)
        )
        if fmt == "anthropic" and not isinstance(content, str):
            assert len(sent["content"][0]["content"]) == 1  # one text block

    @pytest.mark.parametrize("where", ["after the text", "before the text", "between two texts"])
    @pytest.mark.parametrize("fmt", ["anthropic", "openai_responses"])
    def test_an_image_stays_beside_an_excerpt_of_the_text_alone(
        self, fmt: FormatName, where: str
    ) -> None:
        """The excerpt is made of the result as read, where the image is a label line
        (``[image]``); the image is sent as it is, after one text part, so the label is not
        sent as text."""
        kind = "text" if fmt == "anthropic" else "input_text"
        image: dict[str, Any] = (
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": png(200, 200)},
            }
            if fmt == "anthropic"
            else {"type": "input_image", "image_url": f"data:image/png;base64,{png(200, 200)}"}
        )
        log: dict[str, Any] = {"type": kind, "text": numbered(400)}
        intro: dict[str, Any] = {"type": kind, "text": "Screenshot of the failing page:"}
        content: list[dict[str, Any]] = {
            "after the text": [log, image],
            "before the text": [image, log],
            "between two texts": [intro, image, log],
        }[where]
        made = window(fmt)
        request = made.prepare([{"role": "user", "content": TASK}, *call(fmt, "c", content)])
        body = request[-1]["content"][0]["content"] if fmt == "anthropic" else request[-1]["output"]
        assert [part["type"] for part in body] == [kind, image["type"]]
        assert body[1] == image
        assert price(fmt, request[-1]) <= 1000
        sent = body[0]["text"]
        said = ELISION.search(sent)
        assert said is not None
        head, tail = sent[: said.start()], sent[said.end() :].removeprefix("\n")
        reading = "\n".join(part["text"] for part in content if part["type"] == kind)
        assert head.endswith("\n")
        assert reading.startswith(head)
        assert tail
        assert reading.endswith(tail)
        assert "[image]" not in sent.splitlines()
        # The digest is the whole reading's, the original recall reads back.
        whole = "\n".join(p["text"] if p["type"] == kind else "[image]" for p in content)
        assert said.group(3) == sha256_of(whole)

    def test_a_single_line_over_the_cap_keeps_its_head_cut_at_a_character(self) -> None:
        text = "x" * 20_000 + "\nlast\n"
        made = window("openai_chat")
        request = made.prepare([{"role": "user", "content": TASK}, *call("openai_chat", "c", text)])
        found = readings(text, request[-1]["content"])
        assert found
        assert found[0][1] > 0
        # Priced as the window prices it: four characters a token counts a run of one letter
        # at twice cl100k's count (which packs eight x's in a token), the window's count does not.
        assert price("openai_chat", request[-1], TextEstimator()) <= 1000

    @pytest.mark.parametrize("fmt", NAMES)
    def test_an_excerpt_is_decided_once_and_sent_the_same_on_every_later_step(
        self, fmt: FormatName
    ) -> None:
        made = window(fmt, max_tokens=20_000)
        history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        history.extend(call(fmt, "big", numbered(1200)))
        first = made.prepare(history)
        excerpt = first[-1]
        assert "[cutctx: " in result_text(fmt, excerpt)
        previous = first
        for step in range(20):
            history.extend(call(fmt, f"c{step}", numbered(5, f"s{step}")))
            request = made.prepare(history)
            assert request[: len(previous)] == previous
            assert made.stats.first_changed_index == len(previous)
            assert request[len(first) - 1] == excerpt
            previous = request
        assert made.stats.compactions == 0

    def test_an_excerpting_step_records_a_plan_and_counts_no_compaction(self) -> None:
        made = window("openai_chat")
        history = [{"role": "user", "content": TASK}, *call("openai_chat", "c", numbered(400))]
        made.prepare(history)
        assert made.stats.compactions == 0
        assert made.stats.requests == 1
        assert made.last is not None
        excerpted = made.last.report.excerpted_turn_ids
        assert len(excerpted) == 1
        assert made.last.report.to_dict()["excerpted_turn_ids"] == list(excerpted)
        assert made.last.messages == made.prepare(history)

    def test_a_step_without_an_excerpt_records_no_plan(self) -> None:
        made = window("openai_chat")
        made.prepare([{"role": "user", "content": TASK}, *call("openai_chat", "c", "small")])
        assert made.last is None

    def test_an_excerpted_result_masked_later_names_the_originals_digest_and_tokens(
        self,
    ) -> None:
        made = window("openai_chat", recall=False, estimator=CharRatioEstimator())
        text = numbered(400)
        history: list[dict[str, Any]] = [
            {"role": "user", "content": TASK},
            *call("openai_chat", "big", text),
        ]
        made.prepare(history)
        chars = CharRatioEstimator()  # the window's estimator
        whole = price("openai_chat", call("openai_chat", "big", text)[1], chars)
        for step in range(40):
            history.extend(call("openai_chat", f"c{step}", numbered(30, f"s{step}")))
            request = made.prepare(history)
            big = [m for m in request if m.get("tool_call_id") == "big"]
            if big and "masked by cutctx" in big[0]["content"]:
                found = STUB.fullmatch(big[0]["content"])
                assert found is not None
                assert found.group(2) == sha256_of(text)
                assert int(found.group(1)) == whole
                return
        pytest.fail("the excerpted result was never masked")

    def test_without_a_cap_a_result_over_a_quarter_is_sent_whole(self) -> None:
        made = window("openai_chat", max_result_tokens=None)
        text = numbered(150)
        request = made.prepare([{"role": "user", "content": TASK}, *call("openai_chat", "c", text)])
        assert request[-1]["content"] == text

    def test_a_bad_cap_is_refused_naming_it(self) -> None:
        for cap in (0, 5000, 1.5, "a", True):
            with pytest.raises(ValidationError, match="max_result_tokens"):
                window("openai_chat", max_result_tokens=cap)
