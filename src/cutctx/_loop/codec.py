"""A window's state as plain JSON data, and back: ``encode`` and ``decode`` of a ``WindowState``.

The state carries the settings (as given), what the window has seen (how many messages and
their fingerprint, not the messages), each held turn's price (the prices packed in one string:
``packed.pack``), the decisions (by turn id; the dropped turns and a summary's members as runs,
``[first turn id, how many turns]`` in the order the window holds them, so a long session's
state stays small), the last request as a recipe (``i``: the history's message ``i`` as it is;
``["unmarked", i]``: that message without its ``sticky``/``priority`` keys; an object: a
message the window made) with each message's cost (packed) and short digest (the digests
joined in one string), the stats, the calibration, what the estimator counts of a probe text,
and a digest of all of it over its canonical form (sorted keys), so an edit is seen whatever
order a store gives the keys back in. A restored state is checked where it is cheap and
trusted no further: the history it is handed must match its fingerprint.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._core.estimators import restored_estimator
from cutctx._core.values import Action
from cutctx._loop.jsondata import from_json_data, to_json_data
from cutctx._loop.ledger import Reading
from cutctx._loop.packed import pack, unpack
from cutctx._loop.request import WindowStats
from cutctx._loop.settings import Settings
from cutctx._loop.state import LOWEST_SLOPE, Calibration, Saved
from cutctx._loop.step import DIGEST_CHARS, digest_of, named
from cutctx._policies.draft import estimator_marks
from cutctx.formats import resolve

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cutctx._core.protocols import CompactionPolicy, TokenEstimator
    from cutctx._core.values import TranscriptTurn
    from cutctx._loop.settings import Observation, Pin, Priority, Summarize
    from cutctx._loop.state import WindowState
    from cutctx.formats import Format

__all__ = ["PROBES", "Decoded", "check_policy", "decode", "encode", "probe_of", "seal"]

STATE_VERSION: Final = 5
# Version 4 wrote the prices and the request's costs as lists of numbers and its digests as a
# list of strings (read as they are); version 3 also wrote the dropped turns and a summary's
# members one id each (``"dropped"`` and a group's ``"turn_ids"``), read as runs of one turn.
_READABLE: Final = frozenset({3, 4, STATE_VERSION})
_CALLABLES: Final = ("summarize", "priority", "pin", "observation")
# What an estimator counts of these texts rides on the state: a restore under an estimator
# that counts otherwise (another tokenizer, another per-message cost) is refused.
PROBES: Final = ("", 'Probe: the window\'s estimator, 2026-12-01 {"k": [1, 2.5]} 中文 テスト ✓')


def encode(
    state: WindowState,
    fmt: Format[Any],
    settings: Settings,
    policy: CompactionPolicy,
    probe: list[int],
) -> dict[str, Any]:
    """Return ``state`` as JSON data (see the module docstring).

    A restored state no history has taken up yet is returned exactly as it was restored.
    """
    saved = state.saved
    ledger, request = state.ledger, state.request
    if saved is not None and not saved.resumed:
        if saved.data is not None:
            made: dict[str, Any] = json.loads(json.dumps(saved.data))  # a copy to change
            return made
        seen = {"count": saved.count, "fingerprint": saved.fingerprint}
        prices, firsts, recipe, digests = saved.prices, saved.firsts, saved.request, saved.digests
        costs, tokens, tail, held = saved.costs, saved.tokens, saved.tail, saved.count
        planned_by, last, reading = saved.planned_by, saved.last, saved.reading
    else:
        seen = {"count": ledger.count, "fingerprint": ledger.fingerprint()}
        prices, firsts, recipe = ledger.prices(), ledger.firsts, request.recipe
        digests = request.digests  # topped up here: the messages a step appended since
        digests.extend(digest_of(fmt, message) for message in request.messages[len(digests) :])
        costs, tokens, tail, held = request.costs, request.tokens, request.tail, request.held
        planned_by, last, reading = named(state.planned_by), state.last_count, ledger.reading
    decisions = saved.decisions if saved is not None else _decisions_of(state)
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
        "seen": seen,
        "head": ledger.head_prices(),
        "prices": pack(prices),
        "firsts": firsts,
        "reading": None
        if reading is None or reading.state is None
        else [reading.count, reading.state],
        "decisions": decisions,
        "request": [_literal(item) for item in recipe],
        "digests": "".join(digests),
        "costs": pack(costs),
        "tokens": tokens,
        "held": held,
        "tail": tail,
        "planned_by": planned_by,
        "last": last,
        "stats": {
            "requests": stats.requests,
            "compactions": stats.compactions,
            "resets": stats.resets,
            "first_changed_index": stats.first_changed_index,
            "stable_prefix_tokens": stats.stable_prefix_tokens,
        },
        "calibration": state.calibration.to_data(),
        "head_changed": state.before is not None,  # set_system since the last request
    }
    return seal(body)


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


def _literal(item: object) -> object:
    if isinstance(item, int | list):
        return item
    if isinstance(item, dict):
        return to_json_data(item)  # a message the window made: its bytes tagged
    return ["render"]  # a message object of a custom format: rendered again on restore


def _decisions_of(state: WindowState) -> dict[str, Any]:
    turns, decisions = state.ledger.turns, state.decisions
    actions, stubs = decisions.actions, decisions.stubs
    return {
        "masked": [
            [turns[index].turn_id, stub.content, stub.token_estimate]
            for index, stub in sorted(stubs.items())
            if actions[index] is Action.MASK
        ],
        "excerpted": [
            [turns[index].turn_id, stub.content, stub.token_estimate]
            for index, stub in sorted(stubs.items())
            if actions[index] is Action.EXCERPT
        ],
        "dropped": _runs(
            [index for index, action in enumerate(actions) if action is Action.DROP], turns
        ),
        "groups": [
            {
                "runs": _runs(summary.members, turns),
                "target_tokens": summary.target_tokens,
                "prompt_id": summary.prompt_id,
                "text": summary.text,
                "cost": summary.cost,
            }
            for summary in decisions.summaries.values()
        ],
    }


def _runs(indices: Sequence[int], turns: Sequence[TranscriptTurn]) -> list[list[Any]]:
    """Return ascending turn ``indices`` as runs: ``[first turn id, how many turns]``."""
    runs: list[list[Any]] = []
    end = -1
    for index in indices:
        if index == end:
            runs[-1][1] += 1
        else:
            runs.append([turns[index].turn_id, 1])
        end = index + 1
    return runs


@dataclass(frozen=True, slots=True)
class Decoded:
    """What a state restores: the format, the settings and the parts of the window's state."""

    fmt: Format[Any]
    settings: Settings
    policy: str
    probe: list[int]
    head_changed: bool
    saved: Saved
    stats: WindowStats
    calibration: Calibration


