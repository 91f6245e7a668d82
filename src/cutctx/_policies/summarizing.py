"""``SummarizingPolicy``: fold the oldest removable span into one summary request."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from baseaicore import ValidationError

from cutctx._core.values import (
    Action,
    CompactionBudget,
    Transcript,
    check_count,
    check_name,
    check_ratio,
)
from cutctx._policies.draft import BuiltinPolicy, Draft, Group, keep_all

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Self

    from cutctx._core.invariants import Layout
    from cutctx._policies.config import Config
    from cutctx._policies.draft import Describe

__all__ = ["SummarizingPolicy"]


class SummarizingPolicy(BuiltinPolicy):
    """Plans one summary of the oldest contiguous span of removable, whole exchanges.

    The span is the oldest maximal run of adjacent turns whose exchanges hold no untouchable
    turn, narrowed until every exchange it touches lies wholly inside it, and taken only if at
    least ``min_span_turns`` long; the whole span is folded into one ``SummarizationRequest``
    (one model call) whose ``target_tokens`` is ``max(1, round(span_tokens * target_ratio))``
    (Python's ``round``: half to even). A span whose target is not smaller than its own tokens
    is skipped for the next one (so ``target_ratio=1.5`` plans nothing). Nothing is planned when
    the transcript already fits.

    Raises:
        ValidationError: for an empty or blank ``prompt_id``, a ``target_ratio`` that is not a
            finite number above 0, or a ``min_span_turns`` below 1.
    """

    __slots__ = ("_min_span_turns", "_prompt_id", "_target_ratio")

    _NAME: ClassVar[str] = "summarizing"
    _VERSION: ClassVar[str] = "1.0.0"
    summarizes: ClassVar[bool] = True
    _PRICES_ONLY: ClassVar[bool] = True

    def __init__(self, prompt_id: str, target_ratio: float = 0.2, min_span_turns: int = 4) -> None:
        self._prompt_id = check_name("SummarizingPolicy", "prompt_id", prompt_id, "prompt_id")
        self._target_ratio = check_ratio("SummarizingPolicy", "target_ratio", target_ratio)
        self._min_span_turns = check_count("SummarizingPolicy", "min_span_turns", min_span_turns)
        if self._min_span_turns < 1:
            raise ValidationError(
                "SummarizingPolicy.min_span_turns must be at least 1, got 0",
                details={"field": "SummarizingPolicy.min_span_turns", "min_span_turns": 0},
            )

    @property
    def prompt_id(self) -> str:
        """The caller's prompt record that every request names."""
        return self._prompt_id

    @property
    def target_ratio(self) -> float:
        """The fraction of the span's tokens a summary should aim for."""
        return self._target_ratio

    @property
    def min_span_turns(self) -> int:
        """The shortest span worth a summary."""
        return self._min_span_turns

    def _config(self, describe: Describe) -> dict[str, Any]:
        del describe  # no members
        return {
            "prompt_id": self._prompt_id,
            "target_ratio": self._target_ratio,
            "min_span_turns": self._min_span_turns,
        }

    @classmethod
    def _from_config(cls, config: Config) -> Self:
        return cls(
            config.text("prompt_id"), config.number("target_ratio"), config.count("min_span_turns")
        )

    def __repr__(self) -> str:
        return (
            f"SummarizingPolicy(prompt_id={self._prompt_id!r}, target_ratio={self._target_ratio!r}"
            f", min_span_turns={self._min_span_turns})"
        )

    def _draft(self, transcript: Transcript, budget: CompactionBudget, shape: Layout) -> Draft:
        del transcript  # decided from the layout alone (_PRICES_ONLY)
        if shape.total <= budget.max_tokens:
            return keep_all(shape)
        tokens, ratio = shape.tokens, self._target_ratio

        def shrinks(first: int, last: int) -> bool:
            span_tokens = sum(tokens[first : last + 1])
            return max(1, round(span_tokens * ratio)) < span_tokens

        span = oldest_span(shape, self._min_span_turns, shrinks)
        draft = keep_all(shape)
        if span is None:
            return draft
        first, last = span
        members = range(first, last + 1)
        draft.actions[first : last + 1] = [Action.SUMMARIZE] * len(members)
        span_tokens = sum(tokens[first : last + 1])
        target = max(1, round(span_tokens * ratio))
        draft.groups.append(Group(members, target, self._prompt_id))
        draft.tokens += target - span_tokens
        return draft


def oldest_span(
    shape: Layout, min_turns: int, accept: Callable[[int, int], bool]
) -> tuple[int, int] | None:
    """Return the oldest span (first, last) of at least ``min_turns`` removable whole exchanges.

    Runs of removable turns are split at every turn whose exchange reaches outside the piece it
    sits in, until each piece holds only whole exchanges; the first piece long enough that
    ``accept(first, last)`` wins, and a piece it refuses is skipped for the next.
    """
    units = shape.units
    unit_of, unit_last, locked = units.unit_of, units.unit_last, units.locked
    count = len(unit_of)
    pieces: list[tuple[int, int]] = []
    index = count - 1
    # Runs are pushed newest first, so the stack pops them oldest first.
    while index >= 0:
        if locked[unit_of[index]]:
            index -= 1
            continue
        last = index
        while index >= 0 and not locked[unit_of[index]]:
            index -= 1
        pieces.append((index + 1, last))
    while pieces:
        first, last = pieces.pop()
        if last - first + 1 < min_turns:
            continue
        outside = [
            position
            for position in range(first, last + 1)
            if unit_of[position] < first or unit_last[unit_of[position]] > last
        ]
        if not outside:
            if accept(first, last):
                return first, last
            continue
        bounds = [first - 1, *outside, last + 1]
        pieces.extend(
            (bounds[k] + 1, bounds[k + 1] - 1)
            for k in range(len(bounds) - 2, -1, -1)
            if bounds[k + 1] - bounds[k] > 1
        )
    return None
