"""The values cutctx speaks in: turns, transcripts, budgets and the parts of a plan.

Every value is a frozen, slotted dataclass that refuses bad fields where it is born, with a
``baseaicore.ValidationError`` naming the field. Nothing here imports a policy or the gate.
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from baseaicore import ValidationError

from cutctx._core.digest import json_string_digest

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "EMPTY_METADATA",
    "GROUP_ID_PREFIX",
    "SUMMARY_TURN_ID_PREFIX",
    "Action",
    "CompactionBudget",
    "Role",
    "SummarizationRequest",
    "Transcript",
    "TranscriptTurn",
    "TurnAction",
    "TurnReplacement",
]

EMPTY_METADATA: Final[Mapping[str, str]] = MappingProxyType({})
"""The shared, read-only empty mapping every turn without metadata holds."""

SUMMARY_TURN_ID_PREFIX: Final = "summary:"
"""Every summary turn's id is this prefix followed by its group id."""

GROUP_ID_PREFIX: Final = "span-"
"""Every summary group id is this prefix followed by a digest of the span's turn ids."""

DEFAULT_PLACEHOLDER: Final = "[tool result masked by cutctx]"
"""The default label at the head of a masked stub."""


class Role(enum.StrEnum):
    """Who spoke a turn; the values are the wire strings, so ``Role("tool")`` works."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Action(enum.StrEnum):
    """What a plan does with one turn."""

    KEEP = "keep"
    MASK = "mask"
    SUMMARIZE = "summarize"
    DROP = "drop"
    EXCERPT = "excerpt"
    """A tool result over ``CompactionBudget.max_result_tokens`` sent as its head and tail lines.

    .. versionadded:: 0.1.1
    """


def _refuse(
    owner: str,
    name: str,
    expected: str,
    value: object,
    *,
    key: str | None = None,
    got: str | None = None,
) -> ValidationError:
    """Build the one-line error for a field that is not what it must be.

    ``details`` names the field, what it must be and the value's type, and holds the offending
    value itself under the field's own name (``key``, by default ``name``) when it is a plain
    scalar; a turn's content never goes into ``details``.
    """
    details: dict[str, Any] = {
        "field": f"{owner}.{name}",
        "expected": expected,
        "type": type(value).__name__,
    }
    if name != "content" and (value is None or isinstance(value, str | int | float)):
        details[key or name] = value
    got = got or f"{type(value).__name__} {value!r:.80}"
    return ValidationError(f"{owner}.{name} must be {expected}, got {got}", details=details)


def check_str(owner: str, name: str, value: object, *, empty: bool = False) -> str:
    """Return ``value`` if it is a string (non-empty unless ``empty``), else raise."""
    if not isinstance(value, str) or (not empty and not value):
        raise _refuse(owner, name, "a string" if empty else "a non-empty string", value)
    return value


_NAMES: Final = {
    "turn_id": "a non-empty turn_id",
    "group_id": "a non-empty group_id",
    "prompt_id": "the name of a versioned prompt record",
    "placeholder": "a non-empty placeholder",
}
"""What each kind of name must be, in the words of 0.1's messages."""


def check_name(owner: str, name: str, value: object, kind: str, *, key: str | None = None) -> str:
    """Return ``value`` if it is a string holding more than whitespace, else raise.

    For the names 0.1 refuses when blank (``kind``: a turn id, a group id, a prompt record or
    a placeholder): whitespace alone counts as empty.
    """
    # ``isspace`` is false for "" and allocates nothing (``strip`` would copy every id).
    if not isinstance(value, str) or not value or value.isspace():
        raise _refuse(owner, name, _NAMES[kind], value, key=key)
    return value


def check_count(owner: str, name: str, value: object) -> int:
    """Return ``value`` if it is an int (not a bool) that is at least zero, else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refuse(owner, name, "an int >= 0", value)
    if value < 0:
        raise _refuse(owner, name, "an int >= 0", value, got=f"a negative {name}: {value}")
    return value


def check_bool(owner: str, name: str, value: object) -> bool:
    """Return ``value`` if it is a bool, else raise."""
    if not isinstance(value, bool):
        raise _refuse(owner, name, "a bool", value)
    return value


def check_ratio(owner: str, name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite number above zero, else raise."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise _refuse(owner, name, "a finite positive number", value)
    return float(value)


def _frozen_metadata(value: object) -> Mapping[str, str]:
    """Return a read-only copy of a str-to-str mapping, so the caller's edits cannot leak in."""
    if value is EMPTY_METADATA:
        return EMPTY_METADATA
    # The exact-type test first: an ABC isinstance check is slow on this hot path.
    if type(value) is not dict and not isinstance(value, Mapping):
        raise _refuse("TranscriptTurn", "metadata", "a mapping of str to str", value)
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise ValidationError(
                f"TranscriptTurn.metadata must map str to str, got {key!r:.40}: {item!r:.40}",
                details={"field": "TranscriptTurn.metadata", "expected": "a mapping of str to str"},
            )
    return MappingProxyType(dict(value)) if value else EMPTY_METADATA


