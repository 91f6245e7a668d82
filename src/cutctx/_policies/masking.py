"""``ObservationMaskingPolicy``: replace old tool results with a digest stub, for free."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Final

from baseaicore import ValidationError

from cutctx._core.estimators import CharRatioEstimator
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
    check_str,
)
from cutctx._policies.draft import (
    BuiltinPolicy,
    Draft,
    Stub,
    content_digest,
    estimator_marks,
    keep_all,
    stub_text,
)

if TYPE_CHECKING:
    from cutctx._core.invariants import Layout
    from cutctx._core.protocols import TokenEstimator

__all__ = ["ObservationMaskingPolicy"]

MASKED_KIND: Final = "masked"
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
    masked, whatever the budget; neither is an untouchable turn nor one already masked.

    Raises:
        ValidationError: for a negative ``keep_recent_results``, an empty or non-string
            ``placeholder`` or an ``estimator`` without ``estimate_tokens``.
    """

    __slots__ = ("_estimator", "_keep_recent_results", "_placeholder")

    _NAME: ClassVar[str] = "observation_masking"
    _VERSION: ClassVar[str] = "1.0.0"

    def __init__(
        self,
        keep_recent_results: int = 2,
        placeholder: str = DEFAULT_PLACEHOLDER,
        *,
        estimator: TokenEstimator | None = None,
    ) -> None:
        self._keep_recent_results = check_count(
            "ObservationMaskingPolicy", "keep_recent_results", keep_recent_results
        )
        self._placeholder = check_str("ObservationMaskingPolicy", "placeholder", placeholder)
        if estimator is not None and not callable(getattr(estimator, "estimate_tokens", None)):
            raise ValidationError(
                "ObservationMaskingPolicy.estimator must have estimate_tokens(text) -> int",
                details={"field": "ObservationMaskingPolicy.estimator"},
            )
        self._estimator: TokenEstimator = (
            estimator if estimator is not None else CharRatioEstimator()
        )

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

    def __repr__(self) -> str:
        return (
            f"ObservationMaskingPolicy(keep_recent_results={self._keep_recent_results}, "
            f"placeholder={self._placeholder!r}, estimator={self._estimator!r})"
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
        return stub_text(self._placeholder, token_estimate, content_digest(content))

    def _draft(self, transcript: Transcript, budget: CompactionBudget, shape: Layout) -> Draft:
        total = shape.total
        if total <= budget.max_tokens:
            return keep_all(shape)
        turns = transcript.turns
        tool = Role.TOOL
        stop = _floor_start(turns, self._keep_recent_results)
        draft = Draft([Action.KEEP] * len(turns), total, [None] * len(turns))
        actions, replacements, untouchable = draft.actions, draft.replacements, shape.untouchable
        masked = False
        limit, mask = budget.max_tokens, Action.MASK
        estimate = self._estimator.estimate_tokens
        # The character default prices by length alone, so the digest can wait for the plan
        # (see ``Stub``), and a stub's price depends only on the digits of the original's
        # estimate: each length is priced once. Any other estimator prices the whole stub.
        by_length = type(self._estimator) is CharRatioEstimator
        stubs: dict[int, Stub] = {}
        placeholder = self._placeholder
        for index in range(stop):
            if total <= limit:
                break
            turn = turns[index]
            if turn.role is not tool:
                continue
            metadata = turn.metadata
            if untouchable[index] or (
                metadata is not EMPTY_METADATA and metadata.get("cutctx.kind") == MASKED_KIND
            ):
                continue
            original = turn.token_estimate
            replacement: TurnReplacement | Stub
            if by_length:
                digits = len(str(original))
                replacement = stubs.get(digits) or stubs.setdefault(
                    digits,
                    Stub(placeholder, estimate(stub_text(placeholder, original, _A_DIGEST))),
                )
            else:
                stub = self.stub(turn.content, original)
                replacement = TurnReplacement(stub, estimate(stub))
            cost = replacement.token_estimate
            if cost >= original:
                continue
            actions[index] = mask
            replacements[index] = replacement
            masked = True
            total -= original - cost
        draft.tokens = total
        if masked:
            draft.estimator_ratio, draft.estimator_name = estimator_marks(self._estimator)
        return draft


def _floor_start(turns: tuple[TranscriptTurn, ...], keep: int) -> int:
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
