"""``CompactionPlan``: the auditable value a policy returns, validated as it is born."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._core.actions import ACTIONS, ActionTable
from cutctx._core.digest import canonical_json, json_digest, json_string
from cutctx._core.invariants import check_plan
from cutctx._core.values import (
    CompactionBudget,
    SummarizationRequest,
    Transcript,
    TurnAction,
    TurnReplacement,
    check_bool,
    check_count,
    check_ratio,
    check_str,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["CompactionPlan", "NotCarried", "plan_from_table", "table_of"]

# An enum's ``.value`` is a descriptor call; a plan serializes one action per turn.
_WIRE = tuple(action.value for action in ACTIONS)
_HEADS = tuple(f'{{"action":"{wire}","replacement":' for wire in _WIRE)
_PIECE = 1024
"""Actions per piece of the canonical JSON that ``plan_hash`` digests."""


class NotCarried:
    """What ``plan.transcript`` and ``plan.budget`` read as: the plan keeps neither.

    A plan is validated against the transcript and budget it is for, then holds no reference to
    them; reading either gives this marker, whose ``repr`` says so.
    """

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"<CompactionPlan.{self._name}: not carried on the plan>"


_NOT_CARRIED: Final = {name: NotCarried(name) for name in ("transcript", "budget")}


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPlan:
    """What a policy decided for every turn, with the figures it expects; nothing is spent yet.

    Every field is keyword-only, as in 0.1. The constructor also takes the ``transcript`` and
    ``budget`` the plan is for (omitting either is a ``TypeError``) and runs the invariants gate
    against them before the object exists, so every plan in existence keeps the untouchable set,
    keeps exchanges whole and states its budget outcome honestly; the plan keeps no reference to
    either (``plan.transcript`` reads as a marker saying so). ``estimator_ratio`` is the
    character ratio that priced the plan's stubs or excerpts, if any; ``estimator_name`` names
    any other estimator that did.

    A plan made by cutctx's policies holds its actions as columns (see ``cutctx._core.actions``) and
    makes ``actions`` — the same ``TurnAction`` values — on first read, so planning and
    applying cost no object per turn; equality, hashing, ``repr`` and pickling see ``actions``
    as an ordinary field.

    Raises:
        ValidationError: for a field of the wrong type or a violated invariant.
        BudgetUnsatisfiable: if the untouchable set alone is over ``budget``.
    """

    actions: tuple[TurnAction, ...]
    summarization_requests: tuple[SummarizationRequest, ...] = ()
    tokens_before: int
    tokens_after_estimate: int
    policy_name: str
    policy_version: str
    estimator_ratio: float | None = None
    budget_unmet: bool = False
    transcript: InitVar[Transcript]
    budget: InitVar[CompactionBudget]
    estimator_name: str | None = None
    _table: ActionTable = field(init=False, repr=False, compare=False, hash=False)
    _hash: str | None = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self, transcript: Transcript, budget: CompactionBudget) -> None:
        if not isinstance(transcript, Transcript):
            raise _wrong("transcript", "a cutctx.Transcript", transcript)
        if not isinstance(budget, CompactionBudget):
            raise _wrong("budget", "a cutctx.CompactionBudget", budget)
        actions = _tuple_of(self.actions, TurnAction, "actions")
        object.__setattr__(self, "actions", actions)
        object.__setattr__(
            self,
            "summarization_requests",
            _tuple_of(self.summarization_requests, SummarizationRequest, "summarization_requests"),
        )
        check_count("CompactionPlan", "tokens_before", self.tokens_before)
        check_count("CompactionPlan", "tokens_after_estimate", self.tokens_after_estimate)
        check_str("CompactionPlan", "policy_name", self.policy_name)
        check_str("CompactionPlan", "policy_version", self.policy_version)
        if self.estimator_ratio is not None:
            ratio = check_ratio("CompactionPlan", "estimator_ratio", self.estimator_ratio)
            object.__setattr__(self, "estimator_ratio", ratio)
        check_bool("CompactionPlan", "budget_unmet", self.budget_unmet)
        if self.estimator_name is not None:
            check_str("CompactionPlan", "estimator_name", self.estimator_name)
        self._admit(ActionTable.of(actions), transcript, budget)

    def _admit(self, table: ActionTable, transcript: Transcript, budget: CompactionBudget) -> None:
        """Run the invariants gate over ``table`` and the figures, then hold ``table``."""
        check_plan(
            transcript,
            budget,
            table,
            self.summarization_requests,
            self.tokens_before,
            self.tokens_after_estimate,
            self.budget_unmet,
        )
        object.__setattr__(self, "_table", table)

    if not TYPE_CHECKING:  # pragma: no branch - type checkers see the field, not the fallback

        def __getattr__(self, name: str) -> tuple[TurnAction, ...] | NotCarried:
            # Reached only for an unset slot: ``actions`` of a plan made from a table; or for
            # the init-only ``transcript`` and ``budget``, which pretty-printers read through
            # ``__dataclass_fields__`` (0.1 answered them with a marker, not an AttributeError).
            if name in _NOT_CARRIED:
                return _NOT_CARRIED[name]
            if name != "actions":
                raise AttributeError(
                    f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self
                )
            actions = self._table.actions()
            object.__setattr__(self, "actions", actions)
            return actions

    def to_dict(self) -> dict[str, Any]:
        """Return the plan as plain JSON data (``estimator_name`` only when one was recorded).

        It is made of the actions' and requests' own ``to_dict()`` pieces.
        """
        # The actions are made from the columns for this call only; the plan does not keep them.
        actions = self._table.actions()
        return {"actions": [action.to_dict() for action in actions], **self._figures()}

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, transcript: Transcript, budget: CompactionBudget
    ) -> CompactionPlan:
        """Return the plan a ``to_dict()`` object describes, through the gate like any plan.

        ``from_dict(plan.to_dict(), ...) == plan``, with the same ``plan_hash()``. ``transcript``
        and ``budget`` are the ones the plan is for, as for the constructor.

        .. versionadded:: 0.1.0

        Raises:
            ValidationError: naming the key or index that is malformed (a missing or unknown key,
                a value of the wrong type) or every invariant a tampered plan violates.
            BudgetUnsatisfiable: if the untouchable set alone is over ``budget``.
        """
        return cls(**_plan_fields(data), transcript=transcript, budget=budget)

    @classmethod
    def from_json(
        cls, text: str | bytes, *, transcript: Transcript, budget: CompactionBudget
    ) -> CompactionPlan:
        """Return the plan whose JSON text (``to_json()``, or any JSON of ``to_dict()``) is given.

        .. versionadded:: 0.1.0

        Raises:
            ValidationError: if ``text`` is not JSON, and as ``from_dict``.
            BudgetUnsatisfiable: if the untouchable set alone is over ``budget``.
        """
        if not isinstance(text, str | bytes):
            raise _wrong("from_json(text)", "JSON text (str or bytes)", text)
        try:
            data = json.loads(text)
        except ValueError as error:  # JSONDecodeError and UnicodeDecodeError alike
            raise ValidationError(
                f"CompactionPlan.from_json: the text is not JSON ({error})",
                details={"field": "text"},
            ) from None
        return cls.from_dict(data, transcript=transcript, budget=budget)

    def to_json(self) -> str:
        """Return the canonical JSON form: sorted keys, no whitespace, hashed as UTF-8.

        It is ``canonical_json(self.to_dict())``, written without building the dicts: the
        actions (one object per turn, keys already in sorted order) are formatted directly, and
        ``"actions"`` sorts before every other key.
        """
        return "".join(self._json_pieces())

    def _json_pieces(self) -> Iterator[str]:
        """Yield ``to_json()`` in pieces of at most ``_PIECE`` actions.

        ``plan_hash`` digests them one at a time, so the whole text is never held.
        """
        table = self._table
        yield '{"actions":['
        for start in range(0, len(table.kinds), _PIECE):
            joined = ",".join(_actions_json(table, start, start + _PIECE))
            yield joined if start == 0 else "," + joined
        yield "]," + canonical_json(self._figures())[1:]

    def _figures(self) -> dict[str, Any]:
        """Every field of ``to_dict()`` but the actions."""
        data: dict[str, Any] = {
            "summarization_requests": [
                request.to_dict() for request in self.summarization_requests
            ],
            "tokens_before": self.tokens_before,
            "tokens_after_estimate": self.tokens_after_estimate,
            "policy_name": self.policy_name,
            "policy_version": self.policy_version,
            "estimator_ratio": self.estimator_ratio,
            "budget_unmet": self.budget_unmet,
        }
        if self.estimator_name is not None:
            data["estimator_name"] = self.estimator_name
        return data

    def canonical_json(self) -> str:
        """Return the canonical JSON form, the text ``plan_hash()`` digests (``to_json()``).

        .. versionadded:: 0.1.0
        """
        return self.to_json()

    def plan_hash(self) -> str:
        r"""Return the SHA-256 hex digest of ``canonical_json()`` as UTF-8, the same everywhere.

        A lone surrogate in a string of the plan is hashed as its JSON escape ``\udXXX``
        (UTF-8 cannot encode it), so the hash never raises.

        It is a method, as in 0.1; the report's ``plan_hash`` is a field holding its value.
        """
        if self._hash is None:
            digest = json_digest(self._json_pieces())
            object.__setattr__(self, "_hash", digest)
            return digest
        return self._hash


def plan_from_table(  # noqa: PLR0917 - the plan's fields, in the order they are declared
    table: ActionTable,
    requests: tuple[SummarizationRequest, ...],
    tokens_before: int,
    tokens_after_estimate: int,
    policy_name: str,
    policy_version: str,
    estimator_ratio: float | None,
    budget_unmet: bool,
    *,
    transcript: Transcript,
    budget: CompactionBudget,
    estimator_name: str | None,
) -> CompactionPlan:
    """Return the plan whose actions ``table`` holds: cutctx's own builders' constructor.

    The fields come from cutctx's own code, valid by construction; the gate runs over the table
    exactly as it does for a plan made through ``CompactionPlan(...)``. ``actions`` is left unset
    until first read (see ``CompactionPlan.__getattr__``).
    """
    plan: CompactionPlan = object.__new__(CompactionPlan)
    fields = (
        ("summarization_requests", requests),
        ("tokens_before", tokens_before),
        ("tokens_after_estimate", tokens_after_estimate),
        ("policy_name", policy_name),
        ("policy_version", policy_version),
        ("estimator_ratio", estimator_ratio),
        ("budget_unmet", budget_unmet),
        ("estimator_name", estimator_name),
        ("_hash", None),
    )
    for name, value in fields:
        object.__setattr__(plan, name, value)
    plan._admit(table, transcript, budget)
    return plan


def table_of(plan: CompactionPlan) -> ActionTable:
    """Return the columns ``plan``'s actions are held in (for the executor and the chain)."""
    return plan._table


