"""What a window knows between two calls, in one value: ``WindowState``.

The ledger of priced messages (cold while restored: see ``ledger``), the decisions, the last
request, the latest compaction, the stats and the calibration to the provider's count all live
here. A step works on ``copy()`` and the window adopts the result in one
assignment; the codec writes and reads this value whole. See docs/design.md, "The window's
state".
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

if TYPE_CHECKING:
    from cutctx._core.protocols import CompactionPolicy
    from cutctx._core.values import TranscriptTurn
    from cutctx._loop.compact import CompactedMessages
    from cutctx._loop.decisions import Decisions
    from cutctx._loop.ledger import Ledger
    from cutctx._loop.request import Request, WindowStats
    from cutctx._loop.settings import Settings

__all__ = ["KEPT_REPORTS", "LOWEST_SLOPE", "Calibration", "WindowState"]

KEPT_REPORTS: Final = 8  # the reports a calibration learns from (the most recent ones)
LOWEST_SLOPE: Final = 0.5  # the smallest slope a calibration may find
_SLOPE_ONE: Final = (LOWEST_SLOPE, 1.5)  # the slope one estimate may teach (the rest is offset)
_SLOPE: Final = (LOWEST_SLOPE, 2.0)  # the slope a fit over several estimates may find
_FIT_REPORTS: Final = 3  # a least-squares slope needs this many reports ...
_FIT_RANGE: Final = 0.25  # ... whose estimates span this share of their mean


@dataclass(frozen=True, slots=True)
class Calibration:
    """How the provider's count relates to the window's estimate, learnt from reports.

    ``reports`` are the most recent reports as ``(estimate, provider count)`` pairs (at most
    eight). The window models the provider's count as ``slope * estimate + offset`` (``fit``),
    the offset standing for what it never sees (tool definitions, framing), and adds ``margin``,
    the largest amount a recent report was over the line, so every recent report is at or under
    the prediction. ``last_estimate`` is the estimate of the request last returned (what the
    next report is about). See docs/agent-loop.md, "Calibration".
    """

    reports: tuple[tuple[int, int], ...] = ()
    last_estimate: int | None = None

    def fit(self) -> tuple[float, float, float]:
        """Return ``(slope, offset, margin)``: ``(1.0, 0.0, 0.0)`` before any report.

        Fewer than three reports, or estimates spanning less than a quarter of their mean: the
        line through their mean with the slope ``provider / estimate`` held to ``[0.5, 1.5]`` (a
        tokenizer against the default estimator is within that), the rest an offset, so a small
        first request teaches a large offset rather than a large ratio. Otherwise least squares
        over the reports, the slope held to ``[0.5, 2.0]``, the offset ``>= 0``. The margin is
        the largest recent report's excess over the line.
        """
        if not self.reports:
            return 1.0, 0.0, 0.0
        estimates = [float(estimate) for estimate, _ in self.reports]
        counts = [float(count) for _, count in self.reports]
        mean_e, mean_p = sum(estimates) / len(estimates), sum(counts) / len(counts)
        spread = sum((e - mean_e) ** 2 for e in estimates)
        if len(estimates) < _FIT_REPORTS or max(estimates) - min(estimates) < _FIT_RANGE * mean_e:
            # Too few reports, or estimates too close for a slope (two reports 13 tokens apart
            # would give one of 20): the line through their mean, as for one report.
            slope = min(max(mean_p / mean_e, _SLOPE_ONE[0]), _SLOPE_ONE[1])
        else:
            moment = sum(
                (e - mean_e) * (p - mean_p) for e, p in zip(estimates, counts, strict=True)
            )
            slope = min(max(moment / spread, _SLOPE[0]), _SLOPE[1])
        offset = max(0.0, mean_p - slope * mean_e)
        margin = max(0.0, *(p - slope * e - offset for e, p in zip(estimates, counts, strict=True)))
        return slope, offset, margin

    def sent(self, estimate: int) -> Calibration:
        """Return this calibration after a request estimated at ``estimate`` was returned."""
        return dataclasses.replace(self, last_estimate=estimate)

    def reported(self, input_tokens: object) -> Calibration:
        """Return this calibration learnt from the provider's count of the last request.

        Raises:
            ValidationError: for a count that is not an int of at least 0, or no request yet.
        """
        if type(input_tokens) is not int or input_tokens < 0:
            raise ValidationError(
                "ContextWindow.report_usage: input_tokens must be an int >= 0 (the provider's "
                f"count), got {input_tokens!r:.40}",
                details={"field": "input_tokens"},
            )
        if self.last_estimate is None:
            raise ValidationError(
                "ContextWindow.report_usage: no request returned yet to report on",
                details={"field": "input_tokens"},
            )
        if input_tokens == 0 or self.last_estimate == 0:
            return self  # nothing to learn from an empty request
        reports = (*self.reports, (self.last_estimate, input_tokens))[-KEPT_REPORTS:]
        return dataclasses.replace(self, reports=reports)

    def applied(self, settings: Settings) -> Settings:
        """Return ``settings`` with its thresholds held by the provider's count.

        A threshold ``t`` becomes the largest estimate whose prediction is at most ``t``:
        ``floor((t - offset - margin) / slope)``, never below 1, for ``max_tokens``,
        ``compact_at`` and ``compact_to``; the result cap becomes ``floor(cap / slope)`` (an
        excerpt already decided stays as it is).
        """
        if not self.reports:
            return settings
        slope, offset, margin = self.fit()

        def held(threshold: int) -> int:
            return max(1, math.floor((threshold - offset - margin) / slope))

        top = held(settings.max_tokens)
        at = max(1, min(top, held(settings.compact_at)))
        to = max(1, min(at, held(settings.compact_to)))
        # The result cap follows: a result is a share of the request, in the provider's count.
        cap = settings.max_result_tokens
        if cap is not None:  # never over the cap itself, which every plan is checked against
            cap = max(1, min(cap, top, math.floor(cap / slope)))
        return dataclasses.replace(
            settings, max_tokens=top, compact_at=at, compact_to=to, calibrated_result_cap=cap
        )


@dataclass(slots=True)
class WindowState:
    """Everything a ``ContextWindow`` knows between calls.

    ``view`` is the current request's turns (``None``: to be made from the decisions);
    ``before`` the request a reset replaced (or, for a restored window, its messages' digests
    in ``before_digests``), compared once against the next; ``planned_by`` the policy of the
    latest compaction, ``compaction`` it (its request, report and plan) and ``compacted_count``
    the messages it was over; ``restored`` the state's data
    as ``from_state`` was given it, which ``state()`` returns until the window changes.
    """

    ledger: Ledger
    decisions: Decisions
    request: Request
    view: list[TranscriptTurn] | None
    stats: WindowStats
    planned_by: CompactionPolicy
    compaction: CompactedMessages[Any] | None = None
    compacted_count: int | None = None
    before: list[Any] | None = None
    before_digests: list[str] | None = None
    restored: dict[str, Any] | None = None
    calibration: Calibration = Calibration()

    def copy(self) -> WindowState:
        """Return a copy a step may change without touching this one."""
        return WindowState(
            self.ledger.copy(),
            self.decisions.copy(),
            self.request.copy(),
            None if self.view is None else list(self.view),
            self.stats,
            self.planned_by,
            self.compaction,
            self.compacted_count,
            self.before,
            self.before_digests,
            self.restored,
            self.calibration,
        )