def decode(
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
    """Return what ``state`` restores, with the callables given again, checked.

    Raises:
        ValidationError: for a state that is not one ``state()`` returned (or was edited since),
            an argument the state needs that is missing (naming it), or an estimator or format
            other than the state's.
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
        calibration = Calibration.of_data(data["calibration"])
        saved = _saved(data, calibration)
        stats = WindowStats(**{key: _int(value, "stats") for key, value in data["stats"].items()})
        named_policy, probe, head_changed = data["policy"], data["probe"], data["head_changed"]
        if not isinstance(named_policy, str) or not isinstance(head_changed, bool):
            raise _unfit("the policy or head_changed")
        probe = _ints(probe, "probe")
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ValidationError(
            f"ContextWindow.from_state: malformed state ({type(error).__name__}: {error})",
            details={"field": "state"},
        ) from None
    return Decoded(
        fmt,
        replace(settings, head_prices=tuple(head)),
        named_policy,
        probe,
        head_changed,
        saved,
        stats,
        calibration,
    )


def _loaded(state: object) -> dict[str, Any]:
    if isinstance(state, str):
        try:
            state = json.loads(state)
        except ValueError:
            state = None
    version = state.get("cutctx_window") if isinstance(state, dict) else None
    # The type first: 5.0 and True equal a version, and a list cannot be looked up in a set.
    if not isinstance(state, dict) or type(version) is not int or version not in _READABLE:
        raise ValidationError(
            "ContextWindow.from_state: not a window state (or of another version)",
            details={"field": "state"},
        )
    try:
        made = _digest(state)
    except (TypeError, ValueError, RecursionError):  # not JSON data, or a dict that holds itself
        made = None
    if state.get("digest") != made:
        raise ValidationError(
            "ContextWindow.from_state: the state was changed since state() made it (its digest "
            "does not match its body)",
            details={"field": "digest"},
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
    return ValidationError(
        f"ContextWindow.from_state: pass {name}= ({why})", details={"field": name}
    )


def _check_counts(data: dict[str, Any], fmt: Format[Any], settings: Settings) -> None:
    """Check the estimator and the format are the state's, by what they are and count."""
    marks = list(estimator_marks(settings.estimator))
    probe = probe_of(settings.estimator)
    if marks != data["estimator"] or probe != data["probe"]:
        raise ValidationError(
            f"ContextWindow.from_state: the state was priced by {data['estimator']!r}, counting "
            f"{data['probe']!r} of its probe texts; this window's estimator is {marks!r}, "
            f"counting {probe!r}; pass the same estimator=",
            details={"field": "estimator"},
        )
    if fmt.name != data["format"]:
        raise ValidationError(
            f"ContextWindow.from_state: the state is of format {data['format']!r}, not "
            f"{fmt.name!r}",
            details={"field": "format"},
        )


def check_policy(decoded: Decoded, policy: CompactionPolicy) -> None:
    """Raise unless ``policy`` (the restored window's) is the one the state was made with."""
    if named(policy) != decoded.policy:
        raise ValidationError(
            f"ContextWindow.from_state: the state was made with policy {decoded.policy!r}, "
            f"this window has {named(policy)!r}; pass policy=",
            details={"field": "policy"},
        )


def _int(value: object, field: str) -> int:
    if type(value) is not int or value < 0:
        raise ValidationError(
            f"ContextWindow.from_state: malformed state ({field} holds {value!r:.40})",
            details={"field": field},
        )
    return value


def _ints(values: object, field: str) -> list[int]:
    # ``set(map(type, ...))``: one C pass over what may be every held turn's price.
    if not isinstance(values, list) or not set(map(type, values)) <= {int}:
        raise ValidationError(
            f"ContextWindow.from_state: malformed state ({field} is not a list of counts)",
            details={"field": field},
        )
    if values and min(values) < 0:
        raise ValidationError(
            f"ContextWindow.from_state: malformed state ({field} holds a negative count)",
            details={"field": field},
        )
    return values


def _counts(value: object, field: str) -> list[int]:
    """Return the counts of a state's ``field``: packed (``packed.pack``) or a list of them."""
    if isinstance(value, str):
        try:
            return unpack(value)
        except ValueError as error:
            raise ValidationError(
                f"ContextWindow.from_state: malformed state ({field}: {error})",
                details={"field": field},
            ) from None
    return _ints(value, field)


def _digests(value: object) -> list[str]:
    """Return the request's message digests: one string of them (or, before version 5, a list)."""
    if isinstance(value, str) and not len(value) % DIGEST_CHARS:
        return [value[start : start + DIGEST_CHARS] for start in range(0, len(value), DIGEST_CHARS)]
    if isinstance(value, list) and all(
        isinstance(digest, str) and len(digest) == DIGEST_CHARS for digest in value
    ):
        return value
    raise _unfit("the request's digests are not digests")


def _saved(data: dict[str, Any], calibration: Calibration) -> Saved:
    """Return the state's body, checked where it is cheap (counts, ranges, lengths)."""
    seen = data["seen"]
    count = _int(seen["count"], "seen")
    recipe = data["request"]
    if not isinstance(recipe, list):
        raise _unfit("request is not a list")
    for item in recipe:
        index = item if type(item) is int else item[1] if _is_unmarked(item) else None
        if index is not None and not 0 <= index < count:
            raise _unfit(f"the request names message {index} of {count}")
        if index is None and not isinstance(item, dict) and item != ["render"]:
            raise _unfit(f"the request holds {item!r:.40}")
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
    decisions = data["decisions"]
    if not isinstance(decisions, dict) or set(decisions) != {
        "masked",
        "excerpted",
        "dropped",
        "groups",
    }:
        raise _unfit("decisions")
    if data["cutctx_window"] == 3:  # one id each: runs of one turn
        decisions = _runs_of_one(decisions)
    return Saved(
        data,
        count,
        str(seen["fingerprint"]),
        _counts(data["prices"], "prices"),
        firsts,
        decisions,
        [from_json_data(item) if isinstance(item, dict) else item for item in recipe],
        digests,
        costs,
        tokens,
        bool(data["tail"]),
        str(data["planned_by"]),
        last,
        reading,
    )


def _runs_of_one(decisions: dict[str, Any]) -> dict[str, Any]:
    """Return version 3's decisions (a turn id each) in the runs of the current version."""
    return {
        **decisions,
        "dropped": [[turn_id, 1] for turn_id in decisions["dropped"]],
        "groups": [
            {
                **{key: value for key, value in group.items() if key != "turn_ids"},
                "runs": [[turn_id, 1] for turn_id in group["turn_ids"]],
            }
            for group in decisions["groups"]
        ],
    }


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


def _unfit(why: str) -> ValidationError:
    return ValidationError(
        f"ContextWindow.from_state: the state does not hold together ({why})",
        details={"field": "state"},
    )