@dataclass(frozen=True, slots=True)
class TranscriptTurn:
    """One turn of a transcript, with its token estimate.

    Turns that share a ``tool_call_id`` form one exchange, which every plan keeps or removes as
    a unit. ``metadata`` is copied into a read-only mapping.

    Raises:
        ValidationError: for an empty id, a role that is not a ``Role``, non-string content or
            metadata, a negative or non-int estimate, or a non-bool ``pinned``.
    """

    turn_id: str
    role: Role
    content: str
    token_estimate: int
    tool_call_id: str | None = None
    pinned: bool = False
    metadata: Mapping[str, str] = field(default=EMPTY_METADATA, hash=False)

    def __post_init__(self) -> None:
        check_name("TranscriptTurn", "turn_id", self.turn_id, "turn_id")
        if not isinstance(self.role, Role):
            raise _refuse("TranscriptTurn", "role", "a cutctx.Role", self.role)
        check_str("TranscriptTurn", "content", self.content, empty=True)
        check_count("TranscriptTurn", "token_estimate", self.token_estimate)
        if self.tool_call_id is not None:
            check_str("TranscriptTurn", "tool_call_id", self.tool_call_id)
        check_bool("TranscriptTurn", "pinned", self.pinned)
        metadata = _frozen_metadata(self.metadata)
        if metadata is not self.metadata:
            object.__setattr__(self, "metadata", metadata)

    def __reduce__(self) -> tuple[type[TranscriptTurn], tuple[object, ...]]:
        # A read-only mapping cannot be pickled or deep-copied; rebuild from a plain dict.
        return (
            TranscriptTurn,
            (
                self.turn_id,
                self.role,
                self.content,
                self.token_estimate,
                self.tool_call_id,
                self.pinned,
                dict(self.metadata),
            ),
        )


@dataclass(frozen=True, slots=True)
class Transcript:
    """An ordered, immutable sequence of turns with unique ids.

    A list is accepted and stored as a tuple; ``Transcript()`` is the empty transcript. A
    compacted view is an ordinary transcript: it can be planned over again, its summary turns
    included.

    ``request_tokens`` (0 unless given) is what a request holding these turns costs beyond them
    — a reply's priming, which no turn carries. ``token_estimate()`` counts it, every budget
    leaves room for it (it is untouchable), and the views the executor makes carry it, so a plan
    that fits is a request that fits when counted. A format's ``to_transcript`` sets it to the
    format's ``request_overhead``. It is not part of equality: two transcripts of the same turns
    are equal.

    Raises:
        ValidationError: if ``turns`` is not a sequence of ``TranscriptTurn``, two turns share an
            id, or ``request_tokens`` is not a non-negative int.

    .. versionchanged:: 0.1.1
       ``request_tokens``.
    """

    turns: tuple[TranscriptTurn, ...] = ()
    request_tokens: int = field(default=0, compare=False)
    _total: int = field(init=False, repr=False, compare=False, hash=False)
    # Derived structure (see cutctx._core.invariants.layout), by protected_recent_turns.
    _layouts: dict[int, object] = field(init=False, repr=False, compare=False, hash=False)
    _ids: tuple[str, ...] | None = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        turns = self.turns
        if not isinstance(turns, tuple | list):
            raise _refuse("Transcript", "turns", "a tuple of TranscriptTurn", turns)
        seen: set[str] = set()
        total = 0
        for index, turn in enumerate(turns):
            if not isinstance(turn, TranscriptTurn):
                raise ValidationError(
                    f"Transcript.turns[{index}] must be a TranscriptTurn, "
                    f"got {type(turn).__name__}",
                    details={"field": "Transcript.turns", "index": index},
                )
            if turn.turn_id in seen:
                raise _duplicate_turns(turns, index)
            seen.add(turn.turn_id)
            total += turn.token_estimate
        extra = self.request_tokens
        if not isinstance(extra, int) or isinstance(extra, bool) or extra < 0:
            raise _refuse("Transcript", "request_tokens", "a non-negative int", extra)
        if isinstance(turns, list):
            object.__setattr__(self, "turns", tuple(turns))
        object.__setattr__(self, "_total", total + extra)
        object.__setattr__(self, "_layouts", {})
        object.__setattr__(self, "_ids", None)

    def token_estimate(self) -> int:
        """Return the sum of the turns' token estimates, and ``request_tokens``."""
        return self._total

    def turn_ids(self) -> tuple[str, ...]:
        """Return the turn ids in order (made once; the transcript is immutable)."""
        ids = self._ids
        if ids is None:
            ids = tuple([turn.turn_id for turn in self.turns])
            object.__setattr__(self, "_ids", ids)
        return ids


