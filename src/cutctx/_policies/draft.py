"""The working form of a decision, shared by the built-in policies and the chain.

A policy decides into a ``Draft`` (one ``Action`` per turn index, the replacements of masked
turns and the summary groups), and ``build_plan`` turns a draft into the one ``CompactionPlan``,
computing the group ids, the requests and the figures. The chain composes drafts over projections
and calls ``build_plan`` once, against the real transcript.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final, NamedTuple, Self

from baseaicore import ValidationError

from cutctx._core.actions import CODES, EXCERPT, MASK, REPLACED, ActionTable, indices
from cutctx._core.digest import is_plain, json_string_digest
from cutctx._core.estimators import CharRatioEstimator
from cutctx._core.invariants import Layout, layout
from cutctx._core.metadata import (
    EXCERPT_KIND,
    KIND_METADATA,
    ORIGINAL_SHA256_METADATA,
    ORIGINAL_TOKENS_METADATA,
)
from cutctx._core.plan import CompactionPlan, plan_from_table
from cutctx._core.values import (
    Action,
    CompactionBudget,
    SummarizationRequest,
    Transcript,
    TranscriptTurn,
    TurnReplacement,
    group_id_for,
    trusted_replacement,
    trusted_request,
)
from cutctx._policies.config import estimator_name

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from cutctx._core.protocols import CompactionPolicy, TokenEstimator
    from cutctx._policies.config import Config

    type Describe = Callable[[CompactionPolicy], dict[str, Any]]
    """Describes a member policy: ``{"name", "version", "config"}``."""

__all__ = [
    "BuiltinPolicy",
    "Draft",
    "Group",
    "Stub",
    "build_plan",
    "check_estimator",
    "estimator_marks",
    "original_of",
    "stub_text",
]

_HEX: Final = frozenset("0123456789abcdef")


@dataclass(slots=True)
class Group:
    """One summary group: its turn indices in order, the target size and the prompt record."""

    members: Sequence[int]
    target_tokens: int
    prompt_id: str


def original_of(turn: TranscriptTurn) -> tuple[int, str | None]:
    """Return the estimate and digest a stub of ``turn`` names: its original's.

    For an excerpted turn (``cutctx.kind: excerpt``, as the executor and the chain's projections
    make it) they are the original result's, read from its metadata; for any other turn the
    turn's own estimate and ``None`` (its body is hashed when the stub is written).
    """
    metadata = turn.metadata
    if not metadata or metadata.get(KIND_METADATA) != EXCERPT_KIND:
        return turn.token_estimate, None
    tokens = metadata.get(ORIGINAL_TOKENS_METADATA, "")
    digest = metadata.get(ORIGINAL_SHA256_METADATA, "")
    # Metadata is the caller's to write: anything malformed falls back to the turn itself.
    if (
        not (tokens.isascii() and tokens.isdigit())
        or len(digest) != 64
        or not _HEX.issuperset(digest)
    ):
        return turn.token_estimate, None
    return int(tokens), digest


def stub_text(placeholder: str, token_estimate: int, digest: str) -> str:
    """Return the text of a masked stub: the label, the original's estimate and its digest.

    The digest is ``json_string_digest`` of the original's content (``baseaicore.sha256_of``, as
    0.1 writes it).
    """
    return f"{placeholder} (original: {token_estimate} tokens, sha256:{digest})"


class Stub(NamedTuple):
    """A masked body's stub whose digest waits until the plan is built.

    Its price is already known (the character default prices a stub by its length alone), so a
    body is hashed only if the final plan still masks it, not when a later chain member
    summarizes or drops it; the text is made then, from the label and the turn.
    """

    placeholder: str
    token_estimate: int

    def text(self, turn: TranscriptTurn) -> str:
        """Return the stub text for ``turn``, the digest of its original included."""
        tokens, digest = original_of(turn)
        return stub_text(self.placeholder, tokens, digest or json_string_digest(turn.content))

    def resolve(self, turn: TranscriptTurn) -> TurnReplacement:
        """Return the replacement for ``turn`` (see ``text``)."""
        return trusted_replacement(self.text(turn), self.token_estimate)


@dataclass(slots=True)
class Draft:
    """A decision in the making, indexed by turn position.

    ``tokens`` is the estimate of the view the decision yields (the gate checks it on the plan).
    ``replacements`` is empty when nothing is masked or excerpted, else one entry per turn (the
    stub or the excerpt; ``None`` elsewhere): a flat list costs a pointer a turn and no object.
    """

    actions: list[Action]
    tokens: int
    replacements: list[TurnReplacement | Stub | None] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    estimator_ratio: float | None = None
    estimator_name: str | None = None


def keep_all(shape: Layout) -> Draft:
    """Return the draft that keeps every turn of the view ``shape`` describes."""
    return Draft([Action.KEEP] * len(shape.turn_ids), shape.total)


def check_estimator(owner: str, estimator: object) -> TokenEstimator:
    """Return ``estimator`` (``CharRatioEstimator()`` for ``None``) or raise naming ``owner``."""
    if estimator is None:
        return CharRatioEstimator()
    if not callable(getattr(estimator, "estimate_tokens", None)):
        raise ValidationError(
            f"{owner}.estimator must have estimate_tokens(text) -> int",
            details={"field": f"{owner}.estimator"},
        )
    return estimator  # type: ignore[return-value]


def estimator_marks(estimator: TokenEstimator) -> tuple[float | None, str | None]:
    """Return what a plan records about the estimator that priced it: ratio, or name."""
    if isinstance(estimator, CharRatioEstimator):
        return estimator.chars_per_token, None
    return None, estimator_name(estimator)


def build_plan(
    transcript: Transcript,
    budget: CompactionBudget,
    draft: Draft,
    policy_name: str,
    policy_version: str,
) -> CompactionPlan:
    """Turn ``draft`` into a ``CompactionPlan`` for ``transcript`` (the gate runs inside).

    The plan holds its actions as columns (``ActionTable``); each masked body still awaiting its
    digest is hashed here, once. The draft is consumed: its actions and replacements are emptied.
    """
    turns = transcript.turns
    ids = transcript.turn_ids()
    kinds = bytes(map(CODES.__getitem__, draft.actions))
    draft.actions.clear()
    requests: list[SummarizationRequest] = []
    groups: tuple[str | None, ...] = ()
    if draft.groups:
        column: list[str | None] = [None] * len(turns)
        for group in sorted(draft.groups, key=lambda g: g.members[0]):
            named = tuple(map(ids.__getitem__, group.members))
            group_id = group_id_for(named)
            for index in group.members:
                column[index] = group_id
            requests.append(trusted_request(group_id, named, group.target_tokens, group.prompt_id))
        groups = tuple(column)
    texts: tuple[str | None, ...] = ()
    tokens: tuple[int, ...] = ()
    # A stub written from a label that needs no JSON escape needs none either (the rest of it
    # is digits, hex and fixed text); any other replacement (an excerpt) is not vouched for.
    plain = True
    if MASK in kinds or EXCERPT in kinds:
        replacements = draft.replacements
        text_column: list[str | None] = [None] * len(turns)
        token_column = [0] * len(turns)
        labels: dict[str, bool] = {}
        for index in indices(kinds.translate(REPLACED)):
            replacement = replacements[index]
            assert replacement is not None  # noqa: S101 - every masked or excerpted turn has one
            if isinstance(replacement, Stub):
                text_column[index] = replacement.text(turns[index])
                label = replacement.placeholder
                if label not in labels:
                    labels[label] = is_plain(label)
                    plain = plain and labels[label]
            else:
                text_column[index] = replacement.content
                plain = False
            token_column[index] = replacement.token_estimate
        texts, tokens = tuple(text_column), tuple(token_column)
        del text_column, token_column
    draft.replacements.clear()
    after = draft.tokens
    return plan_from_table(
        ActionTable(ids, kinds, texts, tokens, groups, plain),
        tuple(requests),
        transcript.token_estimate(),
        after,
        policy_name,
        policy_version,
        draft.estimator_ratio,
        after > budget.max_tokens,
        transcript=transcript,
        budget=budget,
        estimator_name=draft.estimator_name,
    )


class BuiltinPolicy(ABC):
    """Base of cutctx's own policies: decide into a draft, then build the one plan.

    The chain calls ``_draft`` directly on projections, so composing built-in policies builds no
    intermediate plan.
    """

    __slots__ = ()

    _NAME: ClassVar[str]
    _VERSION: ClassVar[str]
    masks: ClassVar[bool] = False
    """It only masks tool results, or removes exchanges whose results are all masked already
    (``CompactionPolicy``: what a policy may declare)."""
    drops: ClassVar[bool] = False
    """It removes whole exchanges."""
    summarizes: ClassVar[bool] = False
    """It plans summaries that the caller's ``summarize`` writes (a model call)."""
    _OUTSIDE_BUDGET: ClassVar[bool] = False
    """Whether the policy has work to do while the view fits the budget (excerpting does: its
    limit is the budget's ``max_result_tokens``), so a chain runs it even then."""
    _PRICES_ONLY: ClassVar[bool] = False
    """Whether ``_draft`` decides from the layout alone (its units, flags and figures, and turn
    metadata that masking leaves as it is), never reading a body or whether a turn is masked: a
    chain may then hand it the real layout re-priced for a view that only masks, instead of a
    projection. ``_prices_only`` answers it for one configuration."""

    @property
    def name(self) -> str:
        """The policy's stable name, recorded on every plan."""
        return self._NAME

    @property
    def version(self) -> str:
        """The version of the policy's behaviour: a change of behaviour bumps it."""
        return self._VERSION

    def _prices_only(self) -> bool:
        """Whether this configuration decides from the layout alone (see ``_PRICES_ONLY``)."""
        return self._PRICES_ONLY

    def _outside_budget(self) -> bool:
        """Whether this policy has work to do while the view fits (see ``_OUTSIDE_BUDGET``)."""
        return self._OUTSIDE_BUDGET

    @abstractmethod
    def _config(self, describe: Describe) -> dict[str, Any]:
        """Return this policy's configuration as plain JSON: what a record holds.

        ``_from_config`` reads it back into an equal policy; the two are the class's one
        statement of its knobs. ``describe`` describes a member (``{"name", "version",
        "config"}``), for a policy made of others (the chain).
        """

    @classmethod
    @abstractmethod
    def _from_config(cls, config: Config) -> Self:
        """Return the policy ``config`` (what ``_config`` wrote) describes.

        Raises:
            ValidationError: naming the key, for a configuration that is malformed.
            NotRebuildable: for an estimator or a member that is not data.
        """

    @abstractmethod
    def _draft(self, transcript: Transcript, budget: CompactionBudget, shape: Layout) -> Draft:
        """Decide over ``transcript``; ``shape`` is its layout, already known to be satisfiable."""

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        """Return the plan for ``transcript`` under ``budget``.

        Raises:
            BudgetUnsatisfiable: if the untouchable turns alone are over the budget.
            ValidationError: if ``transcript`` or ``budget`` is not a cutctx value.
        """
        # The layout is released before the plan is built (the gate computes its own).
        draft = self._draft(transcript, budget, checked_layout(transcript, budget))
        return build_plan(transcript, budget, draft, self.name, self.version)


def checked_layout(transcript: Transcript, budget: CompactionBudget) -> Layout:
    """Return the layout of ``transcript`` after checking the arguments and satisfiability."""
    if not isinstance(transcript, Transcript):
        raise ValidationError(
            f"decide() needs a cutctx.Transcript, got {type(transcript).__name__}",
            details={"field": "transcript"},
        )
    if not isinstance(budget, CompactionBudget):
        raise ValidationError(
            f"decide() needs a cutctx.CompactionBudget, got {type(budget).__name__}",
            details={"field": "budget"},
        )
    shape = layout(transcript, budget)
    shape.require_satisfiable(budget)
    return shape
