"""cutctx: deterministic, auditable compaction of LLM transcripts.

Plan → fulfil → apply: a policy's ``decide(transcript, budget)`` returns a ``CompactionPlan``
(nothing spent, nothing changed); the caller produces any summaries the plan requests; and
``CompactionExecutor().apply(transcript, plan, summaries)`` returns the compacted view and its
report. cutctx never calls a model. Everything public is exported here; the rest is private.

>>> from cutctx import CompactionBudget, CompactionExecutor, DropOldestPolicy
>>> from cutctx import Role, Transcript, TranscriptTurn
>>> transcript = Transcript((
...     TranscriptTurn("s", Role.SYSTEM, "You are a careful assistant.", 12),
...     TranscriptTurn("u1", Role.USER, "What changed in the build?", 30),
...     TranscriptTurn("a1", Role.ASSISTANT, "Let me look.", 20, tool_call_id="c1"),
...     TranscriptTurn("t1", Role.TOOL, "<4 kB of build log>", 900, tool_call_id="c1"),
...     TranscriptTurn("a2", Role.ASSISTANT, "The cache key changed.", 25),
... ))
>>> budget = CompactionBudget(max_tokens=100, protected_recent_turns=1)
>>> plan = DropOldestPolicy().decide(transcript, budget)
>>> (plan.tokens_before, plan.tokens_after_estimate, plan.budget_unmet)
(987, 37, False)
>>> view = CompactionExecutor().apply(transcript, plan)
>>> view.transcript.turn_ids()
('s', 'a2')
>>> view.report.dropped_turn_ids
('u1', 'a1', 't1')
>>> view.report.plan_hash == plan.plan_hash()
True
"""

from baseaicore import ValidationError as ValidationError

from cutctx._audit.explain import explain as explain
from cutctx._audit.records import CompactionRecord as CompactionRecord
from cutctx._audit.verify import Verification as Verification
from cutctx._audit.verify import verify as verify
from cutctx._core.errors import BudgetUnsatisfiable as BudgetUnsatisfiable
from cutctx._core.errors import CompactionError as CompactionError
from cutctx._core.errors import PlanTranscriptMismatch as PlanTranscriptMismatch
from cutctx._core.errors import SummaryMissing as SummaryMissing
from cutctx._core.estimators import CharRatioEstimator as CharRatioEstimator
from cutctx._core.estimators import TokenizerEstimator as TokenizerEstimator
from cutctx._core.executor import CompactionExecutor as CompactionExecutor
from cutctx._core.metadata import PRIORITY_KEY as PRIORITY_KEY
from cutctx._core.metadata import STICKY_KEY as STICKY_KEY
from cutctx._core.plan import CompactionPlan as CompactionPlan
from cutctx._core.protocols import CompactionPolicy as CompactionPolicy
from cutctx._core.protocols import TokenEstimator as TokenEstimator
from cutctx._core.report import CompactedTranscript as CompactedTranscript
from cutctx._core.report import CompactionReport as CompactionReport
from cutctx._core.text_estimator import TextEstimator as TextEstimator
from cutctx._core.values import DEFAULT_PLACEHOLDER as DEFAULT_PLACEHOLDER
from cutctx._core.values import EMPTY_METADATA as EMPTY_METADATA
from cutctx._core.values import GROUP_ID_PREFIX as GROUP_ID_PREFIX
from cutctx._core.values import SUMMARY_TURN_ID_PREFIX as SUMMARY_TURN_ID_PREFIX
from cutctx._core.values import Action as Action
from cutctx._core.values import CompactionBudget as CompactionBudget
from cutctx._core.values import Role as Role
from cutctx._core.values import SummarizationRequest as SummarizationRequest
from cutctx._core.values import Transcript as Transcript
from cutctx._core.values import TranscriptTurn as TranscriptTurn
from cutctx._core.values import TurnAction as TurnAction
from cutctx._core.values import TurnReplacement as TurnReplacement
from cutctx._loop.compact import CompactedMessages as CompactedMessages
from cutctx._loop.compact import acompact_messages as acompact_messages
from cutctx._loop.compact import compact_messages as compact_messages
from cutctx._loop.compact import default_messages_policy as default_messages_policy
from cutctx._loop.recall import recall as recall
from cutctx._loop.request import WindowStats as WindowStats
from cutctx._loop.window import ContextWindow as ContextWindow
from cutctx._policies.bounded import BoundedSummarizingPolicy as BoundedSummarizingPolicy
from cutctx._policies.chain import PolicyChain as PolicyChain
from cutctx._policies.chain import default_chain as default_chain
from cutctx._policies.drop import DropOldestPolicy as DropOldestPolicy
from cutctx._policies.excerpting import ExcerptingPolicy as ExcerptingPolicy
from cutctx._policies.masking import ObservationMaskingPolicy as ObservationMaskingPolicy
from cutctx._policies.priority import PriorityPolicy as PriorityPolicy
from cutctx._policies.summarizing import SummarizingPolicy as SummarizingPolicy
from cutctx._version import __version__ as __version__

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "EMPTY_METADATA",
    "GROUP_ID_PREFIX",
    "PRIORITY_KEY",
    "STICKY_KEY",
    "SUMMARY_TURN_ID_PREFIX",
    "Action",
    "BoundedSummarizingPolicy",
    "BudgetUnsatisfiable",
    "CharRatioEstimator",
    "CompactedMessages",
    "CompactedTranscript",
    "CompactionBudget",
    "CompactionError",
    "CompactionExecutor",
    "CompactionPlan",
    "CompactionPolicy",
    "CompactionRecord",
    "CompactionReport",
    "ContextWindow",
    "DropOldestPolicy",
    "ExcerptingPolicy",
    "ObservationMaskingPolicy",
    "PlanTranscriptMismatch",
    "PolicyChain",
    "PriorityPolicy",
    "Role",
    "SummarizationRequest",
    "SummarizingPolicy",
    "SummaryMissing",
    "TextEstimator",
    "TokenEstimator",
    "TokenizerEstimator",
    "Transcript",
    "TranscriptTurn",
    "TurnAction",
    "TurnReplacement",
    "ValidationError",
    "Verification",
    "WindowStats",
    "__version__",
    "acompact_messages",
    "compact_messages",
    "default_chain",
    "default_messages_policy",
    "explain",
    "recall",
    "verify",
]

# Tracebacks, reprs and docs show the public path (cutctx.CompactionPlan), not the private one.
# ValidationError is baseaicore's own class, re-exported so either name catches it: untouched.
for _name in __all__:
    _value = globals()[_name]
    if getattr(_value, "__module__", "").startswith("cutctx."):
        _value.__module__ = __name__
del _name, _value
