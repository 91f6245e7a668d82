"""``ExcerptingPolicy``: send each tool result over the result cap as its head and tail."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from cutctx._core.excerpts import check_recall_tool, priced_excerpt
from cutctx._core.metadata import KIND_METADATA, MASKED_KIND
from cutctx._core.values import (
    Action,
    CompactionBudget,
    Role,
    Transcript,
    TranscriptTurn,
    TurnReplacement,
    trusted_replacement,
)
from cutctx._policies.config import estimator_config
from cutctx._policies.draft import (
    BuiltinPolicy,
    Draft,
    check_estimator,
    estimator_marks,
    keep_all,
)

if TYPE_CHECKING:
    from typing import Any, Self

    from cutctx._core.invariants import Layout
    from cutctx._core.protocols import TokenEstimator
    from cutctx._policies.config import Config
    from cutctx._policies.draft import Describe

__all__ = ["ExcerptingPolicy", "excerpt_of"]


class ExcerptingPolicy(BuiltinPolicy):
    r"""Sends every tool result priced above the budget's ``max_result_tokens`` as an excerpt.

    An excerpt is the result's first lines, one elision line (the lines and tokens left out and
    the ``sha256:`` digest a masked stub of the result carries) and its last lines, verbatim,
    priced by ``estimator`` (``CharRatioEstimator()`` when ``None``) within the cap: the
    turn's own framing (its estimate less the price of its text: roles, images) plus the
    excerpt's price. It applies in the protected tail too, and whether or not the view fits
    the budget: the cap is a limit of its own. A masked stub is never excerpted, nor a result
    of which not even the elision line fits (its framing alone is over the cap). With
    ``recall_tool`` every elision line says how to read the rest with that tool. Without a cap
    (``max_result_tokens=None``) it does nothing. Put it first in a chain: a later member may
    still mask, summarize or drop an excerpted result like any other, and the stub of a masked
    excerpt names the original's estimate and digest.

    >>> from cutctx import CompactionBudget, Role, Transcript, TranscriptTurn
    >>> log = "".join(f"line {n}\n" for n in range(500))
    >>> t = Transcript((TranscriptTurn("r", Role.TOOL, log, 1000, "c"),))
    >>> plan = ExcerptingPolicy().decide(t, CompactionBudget(2000, max_result_tokens=200))
    >>> plan.actions[0].action, plan.actions[0].replacement.token_estimate <= 200
    (<Action.EXCERPT: 'excerpt'>, True)

    Raises:
        ValidationError: for an ``estimator`` without ``estimate_tokens`` or a ``recall_tool``
            that is not a name on one line.

    .. versionadded:: 0.1.1
    """

    __slots__ = ("_estimator", "_recall_tool")

    _NAME: ClassVar[str] = "excerpting"
    _VERSION: ClassVar[str] = "1.0.0"
    _OUTSIDE_BUDGET: ClassVar[bool] = True

    def __init__(
        self, *, estimator: TokenEstimator | None = None, recall_tool: str | None = None
    ) -> None:
        self._estimator = check_estimator("ExcerptingPolicy", estimator)
        self._recall_tool = check_recall_tool("ExcerptingPolicy", recall_tool)

    @property
    def estimator(self) -> TokenEstimator:
        """The estimator that prices excerpts."""
        return self._estimator

    @property
    def recall_tool(self) -> str | None:
        """The tool each elision line names for reading the rest, or ``None``."""
        return self._recall_tool

    def _config(self, describe: Describe) -> dict[str, Any]:
        del describe  # no members
        return {"estimator": estimator_config(self._estimator), "recall_tool": self._recall_tool}

    @classmethod
    def _from_config(cls, config: Config) -> Self:
        return cls(
            estimator=config.estimator("estimator"),
            recall_tool=config.optional_text("recall_tool"),
        )

    def __repr__(self) -> str:
        return f"ExcerptingPolicy(estimator={self._estimator!r}, recall_tool={self._recall_tool!r})"

    def _draft(self, transcript: Transcript, budget: CompactionBudget, shape: Layout) -> Draft:
        cap = budget.max_result_tokens
        draft = keep_all(shape)
        if cap is None:
            return draft
        tool, excerpted = Role.TOOL, Action.EXCERPT
        for index, turn in enumerate(transcript.turns):
            if turn.role is not tool or turn.token_estimate <= cap:
                continue
            if turn.metadata and turn.metadata.get(KIND_METADATA) == MASKED_KIND:
                continue
            replacement = excerpt_of(turn, cap, self._estimator, self._recall_tool)
            if replacement is None:
                continue
            if not draft.replacements:
                draft.replacements = [None] * len(transcript.turns)
            draft.actions[index] = excerpted
            draft.replacements[index] = replacement
            draft.tokens -= turn.token_estimate - replacement.token_estimate
        if draft.replacements:
            draft.estimator_ratio, draft.estimator_name = estimator_marks(self._estimator)
        return draft


def excerpt_of(
    turn: TranscriptTurn,
    cap: int,
    estimator: TokenEstimator,
    recall_tool: str | None = None,
    *,
    quick: bool = False,
) -> TurnReplacement | None:
    """Return the excerpt of ``turn``'s body within ``cap``, priced, or ``None`` if none fits.

    Its price is the turn's framing (``turn.token_estimate`` less the price of its text) plus
    the excerpt's price, never below 0. ``quick``: as ``priced_excerpt``'s (a window's).
    """
    estimate = estimator.estimate_tokens
    content = turn.content
    own = estimate(content)

    def price(text: str) -> int:
        # The excerpt builder prices the whole original first: it is priced already.
        return own if text is content else estimate(text)

    framing = turn.token_estimate - own
    made = priced_excerpt(content, cap, price, framing, recall_tool=recall_tool, quick=quick)
    if made is None:
        return None
    text, cost = made
    return trusted_replacement(text, max(0, framing + cost))
