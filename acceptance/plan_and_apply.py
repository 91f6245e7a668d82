"""Acceptance: plan, fulfil with a hand-written summary, apply — and check every claim.

Standalone: it uses only cutctx, baseaicore and the standard library. Each claim is checked and
printed; the script exits 1 if any fails, 0 if all hold.
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import TYPE_CHECKING

from baseaicore import SuiteError, sha256_of

from cutctx import (
    SUMMARY_TURN_ID_PREFIX,
    Action,
    BudgetUnsatisfiable,
    CompactionBudget,
    CompactionExecutor,
    Role,
    SummaryMissing,
    Transcript,
    TranscriptTurn,
    default_chain,
)

if TYPE_CHECKING:
    from collections.abc import Callable

CLAIMS: list[tuple[str, bool]] = []


def claim(text: str, check: Callable[[], bool]) -> None:
    """Record whether ``check()`` holds; an exception counts as a failed claim."""
    try:
        held = bool(check())
    except (SuiteError, AssertionError, LookupError, TypeError, ValueError) as error:
        held = False
        text = f"{text} (raised {type(error).__name__}: {error})"
    CLAIMS.append((text, held))


def agent_run() -> Transcript:
    """A small agent session: system prompt, pinned task, tool exchanges, some chat."""
    turns = [
        TranscriptTurn("sys", Role.SYSTEM, "You are a build assistant.", 8),
        TranscriptTurn("task", Role.USER, "Find why the nightly build broke.", 10, pinned=True),
    ]
    for step in range(6):
        call = f"call{step}"
        log = f"step {step}: " + "compiler output line\n" * 60
        turns += [
            TranscriptTurn(f"a{step}", Role.ASSISTANT, f"Running step {step}.", 12, call),
            TranscriptTurn(f"t{step}", Role.TOOL, log, 300, call),
            TranscriptTurn(f"u{step}", Role.USER, "Keep going.", 5),
        ]
    turns.append(TranscriptTurn("answer", Role.ASSISTANT, "The cache key changed in step 4.", 15))
    return Transcript(tuple(turns))


def main() -> int:
    """Run the scenario and report; return the exit status."""
    transcript = agent_run()
    snapshot = [
        (t.turn_id, t.content, t.token_estimate, dict(t.metadata)) for t in transcript.turns
    ]
    budget = CompactionBudget(max_tokens=400, protected_recent_turns=3)
    policy = default_chain(prompt_id="acceptance/summary-v1", keep_recent_results=1)

    plan = policy.decide(transcript, budget)
    claim("the plan says it fits", lambda: not plan.budget_unmet)
    claim("the plan asks for exactly one summary", lambda: len(plan.summarization_requests) == 1)
    claim(
        "deciding again gives the same plan hash",
        lambda: policy.decide(transcript, budget).plan_hash() == plan.plan_hash(),
    )
    claim(
        "the plan is canonical JSON, and its hash is that text's SHA-256",
        lambda: (
            json.loads(plan.canonical_json()) == plan.to_dict()
            and plan.plan_hash() == hashlib.sha256(plan.canonical_json().encode()).hexdigest()
        ),
    )
    claim(
        "the summary group is named by 0.1's digest of its turn ids",
        lambda: (
            plan.summarization_requests[0].group_id
            == "span-" + sha256_of("\0".join(plan.summarization_requests[0].turn_ids))[:16]
        ),
    )

    def refuses_without_summary() -> bool:
        try:
            CompactionExecutor().apply(transcript, plan)
        except SummaryMissing as error:
            return error.details["group_id"] == plan.summarization_requests[0].group_id
        return False

    claim(
        "applying without the summary raises SummaryMissing naming the group",
        refuses_without_summary,
    )

    # Fulfil: the caller's own model call would go here; this summary is written by hand.
    request = plan.summarization_requests[0]
    summaries = {request.group_id: "Steps 0-4 ran cleanly; nothing relevant in their logs."}
    result = CompactionExecutor().apply(transcript, plan, summaries)
    view, report = result.transcript, result.report

    claim("the view fits the budget", lambda: view.token_estimate() <= budget.max_tokens)
    claim(
        "the view's estimate is the plan's",
        lambda: (
            sum(turn.token_estimate for turn in view.turns)
            == view.token_estimate()
            == plan.tokens_after_estimate
        ),
    )
    claim(
        "the input is untouched",
        lambda: (
            snapshot
            == [
                (t.turn_id, t.content, t.token_estimate, dict(t.metadata)) for t in transcript.turns
            ]
        ),
    )
    claim(
        "system, pinned and protected turns are kept",
        lambda: {"sys", "task", "u5", "answer", "t5"} <= set(view.turn_ids()),
    )
    summary_id = request.summary_turn_id
    claim(
        "the summary turn's id is the prefix and the group id",
        lambda: summary_id == SUMMARY_TURN_ID_PREFIX + request.group_id,
    )
    claim(
        "the summary turn carries the text verbatim",
        lambda: (
            next(t for t in view.turns if t.turn_id == summary_id).content
            == summaries[request.group_id]
        ),
    )
    claim(
        "the summary turn stands where its span began",
        lambda: view.turn_ids().index(summary_id) == 2,
    )

    def exchanges_whole() -> bool:
        present = set(view.turn_ids())
        calls: dict[str, set[bool]] = {}
        for turn in transcript.turns:
            if turn.tool_call_id is not None:
                calls.setdefault(turn.tool_call_id, set()).add(turn.turn_id in present)
        return all(len(states) == 1 for states in calls.values())

    claim("no exchange is split", exchanges_whole)
    claim(
        "the report serializes to plain JSON",
        lambda: json.loads(json.dumps(report.to_dict())) == report.to_dict(),
    )
    claim("the report's hash is the plan's", lambda: report.plan_hash == plan.plan_hash())
    claim(
        "the report accounts for every input turn",
        lambda: (
            sorted(
                report.kept_turn_ids
                + report.masked_turn_ids
                + report.summarized_turn_ids
                + report.dropped_turn_ids
            )
            == sorted(transcript.turn_ids())
        ),
    )
    claim(
        "summarized turns are exactly the request's",
        lambda: report.summarized_turn_ids == request.turn_ids,
    )
    claim(
        "every summarized turn is planned SUMMARIZE",
        lambda: all(
            a.action is Action.SUMMARIZE for a in plan.actions if a.turn_id in request.turn_ids
        ),
    )

    masking_plan = policy.decide(transcript, CompactionBudget(700, protected_recent_turns=3))
    masked = CompactionExecutor().apply(transcript, masking_plan).transcript
    stubs = [t for t in masked.turns if t.metadata.get("cutctx.kind") == "masked"]
    originals = {t.turn_id: t for t in transcript.turns}

    def stubs_leak_nothing() -> bool:
        return bool(stubs) and all(
            "compiler output" not in stub.content
            and sha256_of(originals[stub.turn_id].content) in stub.content
            for stub in stubs
        )

    claim(
        "a looser budget is met by masking alone, with no summary",
        lambda: not masking_plan.summarization_requests and not masking_plan.budget_unmet,
    )
    claim("masked stubs carry the original's digest, never an excerpt", stubs_leak_nothing)

    replanned = policy.decide(view, budget)
    claim(
        "a view that fits is left as it is when planned again",
        lambda: (
            all(a.action is Action.KEEP for a in replanned.actions)
            and not replanned.summarization_requests
        ),
    )

    def unsatisfiable() -> bool:
        try:
            policy.decide(transcript, CompactionBudget(max_tokens=10, protected_recent_turns=3))
        except BudgetUnsatisfiable as error:
            return error.details["max_tokens"] == 10 and error.details["untouchable_tokens"] > 10
        return False

    claim(
        "an untouchable set over budget raises BudgetUnsatisfiable with both numbers", unsatisfiable
    )

    failed = [text for text, held in CLAIMS if not held]
    for text, held in CLAIMS:
        print(f"{'ok  ' if held else 'FAIL'} {text}")
    print(f"{len(CLAIMS) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
