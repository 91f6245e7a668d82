"""A window's state as plain JSON data, and the window it restores.

The state carries the settings (as given), what the window has seen (how many messages and
their fingerprint, not the messages), each held turn's price, the decisions (by turn id), the
last request as a recipe (``i``: the history's message ``i`` as it is; ``["unmarked", i]``: that
message without its ``sticky``/``priority`` keys; an object: a message the window made) and the
stats. A restored window checks the history against the fingerprint in one pass and then
continues as the uninterrupted one would, reading the old messages again only when a step
needs their turns (a compaction), with the prices taken from the state.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._core.values import Action, Transcript, TurnReplacement, group_id_for
from cutctx._loop.compact import CompactedMessages, priority_policy
from cutctx._loop.decisions import Decisions, Summary
from cutctx._loop.fingerprint import Fingerprint
from cutctx._loop.ledger import REQUEST_TURN_ID, Reading
from cutctx._loop.settings import Settings
from cutctx._policies.draft import estimator_marks
from cutctx.formats import resolve
from cutctx.formats._marks import unmarked

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cutctx._core.protocols import CompactionPolicy, TokenEstimator
    from cutctx._loop.settings import Pin, Priority, Summarize
    from cutctx._loop.window import ContextWindow
    from cutctx.formats import Format

__all__ = ["Saved", "adopt", "decode", "encode", "recorded", "resume"]

STATE_VERSION: Final = 2
_CALLABLES: Final = ("summarize", "priority", "pin")


@dataclass(slots=True)
class Saved:
    """What a state holds beyond the settings, until the window needs its decisions.

    ``resumed`` turns true once a history matched it (the window then holds it cold).
    """

    count: int
    fingerprint: str
    prices: list[int]
    firsts: int
    decisions: dict[str, Any]
    request: list[Any]
    costs: list[int]
    tokens: int
    tail: bool
    planned_by: str
    last: int | None
    stats: dict[str, int]
    reading: Reading | None = None
    resumed: bool = False


def recorded(window: ContextWindow, count: int) -> CompactedMessages[Any]:
    """Return a restored window's latest compaction (over its first ``count`` messages)."""
    ledger = window._ledger
    window._warm(ledger.seen)
    history = Transcript(tuple(ledger.turns[: ledger.end(count)]))
    decisions = window._decisions
    estimator = window._settings.estimator
    budget = window._planner.budget_for(history)
    plan = decisions.plan(history, budget, window._planned_by, estimator)
    view, report = decisions.view(history, plan)
    messages = window._format.render(Transcript(tuple(view)), ledger.binding(count)).messages
    return CompactedMessages(messages, report, plan)


def encode(window: ContextWindow) -> dict[str, Any]:
    """Return ``window``'s state (see the module docstring)."""
    settings, ledger, request = window._settings, window._ledger, window._request
    saved = window._saved
    decisions = saved.decisions if saved is not None else _decisions_of(window)
    return {
        "cutctx_window": STATE_VERSION,
        "format": window._format.name,
        **settings.given,
        **{name: getattr(settings, name) is not None for name in _CALLABLES},
        "policy": _named(window._policy),
        "estimator": list(estimator_marks(settings.estimator)),
        "seen": {"count": ledger.count, "fingerprint": ledger.fingerprint()},
        "head": [turn.token_estimate for turn in ledger.head if turn.turn_id != REQUEST_TURN_ID],
        "prices": ledger.prices(),
        "firsts": ledger.firsts,
        "reading": _reading_of(window, saved),
        "decisions": decisions,
        "request": [_literal(item) for item in request.recipe],
        "costs": list(request.costs),
        "tokens": request.tokens,
        "held": request.held,
        "tail": request.tail,
        "planned_by": _named(window._planned_by),
        "last": window._last_count,
        "stats": {
            "requests": window._stats.requests,
            "compactions": window._stats.compactions,
            "resets": window._stats.resets,
            "first_changed_index": window._stats.first_changed_index,
            "stable_prefix_tokens": window._stats.stable_prefix_tokens,
        },
    }


def _reading_of(window: ContextWindow, saved: Saved | None) -> list[Any] | None:
    """The format's reader state after the messages it settled, with their count."""
    reading = saved.reading if saved is not None and not saved.resumed else window._ledger.reading
    return None if reading is None or reading.state is None else [reading.count, reading.state]


def _named(policy: object) -> str:
    return f"{getattr(policy, 'name', '?')}@{getattr(policy, 'version', '?')}"


