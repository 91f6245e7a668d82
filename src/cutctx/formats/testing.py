"""The conformance kit for a ``Format``: run ``check_format`` in your format's own tests.

``check_format(fmt, histories)`` holds a format to the contract the window, ``compact_messages``
and ``recall`` rely on, over histories you give (valid ones, as your provider accepts them):

- **chunk invariance**: the history read in any two chunks, and one message at a time, with the
  reader's state through JSON between chunks, gives the turns, parts and messages sent that
  reading it whole gives;
- **the reader's state** is JSON data, and ``setstate(getstate())`` continues the same reading;
- **head turns** (request-level ``system=``) are in the binding with ``Part.index`` ``None``,
  pinned ``SYSTEM`` turns, and never rendered;
- **rendering**: a view that keeps everything renders the messages sent, the caller's own objects
  for unmarked ones, one price per message; what any view's rendered request counts to
  (``count_tokens``) is no more than the view's estimate (which holds ``request_overhead`` as
  the transcript's ``request_tokens``);
- **summaries**: a summary is rendered with ``summary_text(text)`` (``SUMMARY_LABEL`` first) and
  priced by ``price_summary``: a request of it alone counts that beyond an empty request;
- **masking and excerpts**: a masked or excerpted tool result renders its stub or excerpt, and
  the rendered request reads back (``to_transcript``) without an error;
- **pairing**: every tool result (a ``TOOL`` turn) shares its ``tool_call_id`` with a turn
  before it that is not a result (its call), and a request rendered from plans that drop the
  oldest exchanges (stopping after each turn in turn) reads back without an error
  (every kept call still answered, as the format's reader checks) and paired so;
- **the caller's objects** are never changed.

It raises ``FormatCheckFailed`` (an ``AssertionError``) listing every problem it found.

>>> from cutctx.formats import OPENAI_CHAT
>>> check_format(OPENAI_CHAT, [[{"role": "user", "content": "hi"}]])

.. versionadded:: 0.1.1
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from baseaicore import ValidationError

from cutctx._core.estimators import CharRatioEstimator
from cutctx._core.executor import CompactionExecutor
from cutctx._core.values import Action, CompactionBudget, Role, Transcript
from cutctx._policies.drop import DropOldestPolicy
from cutctx._policies.masking import ObservationMaskingPolicy
from cutctx._policies.summarizing import SummarizingPolicy
from cutctx.formats._common import summary_text
from cutctx.formats._format import hooks_of

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from cutctx._core.protocols import TokenEstimator
    from cutctx.formats._format import Format
    from cutctx.formats._reader import Scanned

__all__ = ["FormatCheckFailed", "check_format"]

_SUMMARY = "The user asked for a green build; the agent ran the tests twice."
_LIMIT = 12  # problems listed in the message (all of them in ``problems``)


class FormatCheckFailed(AssertionError):
    """A format broke the contract: ``problems`` lists what ``check_format`` found.

    .. versionadded:: 0.1.1
    """

    def __init__(self, name: str, problems: list[str]) -> None:
        shown = "; ".join(problems[:_LIMIT]) + ("; ..." if len(problems) > _LIMIT else "")
        super().__init__(f"format {name!r} breaks the Format contract: {shown}")
        self.problems = problems


def check_format(
    fmt: Format[Any],
    histories: Sequence[Sequence[Any]],
    *,
    system: object = None,
    estimator: TokenEstimator | None = None,
) -> None:
    """Check ``fmt`` against the ``Format`` contract over ``histories`` (each a valid history).

    ``system`` is request-level ``system=`` for the formats that take one; ``estimator`` prices
    (the character default when ``None``).

    Raises:
        FormatCheckFailed: listing every problem found, each naming the history's number.
    """
    chosen = estimator if estimator is not None else CharRatioEstimator()
    problems: list[str] = []
    for number, history in enumerate(histories):
        where = f"histories[{number}]"
        before = _snapshot(history)
        try:
            _check_one(fmt, list(history), system, chosen, problems, where)
        except (ValidationError, AssertionError) as error:
            problems.append(f"{where}: {type(error).__name__}: {error}")
        except Exception as error:  # noqa: BLE001 - a broken format may raise anything: report it
            problems.append(f"{where}: raised {type(error).__name__}: {error}")
        if _snapshot(history) != before:
            problems.append(f"{where}: the caller's messages were changed")
    if problems:
        raise FormatCheckFailed(fmt.name, problems)


def _snapshot(history: Sequence[Any]) -> str:
    """Return the caller's messages as text, to see whether anything changed them."""
    return json.dumps([_data(message) for message in history], sort_keys=True, default=repr)


def _data(message: object) -> object:
    dump = getattr(message, "model_dump", None)
    if callable(dump):
        return dump()
    if hasattr(message, "__dataclass_fields__"):
        return repr(message)
    return message


