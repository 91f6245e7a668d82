"""A window's state as JSON data, and back: ``to_data`` and ``from_data``, the one pair.

No other module of the window reads or writes this form. The state carries the settings (as
given), what the window has seen (how many messages and their fingerprint, not the messages),
each held turn's price (the prices packed in one string: ``packed.pack``), the decisions (by
turn id; the dropped turns and a summary's members as runs, ``[first turn id, how many turns]``
in the order the window holds them, so a long session's state stays small), the last request
as a recipe (``i``: the history's message ``i`` as it is; ``["unmarked", i]``: that message
without its ``sticky``/``priority`` keys; an object: a message the window made; ``["render"]``:
one a custom format made, which JSON cannot carry) with each message's cost (packed) and short
digest (the digests joined in one string), the stats, the calibration, what the estimator
counts of a probe text, and a digest of all of it over its canonical form (sorted keys), so an
edit is seen whatever order a store gives the keys back in.

``from_data`` decodes and checks all of it, so a state that cannot continue is refused there,
every refusal worded ``ContextWindow.from_state: ...`` (``jsondata.refused``). What only the
history can show (that it starts with the messages the state saw, and that the turns it reads
are the ones the prices and decisions name) is checked by the first ``prepare``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._core.estimators import restored_estimator
from cutctx._core.values import TurnReplacement
from cutctx._loop.compact import priority_policy
from cutctx._loop.decisions import Decisions, SavedDecisions, SavedGroup, saved_decisions
from cutctx._loop.jsondata import from_json_data, refused, to_json_data
from cutctx._loop.ledger import Reading
from cutctx._loop.packed import pack, unpack
from cutctx._loop.request import LOST, Made, Request, Unmarked, WindowStats
from cutctx._loop.settings import Settings
from cutctx._loop.state import KEPT_REPORTS, LOWEST_SLOPE, Calibration, WindowState
from cutctx._loop.step import DIGEST_CHARS, digest_of, named
from cutctx._policies.draft import estimator_marks
from cutctx.formats import resolve

if TYPE_CHECKING:
    from cutctx._core.protocols import CompactionPolicy, TokenEstimator
    from cutctx._loop.ledger import Ledger
    from cutctx._loop.request import Sent
    from cutctx._loop.settings import Observation, Pin, Priority, Summarize
    from cutctx.formats import Format

__all__ = [
    "PROBES",
    "Decoded",
    "Digests",
    "check_policy",
    "from_data",
    "probe_of",
    "seal",
    "to_data",
]

STATE_VERSION: Final = 5
# Versions 3 and 4 were written by development builds of 0.1.1 only, never by a release: they
# are refused by name (the window starts afresh), not read.
_UNRELEASED: Final = frozenset({3, 4})
_CALLABLES: Final = ("summarize", "priority", "pin", "observation")
_DECISIONS: Final = frozenset({"masked", "excerpted", "dropped", "groups"})
_GROUP: Final = frozenset({"runs", "target_tokens", "prompt_id", "text", "cost"})
# What an estimator counts of these texts rides on the state: a restore under an estimator
# that counts otherwise (another tokenizer, another per-message cost) is refused.
PROBES: Final = ("", 'Probe: the window\'s estimator, 2026-12-01 {"k": [1, 2.5]} 中文 テスト ✓')


# -- to data ------------------------------------------------------------------------------------


def to_data(
    state: WindowState,
    fmt: Format[Any],
    settings: Settings,
    policy: CompactionPolicy,
    probe: list[int],
    *,
    memo: Digests,
) -> dict[str, Any]:
    """Return ``state`` as JSON data (see the module docstring).

    A restored state no history has taken up yet is returned exactly as it was restored.
    ``memo`` is the caller's: the digests of request messages an earlier call computed.
    """
    if state.restored is not None:  # as from_state was given it: nothing has changed since
        made: dict[str, Any] = json.loads(json.dumps(state.restored))  # a copy to change
        return made
    ledger, request = state.ledger, state.request
    known = request.digests  # as far as a restored state knew them; then the messages'
    digests = [*known, *memo.of(fmt, request.messages, len(known))]
    reading = ledger.reading
    decisions = ledger.saved_decisions
    if decisions is None:
        decisions = saved_decisions(state.decisions, ledger.turns)
    stats = state.stats
    body = {
        "cutctx_window": STATE_VERSION,
        "format": fmt.name,
        **settings.given,
        "system": to_json_data(settings.given["system"]),  # Converse blocks may hold bytes
        **{name: getattr(settings, name) is not None for name in _CALLABLES},
        "policy": named(policy),
        "estimator": list(estimator_marks(settings.estimator)),
        "probe": probe,
        "seen": {"count": ledger.count, "fingerprint": ledger.fingerprint()},
        "head": ledger.head_prices(),
        "prices": pack(ledger.prices()),
        "firsts": ledger.firsts,
        "reading": None
        if reading is None or reading.state is None
        else [reading.count, reading.state],
        "decisions": _decisions_data(decisions),
        "request": [_item_data(item) for item in request.recipe],
        "digests": "".join(digests),
        "costs": pack(request.costs),
        "tokens": request.tokens,
        "held": request.held,
        "tail": request.tail,
        "planned_by": named(state.planned_by),
        "last": state.compacted_count,
        "stats": {
            "requests": stats.requests,
            "compactions": stats.compactions,
            "resets": stats.resets,
            "first_changed_index": stats.first_changed_index,
            "stable_prefix_tokens": stats.stable_prefix_tokens,
        },
        "calibration": {
            "reports": [list(report) for report in state.calibration.reports],
            "last": state.calibration.last_estimate,
        },
        "head_changed": state.before is not None,  # set_system since the last request
    }
    return seal(body)


class Digests:
    """The digests of request messages a window's ``state()`` computed, kept for the next call.

    The read's own cache: the window's state never holds it, so a ``state()`` changes nothing
    a step sees. A message is known by identity (a request keeps its messages' objects).
    """

    __slots__ = ("_pairs", "_start")

    def __init__(self) -> None:
        self._start = 0
        self._pairs: list[tuple[object, str]] = []  # messages from ``_start`` on, digested

    def of(self, fmt: Format[Any], messages: list[Any], start: int) -> list[str]:
        """Return the digests of ``messages[start:]``, keeping them for the next call."""
        if start != self._start:
            self._start, self._pairs = start, []
        pairs = self._pairs
        same = 0
        for (message, _), current in zip(pairs, messages[start:], strict=False):
            if message is not current:
                break
            same += 1
        del pairs[same:]
        pairs.extend((message, digest_of(fmt, message)) for message in messages[start + same :])
        return [digest for _, digest in pairs]


def seal(body: dict[str, Any]) -> dict[str, Any]:
    """Return ``body`` with its ``digest`` (of the rest, in canonical form) set."""
    body["digest"] = _digest(body)
    return body


def probe_of(estimator: TokenEstimator) -> list[int]:
    return [estimator.estimate_tokens(text) for text in PROBES]


def _digest(body: dict[str, Any]) -> str:
    # No check for cycles (a body that holds itself raises RecursionError): the state is made
    # of JSON data or read from it, and the check costs a sixth of the digest.
    text = json.dumps(
        {key: value for key, value in body.items() if key != "digest"},
        sort_keys=True,
        separators=(",", ":"),
        allow_nan=False,
        check_circular=False,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _item_data(item: Sent) -> object:
    if type(item) is int:
        return item
    if isinstance(item, Unmarked):
        return ["unmarked", item.index]
    if isinstance(item, Made) and isinstance(item.message, dict):
        return to_json_data(item.message)  # its bytes tagged
    return ["render"]  # a message object of a custom format: rendered again on restore


def _decisions_data(decisions: SavedDecisions) -> dict[str, Any]:
    return {
        "masked": [
            [turn_id, stub.content, stub.token_estimate] for turn_id, stub in decisions.masked
        ],
        "excerpted": [
            [turn_id, stub.content, stub.token_estimate] for turn_id, stub in decisions.excerpted
        ],
        "dropped": [list(run) for run in decisions.dropped],
        "groups": [
            {
                "runs": [list(run) for run in group.runs],
                "target_tokens": group.target_tokens,
                "prompt_id": group.prompt_id,
                "text": group.text,
                "cost": group.cost,
            }
            for group in decisions.groups
        ],
    }


# -- from data ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Body:
    """What a state holds of the messages and the request, read from it and checked."""

    count: int
    fingerprint: str
    prices: list[int]
    firsts: int
    decisions: SavedDecisions
    request: list[Sent]
    digests: list[str]
    costs: list[int]
    tokens: int
    tail: bool
    planned_by: str
    last: int | None
    reading: Reading | None  # the format's reader state it saved (None: read again)


@dataclass(frozen=True, slots=True)
class Decoded:
    """What a state restores: the format and the settings, then (``state``) the window's state.

    ``data`` is the state as given, which ``state()`` returns until the window changes.
    """

    fmt: Format[Any]
    settings: Settings
    policy: str
    probe: list[int]
    head_changed: bool
    body: _Body
    stats: WindowStats
    calibration: Calibration
    data: dict[str, Any]

    def state(self, ledger: Ledger, policy: CompactionPolicy) -> WindowState:
        """Return the window's state this restores, over its fresh ``ledger`` (held cold).

        ``policy`` is the restored window's: the latest compaction's, unless priority mode's.
        """
        body = self.body
        ledger.restore(
            body.count, body.fingerprint, body.prices, body.firsts, body.decisions, body.reading
        )
        request = Request(
            [], body.costs, body.tokens, body.count, body.tail, body.request, body.digests
        )  # its messages: made from the history the first step is handed
        return WindowState(
            ledger,
            Decisions([]),  # placed on the turns when a step reads them (``Ledger.warm``)
            request,
            None,
            self.stats,
            policy
            if body.planned_by == named(policy)
            else priority_policy(self.settings.estimator),
            compacted_count=body.last,
            before=[] if self.head_changed else None,
            restored=self.data,
            calibration=self.calibration,
        )


def from_data(
    state: object,
    *,
    estimator: TokenEstimator | str | None,
    summarize: Summarize | None,
    policy: CompactionPolicy | None,
    priority: Priority | None,
    pin: Pin | None,
    format: Format[Any] | None,
    observation: Observation | None = None,
) -> Decoded:
    """Return what ``state`` restores, with the callables given again, all of it checked.

    Raises:
        ValidationError: for a state that is not one ``state()`` returned (or was edited since),
            one whose parts do not hold together, an argument the state needs that is missing
            (naming it), or an estimator or format other than the state's.
    """
    data = _loaded(state)
    try:
        if estimator is None:  # the state's own, when its marks make it again (the default's do)
            estimator = restored_estimator(*data["estimator"])
        given = {
            "estimator": estimator,
            "summarize": summarize,
            "priority": priority,
            "pin": pin,
            "observation": observation,
        }
        _check_given(data, given, format)
        settings = Settings.of(
            data["max_tokens"], data["compact_at"], data["compact_to"], data["keep_first"],
            data["protected_recent_turns"], data["keep_recent_results"],
            from_json_data(data["system"]),
            estimator, summarize, policy, data["summary_input_tokens"],
            data["cache_breakpoints"], priority, pin, data["max_result_tokens"], data["recall"],
            observation=observation,
        )  # fmt: skip
        head = _ints(data["head"], "head")
        fmt = resolve(format if format is not None else data["format"], owner="ContextWindow")
        _check_counts(data, fmt, settings)
        calibration = _calibration(data["calibration"])
        body = _body(data, calibration)
        _check_reading(body.reading, fmt, settings)
        stats = WindowStats(**{key: _int(value, "stats") for key, value in data["stats"].items()})
        named_policy, probe, head_changed = data["policy"], data["probe"], data["head_changed"]
        if not isinstance(named_policy, str) or not isinstance(head_changed, bool):
            raise _unfit("the policy or head_changed")
        probe = _ints(probe, "probe")
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise refused(f"malformed state ({type(error).__name__}: {error})") from None
    except ValidationError as error:  # a setting's own check: in the one wording
        raise reworded(error) from None
    return Decoded(
        fmt,
        replace(settings, head_prices=tuple(head)),
        named_policy,
        probe,
        head_changed,
        body,
        stats,
        calibration,
        data,
    )


def reworded(error: ValidationError) -> ValidationError:
    """Return ``error`` (a setting's or an argument's own check) worded as ``from_state``'s."""
    text = str(error)
    if text.startswith("ContextWindow.from_state:"):
        return error
    text = text.removeprefix("ContextWindow: ").removeprefix("ContextWindow.")  # a setting's
    details = dict(error.details)
    return refused(text, field=str(details.pop("field", "state")), **details)


def _loaded(state: object) -> dict[str, Any]:
    if isinstance(state, str):
        try:
            state = json.loads(state)
        except ValueError:
            state = None
    version = state.get("cutctx_window") if isinstance(state, dict) else None
    # The type first: 5.0 and True equal a version, and a list cannot be looked up in a set.
    if type(version) is int and version in _UNRELEASED:
        raise refused(
            f"the state is of version {version}, which only development builds of 0.1.1 wrote; "
            f"this release reads version {STATE_VERSION} (start the window afresh)"
        )
    if not isinstance(state, dict) or type(version) is not int or version != STATE_VERSION:
        raise refused("not a window state (or of another version)")
    try:
        made = _digest(state)
    except (TypeError, ValueError, RecursionError):  # not JSON data, or a dict that holds itself
        made = None
    if state.get("digest") != made:
        raise refused(
            "the state was changed since state() made it (its digest does not match its body)",
            field="digest",
        )
    return state


def _check_given(data: dict[str, Any], given: dict[str, Any], fmt: object) -> None:
    """Raise naming the first argument the state says was given and is missing now."""
    for name in _CALLABLES:
        if data.get(name) and given[name] is None:
            raise _missing(name, f"the state was made with {name}=")
    _, tokenizer = data["estimator"]
    if tokenizer is not None and given["estimator"] is None:
        raise _missing("estimator", f"the state was priced by {tokenizer!r}")
    if fmt is None:
        try:
            resolve(data["format"])  # a built-in format, or a framework's, by its name
        except ValidationError:
            raise _missing(
                "format", f"the state is of the custom format {data['format']!r}"
            ) from None


def _missing(name: str, why: str) -> ValidationError:
    return refused(f"pass {name}= ({why})", field=name)


def _check_counts(data: dict[str, Any], fmt: Format[Any], settings: Settings) -> None:
    """Check the estimator and the format are the state's, by what they are and count."""
    marks = list(estimator_marks(settings.estimator))
    probe = probe_of(settings.estimator)
    if marks != data["estimator"] or probe != data["probe"]:
        raise refused(
            f"the state was priced by {data['estimator']!r}, counting {data['probe']!r} of its "
            f"probe texts; this window's estimator is {marks!r}, counting {probe!r}; pass the "
            "same estimator=",
            field="estimator",
        )
    if fmt.name != data["format"]:
        raise refused(
            f"the state is of format {data['format']!r}, not {fmt.name!r}", field="format"
        )


def _check_reading(reading: Reading | None, fmt: Format[Any], settings: Settings) -> None:
    """Check the format's reader can continue from the state's reading (it sets it again)."""
    if reading is None or reading.state is None:
        return
    reader = fmt.reader(estimator=settings.estimator, priority=settings.priority, pin=settings.pin)
    try:
        reader.setstate(reading.state)
    except (ValidationError, TypeError, KeyError, ValueError, AttributeError) as error:
        raise _unfit(f"the format's reading: {error}") from None


def check_policy(decoded: Decoded, policy: CompactionPolicy) -> None:
    """Raise unless ``policy`` (the restored window's) is the one the state was made with."""
    if named(policy) != decoded.policy:
        raise refused(
            f"the state was made with policy {decoded.policy!r}, this window has "
            f"{named(policy)!r}; pass policy=",
            field="policy",
        )


def _int(value: object, field: str) -> int:
    if type(value) is not int or value < 0:
        raise refused(f"malformed state ({field} holds {value!r:.40})", field=field)
    return value


def _ints(values: object, field: str) -> list[int]:
    # ``set(map(type, ...))``: one C pass over what may be every held turn's price.
    if not isinstance(values, list) or not set(map(type, values)) <= {int}:
        raise refused(f"malformed state ({field} is not a list of counts)", field=field)
    if values and min(values) < 0:
        raise refused(f"malformed state ({field} holds a negative count)", field=field)
    return values


def _counts(value: object, field: str) -> list[int]:
    """Return the counts of a state's ``field``: packed, or a list (``packed.pack`` for why)."""
    if isinstance(value, str):
        try:
            return unpack(value)
        except ValueError as error:
            raise refused(f"malformed state ({field}: {error})", field=field) from None
    return _ints(value, field)


def _digests(value: object) -> list[str]:
    """Return the request's message digests, joined in one string."""
    if isinstance(value, str) and not len(value) % DIGEST_CHARS:
        return [value[start : start + DIGEST_CHARS] for start in range(0, len(value), DIGEST_CHARS)]
    raise _unfit("the request's digests are not digests")


def _calibration(data: object) -> Calibration:
    """Return the state's calibration: its reports (at most eight) and its last estimate."""
    if not isinstance(data, dict) or set(data) != {"reports", "last"}:
        raise _malformed("calibration")
    reports, last = data["reports"], data["last"]
    if not isinstance(reports, list) or len(reports) > KEPT_REPORTS:
        raise _malformed("calibration")
    for report in reports:
        if not isinstance(report, list) or len(report) != 2:
            raise _malformed("calibration")
        if any(type(number) is not int or number < 1 for number in report):
            raise _malformed("calibration")
    if last is not None and (type(last) is not int or last < 0):
        raise _malformed("calibration")
    return Calibration(tuple((estimate, count) for estimate, count in reports), last)


def _body(data: dict[str, Any], calibration: Calibration) -> _Body:
    """Return the state's body, checked: counts, ranges, lengths, the decisions whole."""
    seen = data["seen"]
    count = _int(seen["count"], "seen")
    recipe = [_item(item, count) for item in _list(data["request"], "request is not a list")]
    if count and not recipe:
        raise _unfit(f"an empty request for {count} messages")
    costs, digests = _counts(data["costs"], "costs"), _digests(data["digests"])
    if len(costs) != len(recipe) or len(digests) > len(recipe):
        raise _unfit("the request's costs or digests do not match its messages")
    tokens, held = _int(data["tokens"], "tokens"), _int(data["held"], "held")
    top = _top(_int(data["max_tokens"], "max_tokens"), calibration)
    if held != count or tokens > top:
        raise _unfit(f"the request holds {held} of {count} messages at {tokens} tokens")
    last = data["last"]
    if last is not None and not 0 <= _int(last, "last") <= count:
        raise _unfit(f"the latest compaction was over {last} of {count} messages")
    firsts = _int(data["firsts"], "firsts")
    reading = _reading(data.get("reading"), count)
    prices = _counts(data["prices"], "prices")
    decisions = _decisions(data["decisions"])
    if decisions.named > len(prices):
        raise _unfit(f"the decisions name {decisions.named} turns of {len(prices)} priced")
    fingerprint = seen["fingerprint"]
    if not isinstance(fingerprint, str):
        raise _unfit("the fingerprint is not a text")
    return _Body(
        count,
        fingerprint,
        prices,
        firsts,
        decisions,
        recipe,
        digests,
        costs,
        tokens,
        bool(data["tail"]),
        str(data["planned_by"]),
        last,
        reading,
    )


def _item(item: object, count: int) -> Sent:
    """Return one recipe item of the request (see the module docstring)."""
    if type(item) is int or _is_unmarked(item):
        index = item if type(item) is int else item[1]  # type: ignore[index]
        if not 0 <= index < count:
            raise _unfit(f"the request names message {index} of {count}")
        return index if type(item) is int else Unmarked(index)
    if isinstance(item, dict):
        return Made(from_json_data(item))
    if item == ["render"]:
        return LOST
    raise _unfit(f"the request holds {item!r:.40}")


def _decisions(data: object) -> SavedDecisions:
    """Return the state's decisions, each of its kinds checked."""
    if not isinstance(data, dict) or set(data) != _DECISIONS:
        raise _unfit("decisions")
    groups = []
    for group in _list(data["groups"], "a summary group"):
        if not isinstance(group, dict):
            raise _unfit("a summary group")
        groups.append(_group(group))
    return SavedDecisions(
        _stubs(data["masked"], "masked"),
        _stubs(data["excerpted"], "excerpted"),
        _runs(data["dropped"]),
        tuple(groups),
    )


def _stubs(data: object, kind: str) -> tuple[tuple[str, TurnReplacement], ...]:
    stubs = []
    for stub in _list(data, f"the {kind} turns"):
        if not (isinstance(stub, list) and len(stub) == 3 and isinstance(stub[0], str)):
            raise _unfit(f"a {kind} turn {stub!r:.40}")
        turn_id, content, estimate = stub
        try:
            stubs.append((turn_id, TurnReplacement(content, estimate)))
        except ValidationError as error:  # the stub's own check
            raise _unfit(f"a {kind} turn: {error}") from None
    return tuple(stubs)


def _group(group: dict[str, Any]) -> SavedGroup:
    if set(group) != _GROUP:
        raise _unfit("a summary group")
    target, prompt_id, text, cost = (
        group["target_tokens"], group["prompt_id"], group["text"], group["cost"]
    )  # fmt: skip
    if not (isinstance(prompt_id, str) and isinstance(text, str)):
        raise _unfit("a summary's prompt_id and text are strings")
    for value in (target, cost):
        if type(value) is not int or value < 0:
            raise _unfit(f"a summary's target_tokens and cost are counts, not {value!r:.20}")
    runs = _runs(group["runs"])
    if not runs:
        raise _unfit("a summary of no turns")
    return SavedGroup(runs, target, prompt_id, text, cost)


def _runs(data: object) -> tuple[tuple[str, int], ...]:
    runs = []
    for run in _list(data, "runs"):
        if not (
            isinstance(run, list)
            and len(run) == 2
            and isinstance(run[0], str)
            and type(run[1]) is int
            and run[1] >= 1
        ):
            raise _unfit(f"the run {run!r:.40} is not one")
        runs.append((run[0], run[1]))
    return tuple(runs)


def _list(value: object, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise _unfit(f"{what} is not a list")
    return value


def _reading(value: object, count: int) -> Reading | None:
    """Read a state's ``reading`` (``None``: the format reads the held messages again)."""
    if value is None:
        return None
    if not (
        isinstance(value, list)
        and len(value) == 2
        and type(value[0]) is int
        and 0 <= value[0] <= count
        and isinstance(value[1], dict)
        and value[1].get("count", value[0]) == value[0]  # a built-in reader's count is its own
    ):
        raise _unfit(f"the format's reading {value!r:.40}")
    return Reading(value[0], value[1], restored=True)


def _top(max_tokens: int, calibration: Calibration) -> int:
    """Return the most tokens a state's request may hold.

    That is ``max_tokens``, or, once a calibration has reports, up to ``max_tokens`` over the
    smallest slope any of its fits may find (a provider counting less lets the window hold more).
    """
    low = LOWEST_SLOPE if calibration.reports else 1.0
    return int(max_tokens / low) + 1


def _is_unmarked(item: object) -> bool:
    return (
        isinstance(item, list) and len(item) == 2 and item[0] == "unmarked" and type(item[1]) is int
    )


def _malformed(field: str) -> ValidationError:
    return refused(f"malformed state ({field})", field=field)


def _unfit(why: str) -> ValidationError:
    return refused(f"the state does not hold together ({why})")
