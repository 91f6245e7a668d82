"""A window's settings: checked once, with the figures derived from them (tokens, not fractions)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

from baseaicore import ValidationError

from cutctx._core.estimators import resolve_estimator
from cutctx._core.protocols import CompactionPolicy
from cutctx._core.values import check_count
from cutctx._loop.callables import two_argument
from cutctx.formats._common import shown

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.values import SummarizationRequest, TranscriptTurn

    type Summarize = Callable[
        [SummarizationRequest, Sequence[TranscriptTurn]], str | Awaitable[str]
    ]
    type Priority = Callable[[int, dict[str, Any]], int]
    type Pin = Callable[[int, dict[str, Any]], bool]
    type Observation = Callable[[int, dict[str, Any]], bool] | Callable[[dict[str, Any]], bool]

__all__ = ["DEFAULT_COMPACT_TO", "Settings", "tokens_of"]

_OWNER = "ContextWindow"
DEFAULT_COMPACT_TO: Final = 0.5
"""``compact_to`` when none is given: half the window, at every window size.

A cut to half of a window that compacts at 0.8 of it frees 0.3 of the window: with results of
60 to 3 000 tokens that is 15 steps at 32 000 tokens and 75 at 128 000 before the next cut.
Fewer cuts send fewer uncached input tokens: a cut keeps little of the previous request as a
cached prefix, so a cut that frees little room (a cut to ``compact_at`` less a fixed 10 000
tokens, the former default in a large window) is paid again every few steps; docs/agent-loop.md
has the measurements.
"""


@dataclass(frozen=True, slots=True)
class Settings:
    """What a ``ContextWindow`` was given, checked, and its thresholds in tokens.

    ``given`` holds the JSON-shaped options as the caller wrote them (fractions stay fractions),
    which is what a state records; the callables and the estimator are given again on restore.
    """

    max_tokens: int
    compact_at: int
    compact_to: int
    summary_input_tokens: int
    keep_first: int
    protected_recent_turns: int
    keep_recent_results: int
    cache_breakpoints: bool
    system: object
    estimator: TokenEstimator
    summarize: Summarize | None
    policy: CompactionPolicy | None
    priority: Priority | None
    pin: Pin | None
    max_result_tokens: int | None
    recall: bool
    given: dict[str, Any]
    observation: Pin | None = None  # called as (index, message), whichever shape was given
    head_prices: tuple[int, ...] | None = None  # a state's: the head is not priced again
    # The cap a result arriving now is excerpted to: ``max_result_tokens`` held by the
    # calibration (``None``: ``max_result_tokens``). A plan is checked against
    # ``max_result_tokens``, so an excerpt decided earlier stays valid.
    calibrated_result_cap: int | None = None
    # From the messages default of version 4 on (no summaries): a result arriving over the cap
    # whose excerpt would keep none of its lines whole (one line of JSON: its head cut at a
    # character) is sent whole while the request has room for it (``decisions.excerpts_of``).
    whole_lines: bool = False

    def narrowed(self, tokens: int) -> Settings:
        """Return these settings with ``tokens`` less room under each threshold (at least 1)."""
        top = max(1, self.max_tokens - tokens)
        at = max(1, min(top, self.compact_at - tokens))
        return dataclasses.replace(
            self,
            max_tokens=top,
            compact_at=at,
            compact_to=max(1, min(at, self.compact_to - tokens)),
        )

    @property
    def new_result_cap(self) -> int | None:
        """The most tokens a result arriving now is sent at (``None``: excerpts are off)."""
        return (
            self.max_result_tokens
            if self.calibrated_result_cap is None
            else self.calibrated_result_cap
        )

    @classmethod
    def of(  # noqa: PLR0917 - the window's options, as named there
        cls,
        max_tokens: object,
        compact_at: object,
        compact_to: object,
        keep_first: object,
        protected_recent_turns: object,
        keep_recent_results: object,
        system: object,
        estimator: object,
        summarize: object,
        policy: object,
        summary_input_tokens: object,
        cache_breakpoints: object,
        priority: object,
        pin: object,
        max_result_tokens: object,
        recall: object,
        *,
        observation: object = None,
    ) -> Settings:
        """Check every option and return the settings.

        Raises:
            ValidationError: naming the first option that is wrong.
        """
        top = check_count(_OWNER, "max_tokens", max_tokens)
        if top < 1:
            raise ValidationError(
                f"{_OWNER}.max_tokens must be at least 1", details={"field": "max_tokens"}
            )
        at = tokens_of("compact_at", compact_at, top)
        to = tokens_of("compact_to", DEFAULT_COMPACT_TO if compact_to is None else compact_to, top)
        if to > at:
            raise ValidationError(
                f"{_OWNER}: compact_to ({to} tokens) is over compact_at ({at} tokens)",
                details={"field": "compact_to", "compact_to": to, "compact_at": at},
            )
        bound = (
            to
            if summary_input_tokens is None
            else tokens_of("summary_input_tokens", summary_input_tokens, top)
        )
        for name, flag in (("cache_breakpoints", cache_breakpoints), ("recall", recall)):
            if not isinstance(flag, bool):
                raise ValidationError(f"{_OWNER}.{name} must be a bool", details={"field": name})
        cap = (
            None
            if max_result_tokens is None
            else tokens_of("max_result_tokens", max_result_tokens, top)
        )
        for name, function, shape in (
            ("summarize", summarize, "(request, turns) -> str"),
            ("priority", priority, "(index, message) -> int"),
            ("pin", pin, "(index, message) -> bool"),
            ("observation", observation, "(index, message) -> bool"),
        ):
            if function is not None and not callable(function):
                raise ValidationError(
                    f"{_OWNER}: {name} must be callable{shape}", details={"field": name}
                )
        if policy is not None and not isinstance(policy, CompactionPolicy):
            raise ValidationError(
                f"{_OWNER}: policy must be a CompactionPolicy, got {type(policy).__name__}",
                details={"field": "policy"},
            )
        chosen = resolve_estimator(estimator, owner=_OWNER)  # None: the default, TextEstimator
        return cls(
            max_tokens=top,
            compact_at=at,
            compact_to=to,
            summary_input_tokens=bound,
            keep_first=check_count(_OWNER, "keep_first", keep_first),
            protected_recent_turns=check_count(
                _OWNER, "protected_recent_turns", protected_recent_turns
            ),
            keep_recent_results=check_count(_OWNER, "keep_recent_results", keep_recent_results),
            cache_breakpoints=bool(cache_breakpoints),
            system=system,
            estimator=chosen,
            summarize=summarize,  # type: ignore[arg-type]
            policy=policy,
            priority=priority,  # type: ignore[arg-type]
            pin=pin,  # type: ignore[arg-type]
            max_result_tokens=cap,
            recall=bool(recall),
            observation=(
                None
                if observation is None
                else two_argument(cast("Callable[..., bool]", observation))
            ),
            given={
                "max_tokens": top,
                "compact_at": compact_at,
                "compact_to": compact_to,
                "keep_first": keep_first,
                "protected_recent_turns": protected_recent_turns,
                "keep_recent_results": keep_recent_results,
                "system": system,
                "summary_input_tokens": summary_input_tokens,
                "cache_breakpoints": cache_breakpoints,
                "max_result_tokens": max_result_tokens,
                "recall": recall,
            },
        )


def tokens_of(name: str, value: object, max_tokens: int, *, owner: str = _OWNER) -> int:
    """Return ``value`` in tokens: a float is a fraction of ``max_tokens``, an int is tokens.

    The one rule for every option that takes either: ``0.5`` is half of ``max_tokens``, ``500``
    is 500 tokens. ``1`` is refused (one token is never meant: ``1.0`` is all of ``max_tokens``),
    as is a float over 1 (``800.0``: write ``800`` for tokens).

    Raises:
        ValidationError: for anything else, or a value outside ``(0.0, 1.0]`` or
            ``[2, max_tokens]``, naming ``owner`` and the option.
    """
    if isinstance(value, float) and 0 < value <= 1:
        return max(1, int(value * max_tokens))
    if isinstance(value, int) and not isinstance(value, bool) and 2 <= value <= max_tokens:
        return value
    if value == 1 and not isinstance(value, bool | float):
        hint = "; 1 would be one token: write 1.0 for all of max_tokens"
    elif isinstance(value, float) and value > 1:
        hint = f"; a float is a fraction: write {int(value)} for a token count"
    else:
        hint = ""
    raise ValidationError(
        f"{owner}.{name} must be a fraction (a float in (0.0, 1.0]) or a token count (an int "
        f"in [2, {max_tokens}]), got {shown(value)}{hint}",
        details={"field": name, "max_tokens": max_tokens, "value": shown(value)},
    )
