"""``PolicyChain`` and ``default_chain``: compose policies over projections, plan once."""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, ClassVar

from baseaicore import ValidationError

from cutctx._core.actions import ACTIONS
from cutctx._core.executor import excerpted_turn, masked_turn, summary_turn
from cutctx._core.invariants import Layout, layout
from cutctx._core.plan import CompactionPlan, table_of
from cutctx._core.protocols import CompactionPolicy
from cutctx._core.values import (
    Action,
    CompactionBudget,
    Transcript,
    TranscriptTurn,
    TurnReplacement,
    group_id_for,
    trusted_replacement,
    trusted_transcript,
)
from cutctx._policies.draft import BuiltinPolicy, Draft, Group, Stub
from cutctx._policies.drop import DropOldestPolicy
from cutctx._policies.masking import ObservationMaskingPolicy
from cutctx._policies.summarizing import SummarizingPolicy

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any, Self

    from cutctx._core.protocols import TokenEstimator
    from cutctx._policies.config import Config
    from cutctx._policies.draft import Describe

__all__ = ["PolicyChain", "default_chain"]


class PolicyChain(BuiltinPolicy):
    """Runs its members in order while the projected view is over budget, and plans once.

    Each member decides over a *projection* of the view the decisions so far would produce:
    masked turns carry their stubs, excerpted turns their excerpts, and each summary group is
    one assistant stand-in priced at its ``target_tokens``. A member's action on a stand-in
    applies to every turn of its group (dropping it drops them all and retires the request;
    folding it into a new summary merges the groups); masking an excerpted result masks the
    original. The one plan is built at the end, against the real transcript. A chain keeps
    the first estimator ratio (or name) any member recorded. A member whose limit is not the
    budget (``ExcerptingPolicy``, whose limit is the budget's ``max_result_tokens``) runs even
    while the view fits.

    .. versionchanged:: 0.1.1
       Composes excerpts, and runs an excerpting member while the view fits.

    Raises:
        ValidationError: for an empty chain, a member that is not a policy, or a member that
            masks a summary stand-in.
    """

    __slots__ = ("_name", "_policies")

    _VERSION: ClassVar[str] = "1.0.0"

    def __init__(self, policies: Iterable[CompactionPolicy]) -> None:
        members = tuple(policies) if not isinstance(policies, str) else ()
        if not members:
            raise ValidationError(
                "PolicyChain needs at least one policy", details={"field": "PolicyChain.policies"}
            )
        for position, member in enumerate(members):
            if not isinstance(member, CompactionPolicy):
                raise ValidationError(
                    f"PolicyChain.policies[{position}] is not a CompactionPolicy "
                    f"(needs name, version and decide), got {type(member).__name__}",
                    details={
                        "field": "PolicyChain.policies",
                        "index": position,
                        "expected": "a CompactionPolicy",
                        "type": type(member).__name__,
                    },
                )
        self._policies = members
        self._name = "chain(" + "+".join(f"{p.name}@{p.version}" for p in members) + ")"

    @property
    def name(self) -> str:
        """``chain(`` + each member's ``name@version`` joined by ``+`` + ``)``."""
        return self._name

    @property
    def policies(self) -> tuple[CompactionPolicy, ...]:
        """The members, in the order they run."""
        return self._policies

    def _config(self, describe: Describe) -> dict[str, Any]:
        return {"policies": [describe(member) for member in self._policies]}

    @classmethod
    def _from_config(cls, config: Config) -> Self:
        return cls(config.policies("policies"))

    def __repr__(self) -> str:
        return f"PolicyChain({list(self._policies)!r})"

    def _outside_budget(self) -> bool:
        return any(_outside_budget(member) for member in self._policies)

    def _draft(self, transcript: Transcript, budget: CompactionBudget, shape: Layout) -> Draft:
        state = _State(transcript, resolve=_reads_content(self))
        for member in self._policies:
            if state.tokens <= budget.max_tokens and not _outside_budget(member):
                continue
            if state.untouched:
                # Nothing is decided yet (this is the first member, or those before it changed
                # nothing): the member decides over the real transcript, its draft the state.
                state.adopt(_member_draft(member, transcript, budget, shape))
                continue
            if isinstance(member, BuiltinPolicy) and member._prices_only() and not state.removes:
                # A view that only masks keeps every turn in its place: a member that decides
                # from figures alone gets the real layout re-priced instead of a projection.
                draft = member._draft(transcript, budget, state.repriced(shape))
                state.absorb(member, None, draft)
                del draft
                continue
            # A projection (and its layout) lives only while its member decides over it.
            view, origin = state.project()
            draft = _member_draft(member, view, budget, layout(view, budget))
            del view
            state.absorb(member, origin, draft)
            del draft
        return state.draft()


