"""``CompactionExecutor``: applies a plan, with the caller's summaries, to make the view."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import compress
from types import MappingProxyType

from baseaicore import ValidationError

from cutctx._core.actions import (
    ACTIONS,
    DROPPED,
    EXCERPTED,
    KEPT,
    MASKED,
    REPLACED,
    STAYS,
    SUMMARIZED,
    TOUCHED,
    indices,
)
from cutctx._core.errors import PlanTranscriptMismatch, SummaryMissing
from cutctx._core.excerpts import parse_excerpt
from cutctx._core.invariants import check_plan, fixed_flags
from cutctx._core.metadata import (
    EXCERPT_KIND,
    KIND_METADATA,
    MASKED_KIND,
    ORIGINAL_SHA256_METADATA,
    ORIGINAL_TOKENS_METADATA,
    REPLACED_TURN_COUNT_METADATA,
    SUMMARY_GROUP_METADATA,
    SUMMARY_KIND,
)
from cutctx._core.plan import CompactionPlan, table_of
from cutctx._core.report import CompactedTranscript, CompactionReport
from cutctx._core.values import (
    EMPTY_METADATA,
    SUMMARY_TURN_ID_PREFIX,
    Action,
    CompactionBudget,
    Role,
    Transcript,
    TranscriptTurn,
    trusted_transcript,
    trusted_turn,
)

__all__ = ["CompactionExecutor", "excerpted_turn", "masked_turn", "plan_holds", "summary_turn"]

_MAX_IDS = 10
MASKED_ONLY: Mapping[str, str] = MappingProxyType({KIND_METADATA: MASKED_KIND})


def masked_turn(turn: TranscriptTurn, content: str, token_estimate: int) -> TranscriptTurn:
    """Return ``turn`` with its body replaced: same id, role, call id, pin and position."""
    if turn.metadata is EMPTY_METADATA:
        metadata = MASKED_ONLY  # the common case shares one read-only mapping
    else:
        metadata = MappingProxyType({**turn.metadata, KIND_METADATA: MASKED_KIND})
    # Every part is already valid: the turn's own fields and a stub the gate accepted.
    return trusted_turn(turn, content, token_estimate, metadata)


def excerpted_turn(turn: TranscriptTurn, content: str, token_estimate: int) -> TranscriptTurn:
    """Return ``turn`` with its body replaced by its excerpt ``content``, as a masked turn is.

    Its metadata gains ``cutctx.kind: excerpt`` and, so that a stub made of the excerpted turn
    later still names the original, ``cutctx.original_tokens`` (the original's estimate) and
    ``cutctx.original_sha256`` (the digest the excerpt's elision line names).
    """
    parsed = parse_excerpt(turn.content, content)
    assert parsed is not None  # noqa: S101 - the gate accepted this excerpt of this turn
    metadata = MappingProxyType(
        {
            **turn.metadata,
            KIND_METADATA: EXCERPT_KIND,
            ORIGINAL_TOKENS_METADATA: str(turn.token_estimate),
            ORIGINAL_SHA256_METADATA: parsed.digest,
        }
    )
    return trusted_turn(turn, content, token_estimate, metadata)


def summary_turn(group_id: str, content: str, target_tokens: int, replaced: int) -> TranscriptTurn:
    """Return the assistant turn that stands for a summary group, priced at its target."""
    return TranscriptTurn(
        SUMMARY_TURN_ID_PREFIX + group_id,
        Role.ASSISTANT,
        content,
        target_tokens,
        None,
        pinned=False,
        metadata=MappingProxyType(
            {
                KIND_METADATA: SUMMARY_KIND,
                SUMMARY_GROUP_METADATA: group_id,
                REPLACED_TURN_COUNT_METADATA: str(replaced),
            }
        ),
    )


class CompactionExecutor:
    """Applies a plan to the transcript it was built for; it never calls a model.

    >>> from cutctx import CompactionBudget, DropOldestPolicy, Role, Transcript, TranscriptTurn
    >>> t = Transcript((TranscriptTurn("u", Role.USER, "hi", 1),))
    >>> plan = DropOldestPolicy().decide(t, CompactionBudget(max_tokens=10))
    >>> CompactionExecutor().apply(t, plan).transcript.turn_ids()
    ('u',)
    """

    __slots__ = ()

    def apply(
        self,
        transcript: Transcript,
        plan: CompactionPlan,
        summaries: Mapping[str, str] = EMPTY_METADATA,
    ) -> CompactedTranscript:
        """Return the compacted view and its report; the input is never changed.

        Kept turns are the same objects; a masked or excerpted turn keeps its id, role,
        ``tool_call_id`` and position (``excerpted_turn``); each summary group becomes one
        assistant turn at its earliest turn's position.
        Summaries for groups the plan does not name are ignored.

        Raises:
            PlanTranscriptMismatch: if ``plan`` was not built for ``transcript``.
            SummaryMissing: naming the first request without a summary.
            ValidationError: if an argument is of the wrong type or a summary is not a string.
        """
        if not isinstance(transcript, Transcript):
            raise _wrong("transcript", "a cutctx.Transcript", transcript)
        if not isinstance(plan, CompactionPlan):
            raise _wrong("plan", "a cutctx.CompactionPlan", plan)
        if not isinstance(summaries, Mapping):
            raise _wrong("summaries", "a mapping of group id to summary text", summaries)
        _check_belongs(transcript, plan)
        requests = plan.summarization_requests
        missing = [request.group_id for request in requests if request.group_id not in summaries]
        if missing:
            raise SummaryMissing(
                f"no summary was supplied for group {missing[0]!r}",
                details={"group_id": missing[0], "missing_group_ids": missing},
            )
        texts: dict[str, str] = {}
        for request in requests:
            text = summaries[request.group_id]
            if not isinstance(text, str):
                raise _wrong(f"summaries[{request.group_id!r}]", "a string", text)
            texts[request.group_id] = text
        return _build(transcript, plan, texts)


def _build(
    transcript: Transcript, plan: CompactionPlan, texts: dict[str, str]
) -> CompactedTranscript:
    table = table_of(plan)
    turns, kinds, ids = transcript.turns, table.kinds, table.turn_ids
    # Kept turns are the same objects; masked, excerpted and summary turns are placed by index,
    # and the view is made in one pass that also leaves out the turns the plan removes.
    masked = kinds.translate(MASKED)
    excerpted = kinds.translate(EXCERPTED)
    placed: dict[int, TranscriptTurn] = {}
    if table.stub_texts:
        stub_texts, stub_tokens = table.stub_texts, table.stub_tokens
        for index in indices(kinds.translate(REPLACED)):
            text = stub_texts[index]
            assert text is not None  # noqa: S101 - every masked or excerpted turn has its text
            replace = excerpted_turn if excerpted[index] else masked_turn
            placed[index] = replace(turns[index], text, stub_tokens[index])
    stays = bytearray(kinds.translate(STAYS))
    summary_ids: list[str] = []
    summarized = kinds.translate(SUMMARIZED)
    if plan.summarization_requests:
        starts: dict[str | None, int] = {}
        for index, group_of in zip(
            indices(summarized), compress(table.groups, summarized), strict=True
        ):
            starts.setdefault(group_of, index)
        # Requests are ordered by their earliest turn (the gate sees to it), as the view is.
        for request in plan.summarization_requests:
            group = request.group_id
            start = starts[group]
            summary = summary_turn(
                group, texts[group], request.target_tokens, len(request.turn_ids)
            )
            placed[start] = summary
            stays[start] = 1
            summary_ids.append(summary.turn_id)
    view = tuple(compress(map(placed.get, range(len(turns)), turns), stays))
    report = CompactionReport(
        plan_hash=plan.plan_hash(),
        policy_name=plan.policy_name,
        policy_version=plan.policy_version,
        tokens_before=plan.tokens_before,
        tokens_after_estimate=plan.tokens_after_estimate,
        estimator_ratio=plan.estimator_ratio,
        budget_unmet=plan.budget_unmet,
        turns_before=len(turns),
        turns_after=len(view),
        kept_turn_ids=tuple(compress(ids, kinds.translate(KEPT))),
        masked_turn_ids=tuple(compress(ids, masked)),
        summarized_turn_ids=tuple(compress(ids, summarized)),
        dropped_turn_ids=tuple(compress(ids, kinds.translate(DROPPED))),
        summary_turn_ids=tuple(summary_ids),
        estimator_name=plan.estimator_name,
        excerpted_turn_ids=tuple(compress(ids, excerpted)),
    )
    # Ids stay unique: the gate refuses a summary id that a kept or masked turn holds; the
    # view's estimate is the plan's (the gate summed exactly these turns and summaries).
    view_transcript = trusted_transcript(
        view, plan.tokens_after_estimate, transcript.request_tokens
    )
    return CompactedTranscript(view_transcript, report)


def plan_holds(plan: CompactionPlan, transcript: Transcript, budget: CompactionBudget) -> None:
    """Raise unless ``plan`` belongs to ``transcript`` and passes the gate under ``budget``.

    What a record, ``verify`` and ``explain`` check of a plan handed to them: the executor's
    membership check (``PlanTranscriptMismatch``), then the invariants gate (``ValidationError``,
    or ``BudgetUnsatisfiable``) against that budget.
    """
    _check_belongs(transcript, plan)
    check_plan(
        transcript,
        budget,
        table_of(plan),
        plan.summarization_requests,
        plan.tokens_before,
        plan.tokens_after_estimate,
        plan.budget_unmet,
    )


def _check_belongs(transcript: Transcript, plan: CompactionPlan) -> None:
    """Raise ``PlanTranscriptMismatch`` unless ``plan`` belongs to ``transcript``.

    It must name exactly its turns, in order, for the token total it was built for, and remove
    none of its SYSTEM or pinned turns.
    """
    table = table_of(plan)
    turns = transcript.turns
    present = transcript.turn_ids()
    same = table.turn_ids == present
    if same:
        # A SYSTEM or pinned turn is untouchable under any budget: a plan removing one was
        # built for another version of this transcript (contract 2 holds in apply too).
        touched = table.kinds.translate(TOUCHED)
        fixed = fixed_flags(transcript)
        if any(compress(fixed, touched)):
            index = next(i for i in indices(touched) if fixed[i])
            raise _untouchable_removed(turns[index], ACTIONS[table.kinds[index]])
    total = transcript.token_estimate()
    if same and total == plan.tokens_before:
        return
    planned = table.turn_ids
    present_set, planned_set = set(present), set(planned)
    unknown = sorted(planned_set - present_set)
    unplanned = sorted(present_set - planned_set)
    common = present_set & planned_set
    order_differs = [i for i in present if i in common] != [i for i in planned if i in common]
    details: dict[str, object] = {
        "unknown_turn_ids": unknown[:_MAX_IDS],
        "unknown_turn_count": len(unknown),
        "unplanned_turn_ids": unplanned[:_MAX_IDS],
        "unplanned_turn_count": len(unplanned),
        "order_differs": order_differs,
    }
    if same:
        details["plan_tokens_before"] = plan.tokens_before
        details["transcript_tokens"] = total
        message = (
            f"the plan was built for {plan.tokens_before} tokens of these turns, "
            f"the transcript now holds {total}"
        )
    else:
        message = (
            f"the plan was built for another transcript: {len(unknown)} unknown and "
            f"{len(unplanned)} unplanned turn ids" + (", order differs" if order_differs else "")
        )
    raise PlanTranscriptMismatch(message, details=details)


def _untouchable_removed(turn: TranscriptTurn, kind: Action) -> PlanTranscriptMismatch:
    return PlanTranscriptMismatch(
        f"the plan would {kind.value} the untouchable turn {turn.turn_id!r}: it was built for "
        "another version of this transcript",
        details={
            "unknown_turn_ids": [],
            "unknown_turn_count": 0,
            "unplanned_turn_ids": [],
            "unplanned_turn_count": 0,
            "order_differs": False,
            "turn_id": turn.turn_id,
            "action": kind.value,
        },
    )


def _wrong(name: str, expected: str, value: object) -> ValidationError:
    return ValidationError(
        f"apply() {name} must be {expected}, got {type(value).__name__}",
        details={"field": name, "expected": expected},
    )
