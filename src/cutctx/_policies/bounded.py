"""``BoundedSummarizingPolicy``: fold the oldest exchanges into summaries of bounded input."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from baseaicore import ValidationError

from cutctx._core.values import Action, CompactionBudget, Transcript, check_count, check_str
from cutctx._policies.draft import BuiltinPolicy, Draft, Group, keep_all

if TYPE_CHECKING:
    from typing import Any, Self

    from cutctx._core.invariants import Layout
    from cutctx._policies.config import Config
    from cutctx._policies.draft import Describe

__all__ = ["BoundedSummarizingPolicy"]


class BoundedSummarizingPolicy(BuiltinPolicy):
    """Folds the oldest removable exchanges into summaries, each of at most ``max_input_tokens``.

    Whole exchanges are taken oldest first, only as many as the budget needs; adjacent ones are
    packed into one group while the group's turns hold at most ``max_input_tokens``, and a larger
    span becomes several groups (several ``SummarizationRequest`` s, each one model call). An
    exchange that alone holds more, or that holds an untouchable turn, is never folded and ends
    the group before it. Each group's ``target_tokens`` is
    ``max(1, round(group_tokens * target_ratio))``. Nothing is planned when the view fits.

    >>> BoundedSummarizingPolicy("summaries/v1", max_input_tokens=8000).name
    'bounded_summarizing'

    Raises:
        ValidationError: for an empty ``prompt_id``, a ``max_input_tokens`` below 1 or a
            ``target_ratio`` outside ``(0, 1]``.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_max_input_tokens", "_prompt_id", "_target_ratio")

    _NAME: ClassVar[str] = "bounded_summarizing"
    _VERSION: ClassVar[str] = "1.0.0"
    summarizes: ClassVar[bool] = True
    _PRICES_ONLY: ClassVar[bool] = True

    def __init__(self, prompt_id: str, *, max_input_tokens: int, target_ratio: float = 0.2) -> None:
        owner = "BoundedSummarizingPolicy"
        self._prompt_id = check_str(owner, "prompt_id", prompt_id)
        self._max_input_tokens = check_count(owner, "max_input_tokens", max_input_tokens)
        if self._max_input_tokens < 1:
            raise ValidationError(
                f"{owner}.max_input_tokens must be at least 1, got 0",
                details={"field": f"{owner}.max_input_tokens"},
            )
        if (
            isinstance(target_ratio, bool)
            or not isinstance(target_ratio, int | float)
            or not 0 < target_ratio <= 1
        ):
            raise ValidationError(
                f"{owner}.target_ratio must be a number in (0, 1], got {target_ratio!r}",
                details={"field": f"{owner}.target_ratio"},
            )
        self._target_ratio = float(target_ratio)

    @property
    def prompt_id(self) -> str:
        """The caller's prompt record that every request names."""
        return self._prompt_id

    @property
    def max_input_tokens(self) -> int:
        """The most tokens of turns one request hands the summarizer."""
        return self._max_input_tokens

    @property
    def target_ratio(self) -> float:
        """The fraction of a group's tokens its summary should aim for."""
        return self._target_ratio

    def _config(self, describe: Describe) -> dict[str, Any]:
        del describe  # no members
        return {
            "prompt_id": self._prompt_id,
            "max_input_tokens": self._max_input_tokens,
            "target_ratio": self._target_ratio,
        }

    @classmethod
    def _from_config(cls, config: Config) -> Self:
        return cls(
            config.text("prompt_id"),
            max_input_tokens=config.count("max_input_tokens"),
            target_ratio=config.number("target_ratio"),
        )

    def __repr__(self) -> str:
        return (
            f"BoundedSummarizingPolicy({self._prompt_id!r}, max_input_tokens="
            f"{self._max_input_tokens}, target_ratio={self._target_ratio!r})"
        )

    def _draft(self, transcript: Transcript, budget: CompactionBudget, shape: Layout) -> Draft:
        del transcript  # decided from the layout alone (_PRICES_ONLY)
        draft = keep_all(shape)
        if shape.total <= budget.max_tokens:
            return draft
        units = shape.units
        unit_of, unit_last, unit_tokens, locked = (
            units.unit_of,
            units.unit_last,
            units.unit_tokens,
            units.locked,
        )
        limit, cap = budget.max_tokens, self._max_input_tokens
        projected = shape.total
        members: list[int] = []
        tokens = 0
        index, count = 0, len(unit_of)
        while index < count and projected > limit:
            unit = unit_of[index]
            last = unit_last[unit]
            whole = unit == index and all(unit_of[k] == unit for k in range(index, last + 1))
            size = unit_tokens[unit]
            if not whole or locked[unit] or size > cap:
                self._close(draft, members, tokens)
                members, tokens = [], 0
                index = last + 1 if unit == index else index + 1
                continue
            if members and tokens + size > cap:
                self._close(draft, members, tokens)
                members, tokens = [], 0
            before = self._target(tokens) if members else 0
            members.extend(range(index, last + 1))
            tokens += size
            projected += self._target(tokens) - before - size
            index = last + 1
        self._close(draft, members, tokens)
        draft.tokens = projected
        return draft

    def _target(self, tokens: int) -> int:
        return max(1, round(tokens * self._target_ratio))

    def _close(self, draft: Draft, members: list[int], tokens: int) -> None:
        """Record ``members`` (if any) as one summary group of the draft."""
        if not members:
            return
        draft.actions[members[0] : members[-1] + 1] = [Action.SUMMARIZE] * len(members)
        draft.groups.append(Group(members, self._target(tokens), self._prompt_id))
