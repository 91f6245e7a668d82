"""``ObservationMaskingPolicy``: replace old tool results with a digest stub, for free.

The pieces that price a stub, offer the eligible results and mask them in order are shared with
``PriorityPolicy``, which masks one priority level at a time with exactly the same stubs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Final

from baseaicore import ValidationError

from cutctx._core.digest import json_string_digest
from cutctx._core.estimators import CharRatioEstimator
from cutctx._core.metadata import (
    FRAMING_METADATA,
    KIND_METADATA,
    MASKED_KIND,
    NAMED_FRAMING,
    TOOL_NAME_METADATA,
)
from cutctx._core.values import (
    DEFAULT_PLACEHOLDER,
    EMPTY_METADATA,
    Action,
    CompactionBudget,
    Role,
    Transcript,
    TranscriptTurn,
    TurnReplacement,
    check_bool,
    check_count,
    check_name,
    check_str,
)
from cutctx._policies.config import estimator_config
from cutctx._policies.draft import (
    BuiltinPolicy,
    Draft,
    Stub,
    check_estimator,
    estimator_marks,
    keep_all,
    original_of,
    stub_text,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence
    from typing import Any, Self

    from cutctx._core.invariants import Layout
    from cutctx._core.protocols import TokenEstimator
    from cutctx._policies.config import Config
    from cutctx._policies.draft import Describe

__all__ = [
    "ObservationMaskingPolicy",
    "Stubber",
    "check_estimator",
    "floor_start",
    "mask_in_order",
    "offers",
]

_A_DIGEST: Final = "0" * 64
"""As long as a SHA-256 hex digest: all a length-only estimator needs to price a stub."""


class ObservationMaskingPolicy(BuiltinPolicy):
    r"""Masks old ``TOOL`` bodies, oldest first, only until the budget fits.

    A stub reads ``{placeholder} (original: {n} tokens, sha256:{hex})``: the label, the original's
    token estimate and the SHA-256 of the original written as a JSON string
    (``baseaicore.sha256_of(content)``, as 0.1 writes it; a lone surrogate is hashed as its
    ``\udXXX`` escape), never an excerpt. It is priced by
    ``estimator`` (``CharRatioEstimator()`` when ``None``), and a turn whose stub would not be
    smaller is left alone. The ``keep_recent_results`` most recent ``TOOL`` turns are never
    masked, whatever the budget; neither is an untouchable turn nor one already masked, nor a
    result of a tool named in ``exclude_tools`` (by its turn's ``cutctx.tool_name`` metadata).
    With ``min_reclaim=n`` a plan that masks at all reclaims at least ``n`` tokens: masking goes
    on past the fit until ``n`` came back, and if every eligible result together gives less,
    nothing is masked. An excerpted result (``cutctx.kind: excerpt``) is masked like any other,
    and its stub names the original's estimate and digest (``cutctx.original_tokens``,
    ``cutctx.original_sha256``), not the excerpt's.

    Raises:
        ValidationError: for a negative ``keep_recent_results`` or ``min_reclaim``, an empty,
            blank or non-string ``placeholder``, an empty or non-string tool name, or an
            ``estimator`` without ``estimate_tokens``.

    .. versionchanged:: 0.1.1
       The stub of an excerpted result names the original.
    """

    __slots__ = (
        "_estimator",
        "_exclude_tools",
        "_excluded",
        "_keep_recent_results",
        "_min_reclaim",
        "_placeholder",
    )

    _NAME: ClassVar[str] = "observation_masking"
    _VERSION: ClassVar[str] = "1.0.0"
    masks: ClassVar[bool] = True

    def __init__(
        self,
        keep_recent_results: int = 2,
        placeholder: str = DEFAULT_PLACEHOLDER,
        *,
        estimator: TokenEstimator | None = None,
        exclude_tools: Iterable[str] = (),
        min_reclaim: int = 0,
    ) -> None:
        owner = "ObservationMaskingPolicy"
        self._keep_recent_results = check_count(owner, "keep_recent_results", keep_recent_results)
        self._placeholder = check_name(owner, "placeholder", placeholder, "placeholder")
        self._estimator = check_estimator(owner, estimator)
        if isinstance(exclude_tools, str):
            raise ValidationError(
                f"{owner}.exclude_tools must be a collection of tool names, not one string",
                details={"field": f"{owner}.exclude_tools"},
            )
        self._exclude_tools = tuple(
            check_str(owner, "exclude_tools", name) for name in exclude_tools
        )
        self._excluded = frozenset(self._exclude_tools)
        self._min_reclaim = check_count(owner, "min_reclaim", min_reclaim)

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

    @property
    def exclude_tools(self) -> tuple[str, ...]:
        """The tools whose results are never masked, as given.

        .. versionadded:: 0.1.0
        """
        return self._exclude_tools

    @property
    def min_reclaim(self) -> int:
        """The fewest tokens a plan that masks at all must reclaim (0: no minimum).

        .. versionadded:: 0.1.0
        """
        return self._min_reclaim

    def _config(self, describe: Describe) -> dict[str, Any]:
        del describe  # no members
        return {
            "keep_recent_results": self._keep_recent_results,
            "placeholder": self._placeholder,
            "estimator": estimator_config(self._estimator),
            "exclude_tools": list(self._exclude_tools),
            "min_reclaim": self._min_reclaim,
        }

    @classmethod
    def _from_config(cls, config: Config) -> Self:
        return cls(
            config.count("keep_recent_results"),
            config.text("placeholder"),
            estimator=config.estimator("estimator"),
            exclude_tools=config.names("exclude_tools", ()),
            min_reclaim=config.count("min_reclaim", 0),
        )

    def __repr__(self) -> str:
        return (
            f"ObservationMaskingPolicy(keep_recent_results={self._keep_recent_results}, "
            f"placeholder={self._placeholder!r}, estimator={self._estimator!r}, "
            f"exclude_tools={self._exclude_tools!r}, min_reclaim={self._min_reclaim})"
        )

    def estimator_ratio_if_used(self, estimated_anything: bool) -> float | None:
        """Return the ratio a plan records: the character default's, if it priced a stub.

        ``None`` when ``estimated_anything`` is false or the estimator is not a
        ``CharRatioEstimator`` (another estimator is recorded by name).

        Raises:
            ValidationError: if ``estimated_anything`` is not a bool.

        .. versionadded:: 0.1.0
        """
        check_bool("ObservationMaskingPolicy", "estimated_anything", estimated_anything)
        return estimator_marks(self._estimator)[0] if estimated_anything else None

    def stub(self, content: str, token_estimate: int) -> str:
        """Return the stub that would replace a body of ``content`` priced at ``token_estimate``."""
        return stub_text(self._placeholder, token_estimate, json_string_digest(content))

    def _draft(self, transcript: Transcript, budget: CompactionBudget, shape: Layout) -> Draft:
        total = shape.total
        if total <= budget.max_tokens:
            return keep_all(shape)
        turns = transcript.turns
        stop = floor_start(turns, self._keep_recent_results)
        offered: Iterable[tuple[int, TurnReplacement | Stub]] = offers(
            turns,
            self._candidates(turns, stop, budget),
            shape.untouchable,
            Stubber(self._placeholder, self._estimator),
            self._excluded,
        )
        reclaim = self._min_reclaim
        if reclaim:
            # Every eligible result is priced up front: below the minimum nothing is masked.
            offered = list(offered)
            available = sum(turns[i].token_estimate - r.token_estimate for i, r in offered)
            if available < reclaim:
                return keep_all(shape)
        draft = Draft([Action.KEEP] * len(turns), total, [None] * len(turns))
        if mask_in_order(draft, turns, offered, budget.max_tokens, reclaim):
            draft.estimator_ratio, draft.estimator_name = estimator_marks(self._estimator)
        return draft

    def _candidates(
        self, turns: Sequence[TranscriptTurn], stop: int, budget: CompactionBudget
    ) -> Iterable[int]:
        """Return the indices offered for masking, in order: every one before ``stop``."""
        del turns, budget  # every turn before the floor, oldest first
        return range(stop)


class Stubber:
    """Prices the stub of one result for one label and estimator (``offer``)."""

    __slots__ = ("_by_length", "_estimate", "_placeholder", "_stubs")

    def __init__(self, placeholder: str, estimator: TokenEstimator) -> None:
        self._placeholder = placeholder
        self._estimate = estimator.estimate_tokens
        # The character default prices by length alone, so the digest can wait for the plan
        # (see ``Stub``), and a stub's price depends only on the digits of the original's
        # estimate: each length is priced once. Any other estimator prices the whole stub.
        self._by_length = type(estimator) is CharRatioEstimator
        self._stubs: dict[int, Stub] = {}

    def offer(self, turn: TranscriptTurn) -> TurnReplacement | Stub | None:
        """Return the replacement of ``turn``'s body, or ``None`` if it would not be smaller.

        The stub of an excerpted turn names its original's estimate and digest (``original_of``).
        """
        original, digest = original_of(turn)
        placeholder = self._placeholder
        replacement: TurnReplacement | Stub
        if self._by_length:
            digits = len(str(original))
            stubs = self._stubs
            replacement = stubs.get(digits) or stubs.setdefault(
                digits,
                Stub(placeholder, self._estimate(stub_text(placeholder, original, _A_DIGEST))),
            )
        else:
            stub = stub_text(placeholder, original, digest or json_string_digest(turn.content))
            replacement = TurnReplacement(stub, self._estimate(stub))
        framing = turn.metadata.get(FRAMING_METADATA) if turn.metadata else None
        if framing == NAMED_FRAMING:  # what its message costs beyond its text: its name
            framing = str(max(0, turn.token_estimate - self._estimate(turn.content)))
        if framing is not None and framing.isascii() and framing.isdigit():
            # An observation's message costs its role beside the stub (a tool result's is in
            # its call), a named result its name: the stub is priced as it is sent.
            price = replacement.token_estimate + int(framing)
            replacement = (
                Stub(placeholder, price)
                if isinstance(replacement, Stub)
                else TurnReplacement(replacement.content, price)
            )
        return replacement if replacement.token_estimate < turn.token_estimate else None


def offers(
    turns: Sequence[TranscriptTurn],
    candidates: Iterable[int],
    untouchable: Sequence[int],
    stubber: Stubber,
    excluded: frozenset[str] = frozenset(),
) -> Iterator[tuple[int, TurnReplacement | Stub]]:
    """Yield each eligible result among ``candidates``, in order, with its (smaller) stub.

    Eligible: a ``TOOL`` turn that is not untouchable, not already masked and not the result
    of an ``excluded`` tool. Lazy, so a caller that stops early prices no further stub.
    """
    tool = Role.TOOL
    for index in candidates:
        turn = turns[index]
        if turn.role is not tool or untouchable[index]:
            continue
        metadata = turn.metadata
        if metadata is not EMPTY_METADATA and (
            metadata.get(KIND_METADATA) == MASKED_KIND
            or (excluded and metadata.get(TOOL_NAME_METADATA) in excluded)
        ):
            continue
        replacement = stubber.offer(turn)
        if replacement is not None:
            yield index, replacement


def mask_in_order(
    draft: Draft,
    turns: Sequence[TranscriptTurn],
    offered: Iterable[tuple[int, TurnReplacement | Stub]],
    limit: int,
    reclaim: int = 0,
) -> list[int]:
    """Mask the offered results in order until ``draft`` fits ``limit`` and ``reclaim`` came back.

    ``draft`` must be over ``limit`` and hold a replacement slot per turn; its actions,
    replacements and estimate are updated. Returns the indices masked, in order.
    """
    actions, replacements, mask = draft.actions, draft.replacements, Action.MASK
    total, reclaimed = draft.tokens, 0
    masked: list[int] = []
    for index, replacement in offered:
        actions[index] = mask
        replacements[index] = replacement
        masked.append(index)
        saved = turns[index].token_estimate - replacement.token_estimate
        total -= saved
        reclaimed += saved
        if total <= limit and reclaimed >= reclaim:
            break
    draft.tokens = total
    return masked


def floor_start(turns: Sequence[TranscriptTurn], keep: int) -> int:
    """Return the index of the earliest of the last ``keep`` TOOL turns (the floor's start).

    Nothing at or after it is masked; 0 when there are no more than ``keep`` TOOL turns.
    """
    if keep == 0:
        return len(turns)
    seen = 0
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].role is Role.TOOL:
            seen += 1
            if seen == keep:
                return index
    return 0
