"""The quickstart: plan, fulfil and apply, first with drop-oldest, then with the default chain."""

from __future__ import annotations

from cutctx import (
    CompactionBudget,
    CompactionExecutor,
    DropOldestPolicy,
    Role,
    Transcript,
    TranscriptTurn,
    default_chain,
)

transcript = Transcript(
    (
        TranscriptTurn("s", Role.SYSTEM, "You are a careful assistant.", 12),
        TranscriptTurn("u1", Role.USER, "What changed in the build?", 30),
        TranscriptTurn("a1", Role.ASSISTANT, "Let me look.", 20, tool_call_id="c1"),
        TranscriptTurn("t1", Role.TOOL, "<4 kB of build log>", 900, tool_call_id="c1"),
        TranscriptTurn("a2", Role.ASSISTANT, "The cache key changed.", 25),
    )
)

# 1. Plan: nothing is spent and nothing changes.
plan = DropOldestPolicy().decide(
    transcript, CompactionBudget(max_tokens=100, protected_recent_turns=1)
)
print((plan.tokens_before, plan.tokens_after_estimate, plan.budget_unmet))  # (987, 37, False)

# 2. Apply: the view and an auditable report; the input is untouched.
view = CompactionExecutor().apply(transcript, plan)
print(view.transcript.turn_ids())  # ('s', 'a2')
print(view.report.dropped_turn_ids)  # ('u1', 'a1', 't1')
print(transcript.turn_ids())  # ('s', 'u1', 'a1', 't1', 'a2')

# The default chain masks old tool results first (free), then asks for one summary (one model
# call of yours), and drops the oldest exchanges only as the last resort.
session = Transcript(
    (
        TranscriptTurn("s", Role.SYSTEM, "You are a careful assistant.", 12),
        *(
            turn
            for step in range(4)
            for turn in (
                TranscriptTurn(f"a{step}", Role.ASSISTANT, f"Step {step}.", 10, f"c{step}"),
                TranscriptTurn(f"t{step}", Role.TOOL, "log line\n" * 200, 450, f"c{step}"),
            )
        ),
        TranscriptTurn("u", Role.USER, "So what broke?", 8),
    )
)
budget = CompactionBudget(max_tokens=300, protected_recent_turns=1)
plan = default_chain(prompt_id="my-app/summary-v1").decide(session, budget)
print(plan.policy_name, plan.tokens_before, "->", plan.tokens_after_estimate)
# 3. Fulfil: your own model call writes each requested summary.
summaries = {
    request.group_id: f"(summary of {len(request.turn_ids)} turns)"
    for request in plan.summarization_requests
}
result = CompactionExecutor().apply(session, plan, summaries)
print(result.transcript.turn_ids())
print(result.report.to_dict()["summary_turn_ids"])
