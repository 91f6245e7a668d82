"""Recall and excerpts over generated agent sessions, in every format, with recall on.

A session is a growing history of tool calls whose results are awkward texts (carriage returns,
tabs, non-ASCII, lines that look like elision or hint lines, lines far longer than the cap);
Anthropic results are a string or text blocks. A window with a result cap and recall on
prepares a request at every step. Each sent result is read against its original (known here by
its call id) with the oracle of ``tests/excerpt_cases.py``, and each original is paged back
through ``window.recall`` by the continue hints, never by asking the window what it did.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from baseaicore import sha256_of
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

from cutctx import ContextWindow, TextEstimator, recall
from cutctx.formats import anthropic, openai_chat, openai_responses
from tests.excerpt_cases import lines_of, readings
from tests.recall_pages import pages_of, read_all

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import ModuleType

FormatName = Literal["openai_chat", "anthropic", "openai_responses"]
MODULES: dict[FormatName, ModuleType] = {
    "openai_chat": openai_chat,
    "anthropic": anthropic,
    "openai_responses": openai_responses,
}
SETTINGS = settings(max_examples=40)
"""Each example drives a window through a whole session: fewer examples than the profile's."""
HINT = re.compile(r"\[cutctx_recall: lines (\d+)-(\d+) of (\d+); continue with start_line=(\d+)\]")
STUB = re.compile(
    r"\[tool result masked by cutctx; cutctx_recall reads it back by this sha256\] "
    r"\(original: (\d+) tokens, sha256:([0-9a-f]{64})\)"
)
TASK = "TASK: find the failing line."
# The windows below count with the default; what they send is priced by that same count.
COUNT = TextEstimator()

PIECES = st.text(alphabet="ab \t\r[]:;é中\U0001f600", max_size=40) | st.sampled_from(
    [
        "[cutctx: 3 lines left out (4 tokens), sha256:" + "a" * 64 + "]",
        "[cutctx_recall: lines 1-2 of 9; continue with start_line=3]",
        "[tool result masked by cutctx] (original: 5 tokens, sha256:" + "b" * 64 + ")",
        "x" * 900,
        "",
    ]
)
BODIES = st.builds(
    lambda pieces, end: "\n".join(pieces) + end,
    st.lists(PIECES, max_size=120),
    st.sampled_from(["", "\n"]),
)


@dataclass(frozen=True)
class Result:
    """One tool result: its call id and content (Anthropic: a string or text blocks)."""

    call_id: str
    content: str | tuple[str, ...]

    @property
    def original(self) -> str:
        """The result's text as cutctx reads it (text blocks joined with a line break)."""
        return self.content if isinstance(self.content, str) else "\n".join(self.content)


@dataclass(frozen=True)
class Session:
    """A drawn session and window: the format, each step's result, the window's settings."""

    format: FormatName
    results: tuple[Result, ...]
    notes: tuple[bool, ...]
    max_tokens: int
    cap: float | int
    keep_first: int

    @property
    def cap_tokens(self) -> int:
        """The result cap in tokens: a float is a fraction of ``max_tokens``."""
        if isinstance(self.cap, float):
            return max(1, int(self.cap * self.max_tokens))
        return self.cap

    def window(self) -> ContextWindow:
        return ContextWindow(
            self.format,
            max_tokens=self.max_tokens,
            max_result_tokens=self.cap,
            keep_first=self.keep_first,
            recall=True,
        )

    def histories(self) -> Iterator[list[dict[str, Any]]]:
        """The growing history, one list per step."""
        history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        for step, (result, noted) in enumerate(zip(self.results, self.notes, strict=True)):
            history.extend(messages(self.format, result))
            if noted:
                history.append({"role": "assistant", "content": f"note {step}"})
                history.append({"role": "user", "content": f"go on {step}"})
            yield list(history)


@st.composite
def sessions(draw: st.DrawFn) -> Session:
    fmt: FormatName = draw(st.sampled_from(sorted(MODULES)))
    count = draw(st.integers(min_value=4, max_value=40))
    results = []
    for step in range(count):
        # A tag line first: every original is unique and holds at least one line.
        body = f"[{step}] result\n" + draw(BODIES)
        content: str | tuple[str, ...] = body
        if fmt == "anthropic" and draw(st.booleans()):
            # Two text blocks, neither empty (the API refuses an empty text block).
            cut = draw(st.integers(min_value=1, max_value=len(body) - 1))
            content = (body[:cut], body[cut:])
        results.append(Result(f"call_{step}", content))
    notes = tuple(draw(st.booleans()) for _ in range(count))
    return Session(
        fmt,
        tuple(results),
        notes,
        draw(st.integers(min_value=1000, max_value=5000)),
        draw(st.sampled_from([0.25, 0.1, 0.2, 300])),
        draw(st.integers(min_value=0, max_value=1)),
    )