def _actions_json(table: ActionTable, start: int, stop: int) -> list[str]:
    """Return each action's canonical JSON object (as ``canonical_json`` writes it).

    Only the actions from ``start`` to ``stop``.
    """
    string = json_string
    stub = _quoted if table.plain_stubs else string
    return [
        f"{_HEADS[code]}"
        f"{'null' if text is None else _replacement_json(stub(text), estimate)}"
        f',"summary_group":{"null" if group is None else string(group)}'
        f',"turn_id":{string(turn_id)}}}'
        for turn_id, code, text, estimate, group in table.rows(start, stop)
    ]


def _replacement_json(content: str, estimate: int) -> str:
    """Return a replacement's canonical JSON object, given its content as a JSON string."""
    return f'{{"content":{content},"token_estimate":{estimate}}}'


def _quoted(text: str) -> str:
    """Return ``text`` as a JSON string, for a text known to need no escape."""
    return f'"{text}"'


def _wrong(name: str, expected: str, value: object) -> ValidationError:
    return ValidationError(
        f"CompactionPlan.{name} must be {expected}, got {type(value).__name__}",
        details={"field": f"CompactionPlan.{name}", "expected": expected},
    )


def _tuple_of[T](value: object, kind: type[T], name: str) -> tuple[T, ...]:
    """Return ``value`` as a tuple if it is a tuple or list of ``kind``, else raise."""
    if not isinstance(value, tuple | list) or not all(isinstance(item, kind) for item in value):
        raise _wrong(name, f"a tuple of {kind.__name__}", value)
    return tuple(value)


