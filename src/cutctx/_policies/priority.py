"""``PriorityPolicy``: shed level by level, lowest priority first.

Each level is shed with the same pieces as the single-purpose policies: its tool results are
masked with ``ObservationMaskingPolicy``'s stubs (``offers``, ``mask_in_order``) and its
exchanges dropped as ``DropOldestPolicy`` drops them (``drop_in_order``).
"""

from __future__ import annotations

import re
from itertools import groupby
from typing import TYPE_CHECKING, ClassVar, Final

from baseaicore import ValidationError

from cutctx._core.metadata import PRIORITY_METADATA
from cutctx._core.values import (
    DEFAULT_PLACEHOLDER,
    EMPTY_METADATA,
    Action,
    CompactionBudget,
    Role,
    Transcript,
    TranscriptTurn,
    check_bool,
    check_count,
    check_name,
)
from cutctx._policies.config import estimator_config
from cutctx._policies.draft import BuiltinPolicy, Draft, estimator_marks, keep_all
from cutctx._policies.drop import drop_actions, drop_in_order, unit_heads
from cutctx._policies.masking import (
    Stubber,
    check_estimator,
    floor_start,
    mask_in_order,
    offers,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, MutableSequence, Sequence
    from typing import Any, Self

    from cutctx._core.invariants import Layout, Units
    from cutctx._core.protocols import TokenEstimator
    from cutctx._policies.config import Config
    from cutctx._policies.draft import Describe

__all__ = ["PriorityPolicy", "turn_priorities"]

_INTEGER: Final = re.compile(r"-?[0-9]+", re.ASCII)
_MAX_NAMED = 10


class PriorityPolicy(BuiltinPolicy):
    """Sheds by priority: every lower level gives all it can before a higher one is touched.

    A turn's priority is the integer in its metadata under ``cutctx.priority`` (0 without one);
    an exchange's is the highest of its members', and every member is shed at that level. Level
    by level, lowest first, until the budget fits: with ``mask_results``, the level's eligible
    tool results are masked first, oldest first, with the stubs ``ObservationMaskingPolicy``
    writes (``keep_recent_results`` being its floor); then the level's exchanges are dropped,
    oldest first, as ``DropOldestPolicy`` drops them. Untouchable turns stay untouchable. With
    every turn at one priority and ``mask_results=False`` it decides exactly as
    ``DropOldestPolicy``.

    >>> from cutctx import CompactionBudget, Role, Transcript, TranscriptTurn
    >>> t = Transcript((TranscriptTurn("u1", Role.USER, "a", 5, metadata={"cutctx.priority": "2"}),
    ...                 TranscriptTurn("u2", Role.USER, "b", 5)))
    >>> [a.action.value for a in PriorityPolicy().decide(t, CompactionBudget(6, 0)).actions]
    ['keep', 'drop']

    Raises:
        ValidationError: for a configuration value of the wrong type or range, and from
            ``decide`` for a turn whose ``cutctx.priority`` is not an integer (naming it).

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_estimator", "_keep_recent_results", "_mask_results", "_placeholder")

    _NAME: ClassVar[str] = "priority"
    _VERSION: ClassVar[str] = "1.0.0"
    drops: ClassVar[bool] = True  # and masks, but not only: it drops results seen whole
    _PRICES_ONLY: ClassVar[bool] = True

    def __init__(
        self,
        *,
        mask_results: bool = False,
        keep_recent_results: int = 0,
        placeholder: str = DEFAULT_PLACEHOLDER,
        estimator: TokenEstimator | None = None,
    ) -> None:
        owner = "PriorityPolicy"
        self._mask_results = check_bool(owner, "mask_results", mask_results)
        self._keep_recent_results = check_count(owner, "keep_recent_results", keep_recent_results)
        self._placeholder = check_name(owner, "placeholder", placeholder, "placeholder")
        self._estimator = check_estimator(owner, estimator)

    @property
    def mask_results(self) -> bool:
        """Whether each level's tool results are masked before its exchanges are dropped."""
        return self._mask_results

    @property
    def keep_recent_results(self) -> int:
        """How many of the most recent ``TOOL`` turns are never masked."""
        return self._keep_recent_results

    @property
    def placeholder(self) -> str:
        """The label at the head of every stub."""
        return self._placeholder

    @property
    def estimator(self) -> TokenEstimator:
        """The estimator that prices stubs."""
        return self._estimator

    def _config(self, describe: Describe) -> dict[str, Any]:
        del describe  # no members
        return {
            "mask_results": self._mask_results,
            "keep_recent_results": self._keep_recent_results,
            "placeholder": self._placeholder,
            "estimator": estimator_config(self._estimator),
        }

    @classmethod
    def _from_config(cls, config: Config) -> Self:
        return cls(
            mask_results=config.flag("mask_results"),
            keep_recent_results=config.count("keep_recent_results"),
            placeholder=config.text("placeholder"),
            estimator=config.estimator("estimator"),
        )

    def __repr__(self) -> str:
        return (
            f"PriorityPolicy(mask_results={self._mask_results}, "
            f"keep_recent_results={self._keep_recent_results}, "
            f"placeholder={self._placeholder!r}, estimator={self._estimator!r})"
        )

    def _prices_only(self) -> bool:
        # Priorities are metadata a masked turn keeps; masking reads roles and masked marks.
        return not self._mask_results

    def _draft(self, transcript: Transcript, budget: CompactionBudget, shape: Layout) -> Draft:
        del transcript  # the layout holds the turns (the real ones, when re-priced)
        turns = shape.turns
        priorities = turn_priorities(turns)
        limit = budget.max_tokens
        if shape.total <= limit:
            return keep_all(shape)
        units = shape.units
        level = _exchange_levels(units, priorities)
        unit_of = units.unit_of
        # A unit is named by its earliest member, so its level is ``level[unit]``.
        heads = _by_level(unit_heads(units), level.__getitem__)
        draft = Draft([Action.KEEP] * len(turns), shape.total)
        unit_tokens = units.unit_tokens
        results: dict[int, list[int]] = {}
        if self._mask_results:
            draft.replacements = [None] * len(turns)
            unit_tokens = unit_tokens[:]  # re-priced as stubs replace bodies
            stop = floor_start(turns, self._keep_recent_results)
            tool = Role.TOOL
            results = _by_level(
                (i for i in range(stop) if turns[i].role is tool),
                lambda index: level[unit_of[index]],
            )
        stubber = Stubber(self._placeholder, self._estimator)
        masked = False
        dropped: set[int] = set()
        for rank in heads:
            if rank in results:
                if _mask_level(draft, shape, results[rank], unit_tokens, stubber, limit):
                    masked = True
                if draft.tokens <= limit:
                    break
            draft.tokens = drop_in_order(
                units, heads[rank], unit_tokens, draft.tokens, limit, dropped
            )
            if draft.tokens <= limit:
                break
        if dropped:
            _drop_units(draft, units, dropped)
        if masked:
            # Recorded even when a later drop took every stub: their prices decided the drops.
            draft.estimator_ratio, draft.estimator_name = estimator_marks(self._estimator)
        return draft


def _exchange_levels(units: Units, priorities: Sequence[int]) -> list[int]:
    """Return each unit's level (at its earliest member's index): its members' highest priority."""
    level = list(priorities)
    for index, unit in enumerate(units.unit_of):
        if unit != index and priorities[index] > level[unit]:
            level[unit] = priorities[index]
    return level


def _by_level(indices: Iterable[int], level_of: Callable[[int], int]) -> dict[int, list[int]]:
    """Return ``indices`` grouped by ``level_of``, lowest level first, each group in order."""
    ordered = sorted(indices, key=level_of)  # a stable sort keeps each level in order
    return {rank: list(group) for rank, group in groupby(ordered, key=level_of)}


def _drop_units(draft: Draft, units: Units, dropped: set[int]) -> None:
    """Mark every member of a ``dropped`` unit ``DROP`` (a masked member loses its stub)."""
    if not draft.replacements:  # nothing masked: the drops are the whole decision
        draft.actions = drop_actions(units, dropped)
        return
    drop = Action.DROP
    for index, kind in enumerate(drop_actions(units, dropped)):
        if kind is drop:
            draft.actions[index] = drop
            draft.replacements[index] = None


def _mask_level(  # noqa: PLR0917 - one private call site
    draft: Draft,
    shape: Layout,
    results: Sequence[int],
    unit_tokens: MutableSequence[int],
    stubber: Stubber,
    limit: int,
) -> bool:
    """Mask a level's eligible ``results`` in order until ``draft`` fits; re-price their units.

    Returns whether any result was masked.
    """
    turns, unit_of = shape.turns, shape.units.unit_of
    masked = mask_in_order(draft, turns, offers(turns, results, shape.untouchable, stubber), limit)
    for index in masked:
        replacement = draft.replacements[index]
        assert replacement is not None  # noqa: S101 - just masked
        unit_tokens[unit_of[index]] -= turns[index].token_estimate - replacement.token_estimate
    return bool(masked)


def turn_priorities(turns: Sequence[TranscriptTurn]) -> list[int]:
    """Return each turn's priority: the integer under ``cutctx.priority``, or 0 without one.

    Raises:
        ValidationError: naming the first turn (and up to ten) whose value is not an integer.
    """
    priorities = [0] * len(turns)
    bad: list[str] = []
    first = ""
    for index, turn in enumerate(turns):
        metadata = turn.metadata
        if metadata is EMPTY_METADATA:
            continue
        value = metadata.get(PRIORITY_METADATA)
        if value is None:
            continue
        try:
            if _INTEGER.fullmatch(value) is None:
                raise ValueError(value)
            priorities[index] = int(value)
        except ValueError:
            first = first if bad else value
            bad.append(turn.turn_id)
    if bad:
        raise ValidationError(
            f"turn {bad[0]!r:.60}: metadata {PRIORITY_METADATA} must be an integer, "
            f"got {first!r:.40}",
            details={
                "field": "TranscriptTurn.metadata",
                "key": PRIORITY_METADATA,
                "turn_id": bad[0],
                "turn_ids": bad[:_MAX_NAMED],
            },
        )
    return priorities