def _duplicate_turns(turns: Sequence[object], index: int) -> ValidationError:
    """Build the error for turn ids held twice: the first repeat, and every repeated id sorted.

    The slow path of a refusal: it reads every turn, so the caller hears of all of them at once.
    """
    first = turns[index]
    assert isinstance(first, TranscriptTurn)  # noqa: S101 - the caller checked it
    counts = Counter(turn.turn_id for turn in turns if isinstance(turn, TranscriptTurn))
    repeated = sorted(turn_id for turn_id, count in counts.items() if count > 1)
    return ValidationError(
        f"Transcript.turns holds the turn id {first.turn_id!r} twice"
        + (f" ({len(repeated)} ids are repeated)" if len(repeated) > 1 else ""),
        details={
            "field": "Transcript.turns",
            "index": index,
            "turn_id": first.turn_id,
            "duplicate_turn_ids": repeated,
        },
    )


@dataclass(frozen=True, slots=True)
class CompactionBudget:
    """How many tokens the compacted view may hold, and how many final turns are untouchable.

    ``max_result_tokens`` (keyword-only; ``None``, the default, turns it off) caps what one tool
    result may cost: a result priced above it may be sent as an excerpt (``Action.EXCERPT``),
    in the protected tail too, and an untouchable result counts at its excerpt's price for
    ``BudgetUnsatisfiable``.

    Raises:
        ValidationError: if ``max_tokens`` or ``protected_recent_turns`` is negative or not an
            int, or ``max_result_tokens`` is neither ``None`` nor an int of at least 1.

    .. versionchanged:: 0.1.1
       ``max_result_tokens``.
    """

    max_tokens: int
    protected_recent_turns: int = 4
    max_result_tokens: int | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        check_count("CompactionBudget", "max_tokens", self.max_tokens)
        check_count("CompactionBudget", "protected_recent_turns", self.protected_recent_turns)
        cap = self.max_result_tokens
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise _refuse("CompactionBudget", "max_result_tokens", "None or an int >= 1", cap)

    def __repr__(self) -> str:
        # 0.1's repr when the cap is off: budgets are logged, and logs are compared.
        cap = self.max_result_tokens
        return (
            f"CompactionBudget(max_tokens={self.max_tokens!r}, "
            f"protected_recent_turns={self.protected_recent_turns!r}"
            + ("" if cap is None else f", max_result_tokens={cap!r}")
            + ")"
        )