# Reading a plan back from its dict (``CompactionPlan.from_dict``): every key is required and no
# other is allowed, each value is checked for its JSON type here, so that a malformed record fails
# with the key or index it lacks; the values themselves are then checked where they are born.

_PLAN_KEYS: Final = frozenset(
    {
        "actions",
        "summarization_requests",
        "tokens_before",
        "tokens_after_estimate",
        "policy_name",
        "policy_version",
        "estimator_ratio",
        "budget_unmet",
    }
)
_ACTION_KEYS: Final = frozenset({"action", "replacement", "summary_group", "turn_id"})
_REPLACEMENT_KEYS: Final = frozenset({"content", "token_estimate"})
_REQUEST_KEYS: Final = frozenset({"group_id", "turn_ids", "target_tokens", "prompt_id"})
_BY_WIRE: Final = {action.value: action for action in ACTIONS}


def _malformed(where: str, problem: str) -> ValidationError:
    return ValidationError(
        f"CompactionPlan.from_dict: {where} {problem}", details={"field": where or "plan"}
    )


def _object(
    value: object, where: str, keys: frozenset[str], optional: frozenset[str]
) -> Mapping[str, Any]:
    """Return ``value`` if it is an object with exactly ``keys`` (and any of ``optional``)."""
    if not isinstance(value, Mapping):
        raise _malformed(where, f"must be a JSON object, got {type(value).__name__}")
    missing = sorted(keys - value.keys())
    if missing:
        raise _malformed(where, f"lacks the key {missing[0]!r}")
    unknown = sorted(str(key) for key in value.keys() - keys - optional)
    if unknown:
        raise _malformed(where, f"holds the unknown key {unknown[0]!r}")
    return value