def _literal(item: object) -> object:
    if isinstance(item, int | list):
        return item
    if isinstance(item, dict):
        return item
    return ["render"]  # a message object of a custom format: rendered again on restore


def _decisions_of(window: ContextWindow) -> dict[str, Any]:
    ledger, decisions = window._ledger, window._decisions
    turns = ledger.turns
    actions = decisions.actions
    return {
        "masked": [
            [turns[index].turn_id, stub.content, stub.token_estimate]
            for index, stub in sorted(decisions.stubs.items())
            if actions[index] is Action.MASK
        ],
        "excerpted": [
            [turns[index].turn_id, stub.content, stub.token_estimate]
            for index, stub in sorted(decisions.stubs.items())
            if actions[index] is Action.EXCERPT
        ],
        "dropped": [
            turns[index].turn_id
            for index, action in enumerate(decisions.actions)
            if action is Action.DROP
        ],
        "groups": [
            {
                "turn_ids": [turns[member].turn_id for member in summary.members],
                "target_tokens": summary.target_tokens,
                "prompt_id": summary.prompt_id,
                "text": summary.text,
                "cost": summary.cost,
            }
            for summary in decisions.summaries.values()
        ],
    }


def decode(
    cls: type[ContextWindow],
    state: object,
    *,
    estimator: TokenEstimator | None,
    summarize: Summarize | None,
    policy: CompactionPolicy | None,
    priority: Priority | None,
    pin: Pin | None,
    format: Format[Any] | None,
) -> ContextWindow:
    """Return the window ``state`` describes, with the callables given again.

    Raises:
        ValidationError: for a state that is not one ``state()`` returned, or an argument the
            state needs that is missing (naming it), or a policy or estimator other than the
            state's.
    """
    data = _loaded(state)
    given = {"estimator": estimator, "summarize": summarize, "priority": priority, "pin": pin}
    try:
        _check_given(data, given, format)
        settings = Settings.of(
            data["max_tokens"], data["compact_at"], data["compact_to"], data["keep_first"],
            data["protected_recent_turns"], data["keep_recent_results"], data["system"],
            estimator, summarize, policy, data["summary_input_tokens"],
            data["cache_breakpoints"], priority, pin, data["max_result_tokens"], data["recall"],
        )  # fmt: skip
        settings = dataclasses.replace(settings, head_prices=tuple(map(int, data["head"])))
        window = cls.__new__(cls)
        window._setup(
            resolve(format if format is not None else data["format"], owner="ContextWindow"),
            settings,
        )
        _check_same(window, data)
        seen = data["seen"]
        window._saved = Saved(
            int(seen["count"]),
            str(seen["fingerprint"]),
            [int(price) for price in data["prices"]],
            int(data["firsts"]),
            dict(data["decisions"]),
            list(data["request"]),
            [int(cost) for cost in data["costs"]],
            int(data["tokens"]),
            bool(data["tail"]),
            str(data["planned_by"]),
            data["last"],
            {key: int(value) for key, value in data["stats"].items()},
            _reading(data.get("reading")),
        )
        window._stats = type(window._stats)(**window._saved.stats)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ValidationError(
            f"ContextWindow.from_state: malformed state ({type(error).__name__}: {error})",
            details={"field": "state"},
        ) from None
    return window