def _check_one(  # noqa: PLR0917 - one private call site
    fmt: Format[Any],
    history: list[Any],
    system: object,
    estimator: TokenEstimator,
    problems: list[str],
    where: str,
) -> None:
    def problem(text: str) -> None:
        problems.append(f"{where}: {text}")

    whole = fmt.reader(estimator=estimator).read(history, final=True)
    _check_chunks(fmt, history, estimator, whole, problem)
    transcript, binding = fmt.to_transcript(history, estimator=estimator, system=system)
    _check_head(fmt, transcript, binding.parts, system, estimator, problem)
    kept = fmt.render(transcript, binding)
    if len(kept.costs) != len(kept.messages):
        problem(f"render gave {len(kept.costs)} prices for {len(kept.messages)} messages")
    if len(kept.messages) != len(history):
        problem(f"a view that keeps everything rendered {len(kept.messages)} of {len(history)}")
    else:
        for index, (out, given) in enumerate(zip(kept.messages, history, strict=True)):
            if out is not given and out is not whole.originals[index]:
                problem(f"messages[{index}] kept is not the caller's object")
    _check_counted(fmt, transcript, kept.messages, system, estimator, "keeping all", problem)
    _check_summary(fmt, transcript, binding, system, estimator, problem)
    _check_masked(fmt, transcript, binding, system, estimator, problem)
    _check_pairs(transcript, "as read", problem)
    _check_dropped(fmt, transcript, binding, system, estimator, problem)


def _check_chunks(
    fmt: Format[Any],
    history: list[Any],
    estimator: TokenEstimator,
    whole: Scanned[Any],
    problem: Callable[[str], None],
) -> None:
    expected = (whole.turns, dict(whole.parts), whole.sent)
    splits = [[cut] for cut in range(1, len(history))]
    splits.append(list(range(1, len(history))))
    for cuts in splits:
        try:
            got = _chunked(fmt, history, estimator, cuts)
        except ValidationError as error:
            problem(
                f"read in chunks cut at {cuts[:6]} it is refused ({error}), read whole it is not"
            )
            return
        if got is None:
            problem("the reader's state is not JSON data")
            return
        if got != expected:
            problem(f"read in chunks cut at {cuts[:6]} it gives other turns than read whole")
            return


def _chunked(
    fmt: Format[Any], history: list[Any], estimator: TokenEstimator, cuts: list[int]
) -> tuple[Any, ...] | None:
    """Read ``history`` cut at ``cuts``, the state through JSON (``None``: it is not JSON)."""
    bounds = [0, *cuts, len(history)]
    turns: list[Any] = []
    parts: dict[str, Any] = {}
    sent: list[Any] = []
    state: Any = None
    left: list[Any] = []
    for number in range(len(bounds) - 1):
        reader = fmt.reader(estimator=estimator)
        if state is not None:
            try:
                text = json.dumps(state)
            except (TypeError, ValueError):
                return None
            reader.setstate(json.loads(text))
        chunk = [*left, *history[bounds[number] : bounds[number + 1]]]
        read = reader.read(chunk, final=number == len(bounds) - 2)
        left = chunk[len(read.sent) :]
        turns.extend(read.turns)
        parts.update(read.parts)
        sent.extend(read.sent)
        state = reader.getstate()
    return (tuple(turns), parts, tuple(sent))


def _check_head(  # noqa: PLR0917 - one private call site
    fmt: Format[Any],
    transcript: Transcript,
    parts: Any,  # noqa: ANN401 - the binding's parts
    system: object,
    estimator: TokenEstimator,
    problem: Callable[[str], None],
) -> None:
    head = fmt.head(system, estimator=estimator)
    if transcript.turns[: len(head)] != head:
        problem("the transcript does not open with the head turns")
    for turn in head:
        part = parts.get(turn.turn_id)
        if part is None or part.index is not None:
            problem(f"head turn {turn.turn_id!r} is not in the binding with index None")
        if turn.role is not Role.SYSTEM or not turn.pinned:
            problem(f"head turn {turn.turn_id!r} is not a pinned SYSTEM turn")
    for turn in transcript.turns[len(head) :]:
        part = parts.get(turn.turn_id)
        if part is None or part.index is None:
            problem(f"turn {turn.turn_id!r} has no message index in the binding")


def _check_counted(  # noqa: PLR0917 - the checks' one helper
    fmt: Format[Any],
    view: Transcript,
    messages: list[Any],
    system: object,
    estimator: TokenEstimator,
    what: str,
    problem: Callable[[str], None],
) -> None:
    counted = fmt.count_tokens(messages, estimator=estimator, system=system)
    allowed = view.token_estimate()
    if counted > allowed:
        problem(
            f"{what}: the rendered request counts {counted} tokens, over its estimate {allowed}"
        )


def _tight(transcript: Transcript) -> CompactionBudget:
    """The smallest budget a transcript can be planned for: its untouchable part alone."""
    untouchable = sum(
        turn.token_estimate for turn in transcript.turns if turn.pinned or turn.role is Role.SYSTEM
    )
    return CompactionBudget(untouchable + transcript.request_tokens, 0)