def default_chain(
    *,
    prompt_id: str,
    keep_recent_results: int = 2,
    target_ratio: float = 0.2,
    min_span_turns: int = 4,
    estimator: TokenEstimator | None = None,
) -> PolicyChain:
    """Return masking → summarizing → drop-oldest: free first, then one model call, then loss.

    ``estimator`` prices the masking stubs (``CharRatioEstimator()`` when ``None``): pass the
    one that priced the transcript, so a plan that fits fits when its output is counted with it.

    >>> default_chain(prompt_id="summaries/v1").name
    'chain(observation_masking@1.0.0+summarizing@1.0.0+drop_oldest@1.0.0)'
    """
    return PolicyChain(
        (
            ObservationMaskingPolicy(keep_recent_results, estimator=estimator),
            SummarizingPolicy(prompt_id, target_ratio, min_span_turns),
            DropOldestPolicy(),
        )
    )


def _member_draft(
    member: CompactionPolicy, view: Transcript, budget: CompactionBudget, shape: Layout
) -> Draft:
    """Decide over ``view``: built-in members draft directly, others through their plan."""
    if isinstance(member, BuiltinPolicy):
        return member._draft(view, budget, shape)
    plan = member.decide(view, budget)
    if not isinstance(plan, CompactionPlan):
        raise ValidationError(
            f"chain member {member.name}@{member.version} returned "
            f"{type(plan).__name__}, not a CompactionPlan",
            details={"policy": member.name, "version": member.version},
        )
    table = table_of(plan)
    if table.turn_ids != view.turn_ids():
        raise ValidationError(
            f"chain member {member.name}@{member.version} returned a plan for another transcript",
            details={"policy": member.name, "version": member.version},
        )
    position = {turn.turn_id: index for index, turn in enumerate(view.turns)}
    draft = Draft([ACTIONS[code] for code in table.kinds], plan.tokens_after_estimate)
    if table.stub_texts:
        draft.replacements = [
            None if text is None else trusted_replacement(text, estimate)
            for text, estimate in zip(table.stub_texts, table.stub_tokens, strict=True)
        ]
    draft.groups = [
        Group(
            [position[turn_id] for turn_id in request.turn_ids],
            request.target_tokens,
            request.prompt_id,
        )
        for request in plan.summarization_requests
    ]
    draft.estimator_ratio = plan.estimator_ratio
    draft.estimator_name = plan.estimator_name
    return draft


def _outside_budget(policy: CompactionPolicy) -> bool:
    """Whether ``policy`` has work to do while the view fits (see ``_OUTSIDE_BUDGET``)."""
    return isinstance(policy, BuiltinPolicy) and policy._outside_budget()


def _reads_content(policy: CompactionPolicy) -> bool:
    """Whether ``policy`` may read a masked turn's stub text in a projection.

    The built-in policies never do (they skip masked turns), so their chains can leave stubs'
    digests for the final plan; any other policy sees every stub whole.
    """
    if isinstance(policy, PolicyChain):
        return any(_reads_content(member) for member in policy.policies)
    return not isinstance(policy, BuiltinPolicy)