def _reading(value: object) -> Reading | None:
    """Read a state's ``reading`` (``None``: the format reads the held messages again)."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2 or not isinstance(value[1], dict):
        raise TypeError("reading")
    return Reading(int(value[0]), value[1])


def _loaded(state: object) -> dict[str, Any]:
    if isinstance(state, str):
        try:
            state = json.loads(state)
        except ValueError:
            state = None
    if not isinstance(state, dict) or state.get("cutctx_window") != STATE_VERSION:
        raise ValidationError(
            "ContextWindow.from_state: not a window state (or of another version)",
            details={"field": "state"},
        )
    return state


def _check_given(data: dict[str, Any], given: dict[str, Any], fmt: object) -> None:
    """Raise naming the first argument the state says was given and is missing now."""
    for name in _CALLABLES:
        if data[name] and given[name] is None:
            raise _missing(name, f"the state was made with {name}=")
    ratio, tokenizer = data["estimator"]
    if tokenizer is not None and given["estimator"] is None:
        raise _missing("estimator", f"the state was priced by {tokenizer!r}")
    if fmt is None:
        try:
            resolve(data["format"])  # a built-in format, or a framework's, by its name
        except ValidationError:
            raise _missing(
                "format", f"the state is of the custom format {data['format']!r}"
            ) from None
    del ratio


def _missing(name: str, why: str) -> ValidationError:
    return ValidationError(
        f"ContextWindow.from_state: pass {name}= ({why})", details={"field": name}
    )


def _check_same(window: ContextWindow, data: dict[str, Any]) -> None:
    named = _named(window._policy)
    if named != data["policy"]:
        raise ValidationError(
            f"ContextWindow.from_state: the state was made with policy {data['policy']!r}, "
            f"this window has {named!r}; pass policy=",
            details={"field": "policy"},
        )
    marks = list(estimator_marks(window._settings.estimator))
    if marks != data["estimator"]:
        raise ValidationError(
            f"ContextWindow.from_state: the state was priced by {data['estimator']!r}, this "
            f"window's estimator is {marks!r}; pass the same estimator=",
            details={"field": "estimator"},
        )
    if window._format.name != data["format"]:
        raise ValidationError(
            f"ContextWindow.from_state: the state is of format {data['format']!r}, not "
            f"{window._format.name!r}",
            details={"field": "format"},
        )


def resume(window: ContextWindow, history: Sequence[Any]) -> None:
    """Take up a restored state over ``history``: held cold if it starts as the state saw."""
    saved = window._saved
    assert saved is not None  # noqa: S101 - only called with a state pending
    render = any(item == ["render"] for item in saved.request)  # a message the state lacks
    made = (
        None
        if len(history) < saved.count
        else Fingerprint.resume(
            history[: saved.count], window._format.fingerprint_data, saved.fingerprint
        )
    )
    if made is None:
        window._saved = None
        window._before = [] if render else _resolved(saved.request, history)
        window._stats = type(window._stats)(**{**saved.stats, "resets": saved.stats["resets"] + 1})
        return
    saved.resumed = True
    window._ledger.restore(history, saved.count, saved.prices, saved.firsts, made, saved.reading)
    if window._recall is not None:
        window._recall.complete = False
    window._view = None
    window._decisions = Decisions([])
    window._last_count = saved.last
    window._planned_by = (
        window._policy if saved.planned_by == _named(window._policy) else _priority(window)
    )
    request = window._request
    request.messages = [] if render else _resolved(saved.request, history)
    request.recipe = list(saved.request)
    request.costs, request.tokens = list(saved.costs), saved.tokens
    request.held, request.tail = saved.count, saved.tail and not render


def _priority(window: ContextWindow) -> CompactionPolicy:
    return priority_policy(window._settings.estimator)


def _resolved(recipe: Sequence[Any], history: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for item in recipe:
        if isinstance(item, int):
            out.append(history[item])
        elif isinstance(item, list):
            out.append(unmarked(history[item[1]]))
        else:
            out.append(item)
    return out


def adopt(window: ContextWindow) -> None:
    """Rebuild the saved decisions over the ledger, now that it has read the messages."""
    saved = window._saved
    assert saved is not None  # noqa: S101 - only called while a state is pending
    window._saved = None
    ledger = window._ledger
    index_of = ledger.index_of
    actions = [Action.KEEP] * len(ledger.turns)
    stubs: dict[int, TurnReplacement] = {}
    summaries: dict[str, Summary] = {}
    data = saved.decisions
    try:
        for turn_id, content, estimate in data["masked"]:
            index = index_of[turn_id]
            actions[index] = Action.MASK
            stubs[index] = TurnReplacement(content, estimate)
        for turn_id, content, estimate in data["excerpted"]:
            index = index_of[turn_id]
            actions[index] = Action.EXCERPT
            stubs[index] = TurnReplacement(content, estimate)
        for turn_id in data["dropped"]:
            actions[index_of[turn_id]] = Action.DROP
        for group in data["groups"]:
            members = tuple(index_of[turn_id] for turn_id in group["turn_ids"])
            for member in members:
                actions[member] = Action.SUMMARIZE
            key = group_id_for(list(group["turn_ids"]))
            summaries[key] = Summary(
                members, group["target_tokens"], group["prompt_id"], group["text"], group["cost"]
            )
    except (KeyError, TypeError, ValueError) as error:
        raise ValidationError(
            f"ContextWindow.from_state: the state does not fit the history "
            f"({type(error).__name__}: {error})",
            details={"field": "state"},
        ) from None
    window._decisions = Decisions(actions, stubs, summaries)
    window._view = None