@dataclass(frozen=True, slots=True)
class TurnReplacement:
    """The body a ``MASK`` or ``EXCERPT`` action puts in place of a turn's content, and its price.

    .. versionchanged:: 0.1.1
       Also an excerpt's body.
    """

    content: str
    token_estimate: int

    def __post_init__(self) -> None:
        check_str("TurnReplacement", "content", self.content, empty=True)
        check_count("TurnReplacement", "token_estimate", self.token_estimate)

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"content": ..., "token_estimate": ...}``, as a plan's ``to_dict()`` writes it.

        .. versionadded:: 0.1.0
        """
        return {"content": self.content, "token_estimate": self.token_estimate}


@dataclass(frozen=True, slots=True)
class TurnAction:
    """What a plan does with one turn.

    ``replacement`` is set exactly for ``MASK`` and ``EXCERPT`` (the stub or the excerpt, and
    its token estimate) and ``summary_group`` exactly for ``SUMMARIZE``.

    .. versionchanged:: 0.1.1
       ``EXCERPT`` carries its excerpt as the replacement.
    """

    turn_id: str
    action: Action
    summary_group: str | None = None
    replacement: TurnReplacement | None = None

    def __post_init__(self) -> None:
        check_name("TurnAction", "turn_id", self.turn_id, "turn_id")
        if not isinstance(self.action, Action):
            raise _refuse("TurnAction", "action", "a cutctx.Action", self.action)
        if (self.action is Action.SUMMARIZE) != (self.summary_group is not None):
            raise ValidationError(
                f"TurnAction for {self.turn_id!r}: summary_group is set exactly when the "
                f"action is SUMMARIZE (action {self.action.name}, group {self.summary_group!r})",
                details={"field": "TurnAction.summary_group", "turn_id": self.turn_id},
            )
        if self.summary_group is not None:
            check_name("TurnAction", "summary_group", self.summary_group, "group_id")
        replaces = self.action is Action.MASK or self.action is Action.EXCERPT
        if replaces != (self.replacement is not None):
            raise ValidationError(
                f"TurnAction for {self.turn_id!r}: replacement is set exactly when the action "
                f"is MASK or EXCERPT (action {self.action.name})",
                details={"field": "TurnAction.replacement", "turn_id": self.turn_id},
            )
        if self.replacement is not None and not isinstance(self.replacement, TurnReplacement):
            raise _refuse("TurnAction", "replacement", "a TurnReplacement", self.replacement)

    def to_dict(self) -> dict[str, Any]:
        """Return the action as plain JSON data: one entry of a plan's ``to_dict()["actions"]``.

        .. versionadded:: 0.1.0
        """
        replacement = self.replacement
        return {
            "action": self.action.value,
            "replacement": None if replacement is None else replacement.to_dict(),
            "summary_group": self.summary_group,
            "turn_id": self.turn_id,
        }


@dataclass(frozen=True, slots=True)
class SummarizationRequest:
    """One summary the caller must produce: the turns it replaces and the size to aim for.

    ``prompt_id`` names a prompt record of the caller's; it is never prompt text.
    """

    group_id: str
    turn_ids: tuple[str, ...]
    target_tokens: int
    prompt_id: str

    def __post_init__(self) -> None:
        check_name("SummarizationRequest", "group_id", self.group_id, "group_id")
        turn_ids = self.turn_ids
        if not isinstance(turn_ids, tuple | list):
            raise _refuse("SummarizationRequest", "turn_ids", "a non-empty tuple of str", turn_ids)
        if not turn_ids:
            raise ValidationError(
                f"SummarizationRequest {self.group_id!r} covers no turns: turn_ids must be a "
                "non-empty tuple of str",
                details={
                    "field": "SummarizationRequest.turn_ids",
                    "expected": "a non-empty tuple of str",
                    "type": type(turn_ids).__name__,
                    "turn_ids": [],
                },
            )
        for turn_id in turn_ids:
            check_name("SummarizationRequest", "turn_ids[]", turn_id, "turn_id", key="turn_id")
        if len(set(turn_ids)) != len(turn_ids):
            repeated = sorted({turn_id for turn_id in turn_ids if turn_ids.count(turn_id) > 1})
            raise ValidationError(
                f"SummarizationRequest {self.group_id!r} repeats a turn id: {repeated!r:.80}",
                details={
                    "field": "SummarizationRequest.turn_ids",
                    "expected": "distinct turn ids",
                    "duplicate_turn_ids": repeated,
                },
            )
        if isinstance(turn_ids, list):
            object.__setattr__(self, "turn_ids", tuple(turn_ids))
        check_count("SummarizationRequest", "target_tokens", self.target_tokens)
        check_name("SummarizationRequest", "prompt_id", self.prompt_id, "prompt_id")

    @property
    def summary_turn_id(self) -> str:
        """The id of the turn the summary becomes: ``SUMMARY_TURN_ID_PREFIX + group_id``.

        .. versionadded:: 0.1.0
        """
        return SUMMARY_TURN_ID_PREFIX + self.group_id

    def to_dict(self) -> dict[str, Any]:
        """Return the request as plain JSON data: one entry of a plan's requests in ``to_dict()``.

        .. versionadded:: 0.1.0
        """
        return {
            "group_id": self.group_id,
            "turn_ids": list(self.turn_ids),
            "target_tokens": self.target_tokens,
            "prompt_id": self.prompt_id,
        }


def group_id_for(turn_ids: tuple[str, ...] | list[str]) -> str:
    r"""Return a span's group id: the prefix and the first 16 hex digits of its ids' digest.

    The digest is ``json_string_digest`` of the ids joined by NUL, i.e.
    ``baseaicore.sha256_of("\0".join(turn_ids))`` as 0.1 computes it.
    """
    return GROUP_ID_PREFIX + json_string_digest("\0".join(turn_ids))[:16]


# Hot-path constructors. cutctx's own plan builder, executor and chain make many values from parts
# that were validated already (fields of validated turns, stubs the masking policy priced); these
# skip the re-validation in ``__post_init__`` and nothing else. The plan they end up in still
# passes the invariants gate. Never use them on caller input.

_new = object.__new__


def _slot_setters(kind: type, *names: str) -> tuple[Callable[[object, object], None], ...]:
    """Return the slot descriptors' setters of ``kind``: the cheapest way to fill a new object."""
    return tuple(vars(kind)[name].__set__ for name in names)