class _State:
    """The chain's decisions so far, over the real transcript's turn indices.

    A masked turn's ``Stub`` is resolved (hashed) in a projection only when ``resolve`` is set;
    otherwise the projection carries the stub without its digest, at the same price.
    """

    __slots__ = (
        "actions",
        "estimator_name",
        "estimator_ratio",
        "group_of",
        "groups",
        "next_key",
        "removes",
        "replacements",
        "resolve",
        "tokens",
        "transcript",
        "untouched",
    )

    def __init__(self, transcript: Transcript, *, resolve: bool) -> None:
        self.transcript = transcript
        self.resolve = resolve
        self.actions = [Action.KEEP] * len(transcript.turns)
        self.replacements: list[TurnReplacement | Stub | None] = []
        # Each summarized turn's group key (-1 elsewhere), made with the first group.
        self.group_of = array("q")
        self.groups: dict[int, Group] = {}
        self.next_key = 0
        self.estimator_ratio: float | None = None
        self.estimator_name: str | None = None
        # The estimate of the view the decisions so far yield (the last member's figure).
        self.tokens = transcript.token_estimate()
        # Whether any turn is summarized or dropped yet (until then the view only masks or
        # excerpts).
        self.removes = False
        # Whether no member changed anything yet (the view is the transcript itself).
        self.untouched = True

    def adopt(self, draft: Draft) -> None:
        """Take a draft decided over the real transcript itself as the decisions so far.

        Only while ``untouched``: the decisions so far keep every turn as it is.
        """
        self.actions = draft.actions
        self.replacements = draft.replacements
        self.removes = bool(draft.groups) or Action.DROP in draft.actions
        for group in draft.groups:
            self._add(group)
        if self.estimator_ratio is None and self.estimator_name is None:
            self.estimator_ratio = draft.estimator_ratio
            self.estimator_name = draft.estimator_name
        self.tokens = draft.tokens
        self.untouched = not draft.groups and draft.actions.count(Action.KEEP) == len(draft.actions)

    def repriced(self, shape: Layout) -> Layout:
        """Return the layout of the view so far, re-priced from the real one.

        Only while nothing is removed (see ``removes``), so each replacement is a masked stub or
        an excerpt, in the view at its own price.
        """
        replacements = self.replacements
        prices = (
            (index, replacement.token_estimate)
            for index, replacement in enumerate(replacements)
            if replacement is not None
        )
        return shape.repriced(prices, self.tokens)

    def absorb(self, member: CompactionPolicy, origin: Sequence[int] | None, draft: Draft) -> None:
        """Map a member's draft over the projection back onto the real turns.

        ``origin[p]`` is the real index behind projected turn ``p``, or ``~key`` (a negative
        number) for the stand-in of group ``key``; ``None`` when the member decided over the
        real turns themselves (a re-priced layout: then there are no stand-ins).
        """
        if self.estimator_ratio is None and self.estimator_name is None:
            self.estimator_ratio = draft.estimator_ratio
            self.estimator_name = draft.estimator_name
        self.tokens = draft.tokens
        for position, kind in enumerate(draft.actions):
            if kind is Action.KEEP or kind is Action.SUMMARIZE:
                continue
            self.untouched = False
            source = position if origin is None else origin[position]
            if kind is Action.MASK or kind is Action.EXCERPT:
                if source < 0:
                    raise ValidationError(
                        f"chain member {member.name}@{member.version} {kind.value}ed a summary "
                        "stand-in",
                        details={"policy": member.name, "version": member.version},
                    )
                if not self.replacements:
                    self.replacements = [None] * len(self.actions)
                self.actions[source] = kind
                self.replacements[source] = draft.replacements[position]
            else:
                self.removes = True
                for index in self._reals(source):
                    self.actions[index] = Action.DROP
        for group in draft.groups:
            self.removes = True
            self.untouched = False
            if origin is None:
                self._add(group)
                continue
            members: list[int] = []
            for position in group.members:
                members.extend(self._reals(origin[position]))
            members.sort()
            self._add(Group(members, group.target_tokens, group.prompt_id))

    def _add(self, group: Group) -> None:
        """Record ``group`` (over real indices) under a new key; its turns are summarized."""
        key = self.next_key
        self.next_key += 1
        self.groups[key] = group
        if not self.group_of:
            self.group_of = array("q", [-1]) * len(self.actions)
        actions, group_of, summarize = self.actions, self.group_of, Action.SUMMARIZE
        for index in group.members:
            actions[index] = summarize
            group_of[index] = key

    def _reals(self, source: int) -> Sequence[int]:
        """Return the real indices behind one projected turn, retiring a stand-in's group."""
        if source >= 0:
            return [source]
        group = self.groups.pop(~source)
        for index in group.members:
            self.group_of[index] = -1
        return group.members

    def project(self) -> tuple[Transcript, array[int]]:
        """Return the view the decisions so far would produce, and each turn's origin."""
        turns = self.transcript.turns
        view: list[TranscriptTurn] = []
        origin = array("q")  # machine ints: no object per turn
        keep, mask, summarize = Action.KEEP, Action.MASK, Action.SUMMARIZE
        for index, kind in enumerate(self.actions):
            if kind is keep:
                view.append(turns[index])
            elif kind is Action.EXCERPT:
                replacement = self.replacements[index]
                assert isinstance(replacement, TurnReplacement)  # noqa: S101 - an excerpt's
                view.append(
                    excerpted_turn(turns[index], replacement.content, replacement.token_estimate)
                )
            elif kind is mask:
                replacement = self.replacements[index]
                assert replacement is not None  # noqa: S101 - every masked turn has one
                if isinstance(replacement, Stub) and self.resolve:
                    replacement = replacement.resolve(turns[index])
                    self.replacements[index] = replacement
                if isinstance(replacement, Stub):
                    # Built-in members never read a masked body: the label stands in,
                    # at the stub's price, until the plan resolves the digest.
                    stub = replacement.placeholder
                else:
                    stub = replacement.content
                view.append(masked_turn(turns[index], stub, replacement.token_estimate))
            elif kind is summarize:
                key = self.group_of[index]
                group = self.groups[key]
                if group.members[0] != index:
                    continue
                ids = [turns[member].turn_id for member in group.members]
                view.append(summary_turn(group_id_for(ids), "", group.target_tokens, len(ids)))
                origin.append(~key)
                continue
            else:
                continue
            origin.append(index)
        # Ids stay unique: stand-in ids are digests of the real ids they replace.
        extra = self.transcript.request_tokens  # the request's own cost stays in the projection
        return trusted_transcript(tuple(view), None, extra), origin

    def draft(self) -> Draft:
        """Return the decisions as a draft over the real transcript."""
        return Draft(
            self.actions,
            self.tokens,
            self.replacements,
            list(self.groups.values()),
            self.estimator_ratio,
            self.estimator_name,
        )