def _check_summary(  # noqa: PLR0917 - one private call site
    fmt: Format[Any],
    transcript: Transcript,
    binding: Any,  # noqa: ANN401 - the format's binding
    system: object,
    estimator: TokenEstimator,
    problem: Callable[[str], None],
) -> None:
    plan = SummarizingPolicy("check", min_span_turns=1).decide(transcript, _tight(transcript))
    if not plan.summarization_requests:
        return
    request = plan.summarization_requests[0]
    price = fmt.price_summary(_SUMMARY, estimator=estimator)
    done = CompactionExecutor().apply(transcript, plan, {request.group_id: _SUMMARY})
    rendered = fmt.render(done, binding)
    label = summary_text(_SUMMARY)
    texts = [
        json.dumps(_data(hooks_of(fmt).fingerprint_data(m)), default=repr)
        for m in rendered.messages
    ]
    if not any(json.dumps(label)[1:-1] in text for text in texts):
        problem("a summary is not rendered as summary_text(text)")
    made = [m for m in rendered.messages if not any(m is kept for kept in binding.originals)]
    alone = [fmt.count_tokens([m], estimator=estimator) for m in made]
    empty = fmt.count_tokens([], estimator=estimator)  # the request's own cost (its overhead)
    if made and price not in [a - empty for a in alone]:
        problem(f"price_summary says {price}, the rendered summary counts {alone}")
    summary = next(t for t in done.transcript.turns if t.turn_id.startswith("summary:"))
    priced = Transcript(
        tuple(
            t if t is not summary else t.__class__(t.turn_id, t.role, t.content, price)
            for t in done.transcript.turns
        ),
        request_tokens=done.transcript.request_tokens,
    )
    _check_counted(fmt, priced, rendered.messages, system, estimator, "with a summary", problem)


def _check_masked(  # noqa: PLR0917 - one private call site
    fmt: Format[Any],
    transcript: Transcript,
    binding: Any,  # noqa: ANN401 - the format's binding
    system: object,
    estimator: TokenEstimator,
    problem: Callable[[str], None],
) -> None:
    plan = ObservationMaskingPolicy(0, estimator=estimator).decide(transcript, _tight(transcript))
    masked = [a.turn_id for a in plan.actions if a.action is Action.MASK]
    if not masked:
        return
    done = CompactionExecutor().apply(transcript, plan)
    rendered = fmt.render(done, binding)
    again, _ = fmt.to_transcript(rendered.messages, estimator=estimator, system=system)
    contents = "\n".join(turn.content for turn in again.turns)
    for action in plan.actions:
        stub = action.replacement
        if action.action is Action.MASK and stub is not None and stub.content not in contents:
            problem(f"masked turn {action.turn_id!r} does not render its stub")
    _check_counted(fmt, done.transcript, rendered.messages, system, estimator, "masked", problem)


_DROP_PLANS = 24  # the most plans that drop the oldest checked per history


def _check_pairs(transcript: Transcript, what: str, problem: Callable[[str], None]) -> None:
    """Every result (a ``TOOL`` turn) is in one exchange with a call before it."""
    calls: set[str] = set()
    for turn in transcript.turns:
        key = turn.tool_call_id
        if turn.role is not Role.TOOL:
            if key is not None:
                calls.add(key)
            continue
        if key is None or key not in calls:
            problem(
                f"{what}: tool result {turn.turn_id!r} shares no tool_call_id with a call before "
                "it, so a plan may keep it without its call"
            )


def _check_dropped(  # noqa: PLR0917 - one private call site
    fmt: Format[Any],
    transcript: Transcript,
    binding: Any,  # noqa: ANN401 - the format's binding
    system: object,
    estimator: TokenEstimator,
    problem: Callable[[str], None],
) -> None:
    """Plans that drop the oldest exchanges render requests the format reads back, paired."""
    # The budgets that stop dropping the oldest right after each turn: a plan that may keep a
    # result without its call (or a call without its result) is among them.
    low = _tight(transcript).max_tokens
    budgets: list[int] = []
    left = transcript.token_estimate()
    for turn in transcript.turns:
        if turn.pinned or turn.role is Role.SYSTEM:
            continue
        left -= turn.token_estimate
        if left >= max(low, 1):
            budgets.append(left)
    if len(budgets) > _DROP_PLANS:
        step = len(budgets) / _DROP_PLANS
        budgets = [budgets[int(number * step)] for number in range(_DROP_PLANS)]
    for budget in budgets:
        plan = DropOldestPolicy().decide(transcript, CompactionBudget(budget, 0))
        if not any(action.action is Action.DROP for action in plan.actions):
            continue
        done = CompactionExecutor().apply(transcript, plan)
        rendered = fmt.render(done, binding)
        what = f"dropped to {budget} tokens"
        try:
            again, _ = fmt.to_transcript(rendered.messages, estimator=estimator, system=system)
        except ValidationError as error:
            problem(f"{what}: the rendered request is refused reading it back ({error})")
            return
        _check_pairs(again, what, problem)
        _check_counted(fmt, done.transcript, rendered.messages, system, estimator, what, problem)