def _array(value: object, where: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise _malformed(where, f"must be a JSON array, got {type(value).__name__}")
    return list(value)


def _born[T](where: str, make: Callable[[], T]) -> T:
    """Return ``make()``, naming ``where`` in the error a value refuses its fields with."""
    try:
        return make()
    except ValidationError as error:
        raise ValidationError(
            f"CompactionPlan.from_dict: {where}: {error.message}",
            details={**error.details, "field": where},
        ) from None


def _plan_fields(data: object) -> dict[str, Any]:
    """Return the constructor's fields (all but transcript and budget) from a plan's dict."""
    plan = _object(data, "plan", _PLAN_KEYS, frozenset({"estimator_name"}))
    actions = [
        _action(item, f"actions[{index}]")
        for index, item in enumerate(_array(plan["actions"], "actions"))
    ]
    requests = [
        _request(item, f"summarization_requests[{index}]")
        for index, item in enumerate(
            _array(plan["summarization_requests"], "summarization_requests")
        )
    ]
    fields = {key: plan[key] for key in _PLAN_KEYS - {"actions", "summarization_requests"}}
    fields["actions"] = tuple(actions)
    fields["summarization_requests"] = tuple(requests)
    fields["estimator_name"] = plan.get("estimator_name")
    return fields


def _action(value: object, where: str) -> TurnAction:
    item = _object(value, where, _ACTION_KEYS, frozenset())
    wire = item["action"]
    if not isinstance(wire, str) or wire not in _BY_WIRE:
        raise _malformed(f"{where}.action", f"must be one of {', '.join(_WIRE)}, got {wire!r:.40}")
    raw = item["replacement"]
    replacement = None
    if raw is not None:
        body = _object(raw, f"{where}.replacement", _REPLACEMENT_KEYS, frozenset())
        replacement = _born(
            f"{where}.replacement",
            lambda: TurnReplacement(body["content"], body["token_estimate"]),
        )
    return _born(
        where,
        lambda: TurnAction(item["turn_id"], _BY_WIRE[wire], item["summary_group"], replacement),
    )


def _request(value: object, where: str) -> SummarizationRequest:
    item = _object(value, where, _REQUEST_KEYS, frozenset())
    turn_ids = _array(item["turn_ids"], f"{where}.turn_ids")
    return _born(
        where,
        lambda: SummarizationRequest(
            item["group_id"], tuple(turn_ids), item["target_tokens"], item["prompt_id"]
        ),
    )
