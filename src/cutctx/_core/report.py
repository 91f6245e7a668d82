"""The result of applying a plan: the compacted view and the report of what was done."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cutctx._core.values import Transcript

__all__ = ["CompactedTranscript", "CompactionReport"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionReport:
    """What a plan did, in the shape an application emits as its ``context.compacted`` event.

    Every figure is copied from the plan; every id list is in transcript order (``summary_turn_ids``
    in view order). ``to_dict()`` is plain JSON.

    .. versionchanged:: 0.1.1
       ``excerpted_turn_ids`` (in ``to_dict()`` only when not empty).
    """

    plan_hash: str
    policy_name: str
    policy_version: str
    tokens_before: int
    tokens_after_estimate: int
    estimator_ratio: float | None
    budget_unmet: bool
    turns_before: int
    turns_after: int
    kept_turn_ids: tuple[str, ...]
    masked_turn_ids: tuple[str, ...]
    summarized_turn_ids: tuple[str, ...]
    dropped_turn_ids: tuple[str, ...]
    summary_turn_ids: tuple[str, ...]
    estimator_name: str | None = None
    excerpted_turn_ids: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return every field as a key with plain JSON values.

        ``estimator_name`` only when set and ``excerpted_turn_ids`` only when not empty, so a
        report of a plan without either has exactly the 0.1 shape.
        """
        data: dict[str, Any] = {
            "plan_hash": self.plan_hash,
            "policy_name": self.policy_name,
            "policy_version": self.policy_version,
            "tokens_before": self.tokens_before,
            "tokens_after_estimate": self.tokens_after_estimate,
            "estimator_ratio": self.estimator_ratio,
            "budget_unmet": self.budget_unmet,
            "turns_before": self.turns_before,
            "turns_after": self.turns_after,
            "kept_turn_ids": list(self.kept_turn_ids),
            "masked_turn_ids": list(self.masked_turn_ids),
            "summarized_turn_ids": list(self.summarized_turn_ids),
            "dropped_turn_ids": list(self.dropped_turn_ids),
            "summary_turn_ids": list(self.summary_turn_ids),
        }
        if self.excerpted_turn_ids:
            data["excerpted_turn_ids"] = list(self.excerpted_turn_ids)
        if self.estimator_name is not None:
            data["estimator_name"] = self.estimator_name
        return data


@dataclass(frozen=True, slots=True)
class CompactedTranscript:
    """The compacted view (an ordinary ``Transcript``) and the report of how it was made."""

    transcript: Transcript
    report: CompactionReport