def messages(fmt: FormatName, result: Result) -> list[dict[str, Any]]:
    """The assistant call and the result's message(s)."""
    if fmt == "openai_chat":
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": result.call_id,
                        "type": "function",
                        "function": {"name": "read", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": result.call_id, "content": result.content},
        ]
    if fmt == "anthropic":
        content: Any = result.content
        if not isinstance(content, str):
            content = [{"type": "text", "text": text} for text in content]
        return [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": result.call_id, "name": "read", "input": {}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": result.call_id, "content": content}
                ],
            },
        ]
    return [
        {"type": "function_call", "call_id": result.call_id, "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": result.call_id, "output": result.content},
    ]


def sent_results(fmt: FormatName, request: list[dict[str, Any]]) -> dict[str, tuple[str, int]]:
    """Each tool result in ``request``, by call id: its text as sent and its price alone."""
    module = MODULES[fmt]
    overhead = module.count_tokens([], estimator=COUNT)
    found: dict[str, tuple[str, int]] = {}
    for message in request:
        if fmt == "openai_chat" and message.get("role") == "tool":
            found[message["tool_call_id"]] = (
                message["content"],
                module.count_tokens([message], estimator=COUNT) - overhead,
            )
        elif fmt == "openai_responses" and message.get("type") == "function_call_output":
            found[message["call_id"]] = (
                message["output"],
                module.count_tokens([message], estimator=COUNT) - overhead,
            )
        elif fmt == "anthropic" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if block.get("type") != "tool_result":
                    continue
                content = block["content"]
                text = (
                    content
                    if isinstance(content, str)
                    else "\n".join(part["text"] for part in content)
                )
                alone = {"role": "user", "content": [block]}
                found[block["tool_use_id"]] = (
                    text,
                    module.count_tokens([alone], estimator=COUNT) - overhead,
                )
    return found


def price_alone(fmt: FormatName, result: Result) -> int:
    """The original result message's price alone."""
    module = MODULES[fmt]
    return int(
        module.count_tokens(messages(fmt, result)[1:], estimator=COUNT)
        - module.count_tokens([], estimator=COUNT)
    )


@dataclass
class Drive:
    """A session driven through its window: the requests and the results as each sent them."""

    session: Session
    window: ContextWindow
    requests: list[list[dict[str, Any]]]
    compacted: list[bool]
    history: list[dict[str, Any]]


def drive(session: Session) -> Drive:
    window = session.window()
    requests, compacted, history = [], [], []
    for history in session.histories():
        before = window.stats.compactions
        requests.append(window.prepare(history))
        compacted.append(window.stats.compactions != before)
    return Drive(session, window, requests, compacted, history)


def kind(original: str, text: str) -> Literal["whole", "excerpt", "stub"]:
    """Say what a sent result is, checking it against its original; raise if it is none."""
    if text == original:
        return "whole"
    stub = STUB.fullmatch(text)
    if stub is not None:
        assert stub.group(2) == sha256_of(original)
        event("a stub sent")
        return "stub"
    found = readings(original, text)
    assert found, f"neither the original, a stub nor an excerpt of it: {text[:200]!r}"
    event("an excerpt sent")
    assert any(said.group(3) == sha256_of(original) for _, _, _, said in found)
    return "excerpt"


@SETTINGS
@given(session=sessions())
def test_paging_recall_over_every_stub_and_excerpt_gives_back_every_original_line_exactly(
    session: Session,
) -> None:
    """Catches a stub or elision line naming a digest the window cannot read back, a page that
    loses, repeats, reorders or edits a line, a wrong continue hint, an elision line whose
    start_line is not the first line left out, and an original forgotten once dropped."""
    done = drive(session)
    originals = {result.call_id: result.original for result in session.results}
    named: dict[str, str] = {}
    for request in done.requests:
        for call_id, (text, _) in sent_results(session.format, request).items():
            original = originals[call_id]
            if kind(original, text) == "whole":
                continue
            named[sha256_of(original)] = original
            for head, cut, _, said in readings(original, text):
                if said.group(3) == sha256_of(original) and not cut:
                    assert said.group(4) == "cutctx_recall"
                    assert said.group(5) == str(head + 1)
                    page = done.window.recall({"sha256": said.group(3), "start_line": head + 1})
                    first = lines_of(original)[head]  # or its start, when over the cap
                    assert page.startswith(first) or first.startswith(page.rpartition("\n")[0])
    note(f"{len(named)} originals named")
    for digest, original in named.items():
        assert read_all(done.window.recall, digest, original) == original
    # Every result the window has seen reads back, the ones never named (or dropped) too.
    for original in originals.values():
        assert read_all(done.window.recall, sha256_of(original), original) == original


@SETTINGS
@given(session=sessions())
def test_every_result_sent_is_whole_within_the_cap_an_excerpt_within_it_or_a_stub(
    session: Session,
) -> None:
    """Catches a result over the cap sent whole, an excerpt priced over the cap by the
    format's own count (framing included) or not a prefix, one elision line and a suffix of
    the original's lines, and a result sent as something else."""
    done = drive(session)
    by_id = {result.call_id: result for result in session.results}
    cap = session.cap_tokens
    for request in done.requests:
        for call_id, (text, price) in sent_results(session.format, request).items():
            result = by_id[call_id]
            sent = kind(result.original, text)
            if sent == "excerpt":
                assert price <= cap, (price, cap)
            if sent == "whole":
                assert price_alone(session.format, result) <= cap or not lines_of(result.original)