_ACTION = _slot_setters(TurnAction, "turn_id", "action", "summary_group", "replacement")
_REPLACEMENT = _slot_setters(TurnReplacement, "content", "token_estimate")
_TURN = _slot_setters(
    TranscriptTurn,
    "turn_id",
    "role",
    "content",
    "token_estimate",
    "tool_call_id",
    "pinned",
    "metadata",
)
_REQUEST = _slot_setters(SummarizationRequest, "group_id", "turn_ids", "target_tokens", "prompt_id")
_TRANSCRIPT = _slot_setters(Transcript, "turns", "request_tokens", "_total", "_layouts", "_ids")


def trusted_action(
    turn_id: str, action: Action, group: str | None, replacement: TurnReplacement | None
) -> TurnAction:
    """Return ``TurnAction(turn_id, action, group, replacement)`` without re-validating it."""
    made: TurnAction = _new(TurnAction)
    set_id, set_action, set_group, set_replacement = _ACTION
    set_id(made, turn_id)
    set_action(made, action)
    set_group(made, group)
    set_replacement(made, replacement)
    return made


def trusted_replacement(content: str, token_estimate: int) -> TurnReplacement:
    """Return ``TurnReplacement(content, token_estimate)`` without re-validating it."""
    made: TurnReplacement = _new(TurnReplacement)
    set_content, set_estimate = _REPLACEMENT
    set_content(made, content)
    set_estimate(made, token_estimate)
    return made


def trusted_turn(
    like: TranscriptTurn, content: str, token_estimate: int, metadata: Mapping[str, str]
) -> TranscriptTurn:
    """Return a copy of the valid turn ``like`` with a new body, estimate and read-only metadata."""
    made: TranscriptTurn = _new(TranscriptTurn)
    set_id, set_role, set_content, set_estimate, set_call, set_pinned, set_metadata = _TURN
    set_id(made, like.turn_id)
    set_role(made, like.role)
    set_content(made, content)
    set_estimate(made, token_estimate)
    set_call(made, like.tool_call_id)
    set_pinned(made, like.pinned)
    set_metadata(made, metadata)
    return made


def trusted_request(
    group_id: str, turn_ids: tuple[str, ...], target_tokens: int, prompt_id: str
) -> SummarizationRequest:
    """Return ``SummarizationRequest(...)`` for the ids of validated turns and a valid target."""
    made: SummarizationRequest = _new(SummarizationRequest)
    set_group, set_ids, set_target, set_prompt = _REQUEST
    set_group(made, group_id)
    set_ids(made, turn_ids)
    set_target(made, target_tokens)
    set_prompt(made, prompt_id)
    return made


def trusted_transcript(
    turns: tuple[TranscriptTurn, ...], total: int | None = None, request_tokens: int = 0
) -> Transcript:
    """Return ``Transcript(turns, request_tokens)`` for valid turns whose ids are known unique.

    ``total``, when given, is the sum of their estimates and ``request_tokens``, known already.
    """
    made: Transcript = _new(Transcript)
    set_turns, set_request, set_total, set_layouts, set_ids = _TRANSCRIPT
    set_turns(made, turns)
    set_request(made, request_tokens)
    set_total(
        made,
        sum([turn.token_estimate for turn in turns]) + request_tokens if total is None else total,
    )
    set_layouts(made, {})
    set_ids(made, None)
    return made
