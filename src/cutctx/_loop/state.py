"""What a window knows between two calls, in one value: ``WindowState``.

The ledger of priced messages, the decisions, the last request, the latest compaction, the
stats, a restored state not yet taken up (``Saved``) and the calibration to the provider's
count all live here. A step works on ``copy()`` and the window adopts the result in one
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
    from cutctx._loop.ledger import Ledger, Reading
    from cutctx._loop.request import Request, WindowStats
    from cutctx._loop.settings import Settings

__all__ = ["Calibration", "Saved", "WindowState"]

_KEPT: Final = 8  # the reports a calibration learns from (the most recent ones)


@dataclass(frozen=True, slots=True)
class Saved:
    """A restored state's body until a history takes it up (then ``resumed``).

    ``data`` is the state exactly as it was restored (``state()`` returns it until then, or
    until a new system prompt moves its figures: ``None``); the rest is read from it, checked.
    """

    data: dict[str, Any] | None
    count: int
    fingerprint: str
    prices: list[int]
    firsts: int
    decisions: dict[str, Any]
    request: list[Any]
    digests: list[str]
    costs: list[int]
    tokens: int
    tail: bool
    planned_by: str
    last: int | None
    reading: Reading | None = None  # the format's reader state it saved (None: read again)
    resumed: bool = False


@dataclass(frozen=True, slots=True)
class Calibration:
    """How the provider's count relates to the window's estimate, learnt from reports.

    ``ratios`` are the most recent reports' ``provider / estimate`` (at most eight); the window
    holds its thresholds at ``max(ratios)`` (``ratio``), the largest recent one, so a request
    stays under ``max_tokens`` by the provider's count while the content's mix holds. ``last``
    is the estimate of the request last returned (what the next report is about).
    """

    ratios: tuple[float, ...] = ()
    last: int | None = None

    @property
    def ratio(self) -> float:
        """The factor the thresholds are divided by (1.0 before any report)."""
        return max(self.ratios) if self.ratios else 1.0

    def sent(self, estimate: int) -> Calibration:
        """Return this calibration after a request estimated at ``estimate`` was returned."""
        return dataclasses.replace(self, last=estimate)

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
        if self.last is None:
            raise ValidationError(
                "ContextWindow.report_usage: no request returned yet to report on",
                details={"field": "input_tokens"},
            )
        if input_tokens == 0 or self.last == 0:
            return self  # nothing to learn from an empty request
        ratio = input_tokens / self.last
        return dataclasses.replace(self, ratios=(*self.ratios, ratio)[-_KEPT:])

    def applied(self, settings: Settings) -> Settings:
        """Return ``settings`` with its thresholds held by the provider's count.

        ``max_tokens``, ``compact_at`` and ``compact_to`` are divided by ``ratio``.
        The result cap is left alone: an excerpt already decided stays valid.
        """
        ratio = self.ratio
        if ratio == 1.0:
            return settings
        top = max(1, math.floor(settings.max_tokens / ratio))
        at = max(1, min(top, math.floor(settings.at / ratio)))
        to = max(1, min(at, math.floor(settings.to / ratio)))
        return dataclasses.replace(settings, max_tokens=top, at=at, to=to)

    def to_data(self) -> dict[str, Any]:
        """Return this calibration as JSON data."""
        return {"ratios": list(self.ratios), "last": self.last}

    @classmethod
    def of_data(cls, data: object) -> Calibration:
        """Return the calibration ``to_data`` gave.

        Raises:
            ValidationError: for anything else.
        """
        if not isinstance(data, dict) or set(data) != {"ratios", "last"}:
            raise _bad("calibration")
        ratios, last = data["ratios"], data["last"]
        if not isinstance(ratios, list) or len(ratios) > _KEPT:
            raise _bad("calibration")
        for ratio in ratios:
            if type(ratio) not in {int, float} or not math.isfinite(ratio) or ratio <= 0:
                raise _bad("calibration")
        if last is not None and (type(last) is not int or last < 0):
            raise _bad("calibration")
        return cls(tuple(float(ratio) for ratio in ratios), last)


def _bad(field: str) -> ValidationError:
    return ValidationError(
        f"ContextWindow.from_state: malformed state ({field})", details={"field": field}
    )


@dataclass(slots=True)
class WindowState:
    """Everything a ``ContextWindow`` knows between calls.

    ``view`` is the current request's turns (``None``: to be made from the decisions);
    ``before`` the request a reset replaced (or, for a restored window, its messages' digests
    in ``before_digests``), compared once against the next; ``planned_by`` the policy of the
    latest compaction, ``last_count`` the messages it was over.
    """

    ledger: Ledger
    decisions: Decisions
    request: Request
    view: list[TranscriptTurn] | None
    stats: WindowStats
    planned_by: CompactionPolicy
    last: CompactedMessages[Any] | None = None
    last_count: int | None = None
    before: list[Any] | None = None
    before_digests: list[str] | None = None
    saved: Saved | None = None
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
            self.last,
            self.last_count,
            self.before,
            self.before_digests,
            self.saved,
            self.calibration,
        )

    @property
    def unseen(self) -> bool:
        """Whether this is a restored state no history has taken up yet."""
        return self.saved is not None and not self.saved.resumed