@SETTINGS
@given(session=sessions())
def test_a_result_is_sent_one_way_until_masked_then_one_stub_until_dropped_for_good(
    session: Session,
) -> None:
    """Catches an excerpt decided anew (its bytes changing between requests), a stub that
    changes or turns back into the result, a dropped result that comes back, and a step that
    did not re-plan yet changed the messages already sent (a broken prefix)."""
    done = drive(session)
    forms: dict[str, list[str | None]] = {}
    for number, request in enumerate(done.requests):
        sent = sent_results(session.format, request)
        for result in session.results[: number + 1]:
            forms.setdefault(result.call_id, []).append(sent.get(result.call_id, (None, 0))[0])
        if number and not done.compacted[number]:
            previous = done.requests[number - 1]
            assert request[: len(previous)] == previous
    for call_id, seen in forms.items():
        phases = [form for index, form in enumerate(seen) if index == 0 or form != seen[index - 1]]
        note(f"{call_id}: {[None if p is None else p[:40] for p in phases]}")
        if phases[-1] is None:
            event("a result dropped")
            assert None not in phases[:-1], f"{call_id} came back after it was removed"
        held = [phase for phase in phases if phase is not None]
        assert len(held) <= 2, f"{call_id} was sent {len(held)} ways"
        if len(held) == 2:
            assert STUB.fullmatch(held[1]), f"{call_id} changed without being masked"
            assert not STUB.fullmatch(held[0])


@SETTINGS
@given(
    session=sessions(),
    start=st.integers(min_value=-2, max_value=200),
    limit=st.none() | st.integers(min_value=0, max_value=2000),
)
def test_recall_from_the_history_alone_answers_as_the_window_does(
    session: Session, start: int, limit: int | None
) -> None:
    """Catches ``cutctx.recall`` and ``window.recall`` disagreeing on a page, a hint, the clamp
    to the cap or an explanation, for any start line and page size."""
    done = drive(session)
    cap = session.cap_tokens
    for digest in [sha256_of(result.original) for result in session.results] + ["0" * 64]:
        arguments: dict[str, Any] = {"sha256": digest, "start_line": start}
        if limit is not None:
            arguments["max_tokens"] = limit
        alone = recall(done.history, arguments, format=session.format, max_tokens=cap)
        assert alone == done.window.recall(arguments)
        assert alone == done.window.recall(json.dumps(arguments))


ONE_LINE = st.text(
    alphabet=st.sampled_from('{}[]":,ab09+/=é中\U0001f600 \t'), min_size=1, max_size=6_000
) | st.builds(
    lambda unit, times: unit * times,
    st.sampled_from(['{"k":[1,2]}', "QUJD", "é"]),
    st.integers(min_value=1, max_value=4_000),
)


@settings(max_examples=60)
@given(
    fmt=st.sampled_from(sorted(MODULES)),
    body=ONE_LINE,
    end=st.sampled_from(["", "\n"]),
    lines_before=st.integers(min_value=0, max_value=3),
    cap=st.integers(min_value=120, max_value=900),
)
def test_a_one_line_original_pages_at_characters_each_page_within_the_cap_joined_exactly(
    fmt: FormatName, body: str, end: str, lines_before: int, cap: int
) -> None:
    """Catches a long line sent as one page over the cap (minified JSON, base64), a page that
    loses, repeats or edits a character at a page boundary, a continue hint naming the wrong
    start_line/start_char, and a last page that still carries a hint."""
    original = "".join(f"row {n}\n" for n in range(lines_before)) + body + end
    result = Result("call_0", original)
    history = [{"role": "user", "content": TASK}, *messages(fmt, result)]
    made = ContextWindow(fmt, max_tokens=4 * cap, max_result_tokens=cap, recall=True)
    made.prepare(history)
    pieces = pages_of(made.recall, sha256_of(original), original)
    assert "".join(pieces) == original
    module = MODULES[fmt]
    overhead = module.count_tokens([], estimator=COUNT)
    for arguments in page_calls(made.recall, sha256_of(original), original):
        page = made.recall(arguments)
        sent = messages(fmt, Result("call_r", page))[1]
        assert module.count_tokens([sent], estimator=COUNT) - overhead <= cap
    assert recall(history, {"sha256": sha256_of(original)}, format=fmt, max_tokens=cap) == (
        made.recall({"sha256": sha256_of(original)})
    )


def page_calls(
    answer: Callable[[dict[str, Any]], str], digest: str, original: str
) -> list[dict[str, Any]]:
    """The arguments of each call that reads ``original`` through, by the hints."""
    calls: list[dict[str, Any]] = []

    def recorded(arguments: dict[str, Any]) -> str:
        calls.append(dict(arguments))
        return answer(arguments)

    pages_of(recorded, digest, original)
    return calls
