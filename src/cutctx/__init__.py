"""cutctx: deterministic, auditable compaction of LLM transcripts.

Plan → fulfil → apply: a policy's ``decide(transcript, budget)`` returns a ``CompactionPlan``
(nothing spent, nothing changed); the caller produces any summaries the plan requests; and
``CompactionExecutor().apply(transcript, plan, summaries)`` returns the compacted view and its
report. cutctx never calls a model. Everything public is exported here; the rest is private.
"""

from cutctx._core.errors import BudgetUnsatisfiable as BudgetUnsatisfiable
from cutctx._core.errors import CompactionError as CompactionError
from cutctx._core.errors import PlanTranscriptMismatch as PlanTranscriptMismatch
from cutctx._core.errors import SummaryMissing as SummaryMissing
from cutctx._core.estimators import CharRatioEstimator as CharRatioEstimator
from cutctx._core.estimators import TokenizerEstimator as TokenizerEstimator
from cutctx._core.executor import CompactionExecutor as CompactionExecutor
from cutctx._core.plan import CompactionPlan as CompactionPlan
from cutctx._core.protocols import CompactionPolicy as CompactionPolicy
from cutctx._core.protocols import TokenEstimator as TokenEstimator
from cutctx._core.report import CompactedTranscript as CompactedTranscript
from cutctx._core.report import CompactionReport as CompactionReport
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
from cutctx._loop.compact import compact_messages as compact_messages
from cutctx._loop.window import ContextWindow as ContextWindow
from cutctx._loop.window import WindowStats as WindowStats
from cutctx._policies.bounded import BoundedSummarizingPolicy as BoundedSummarizingPolicy
from cutctx._policies.chain import PolicyChain as PolicyChain
from cutctx._policies.chain import default_chain as default_chain
from cutctx._policies.drop import DropOldestPolicy as DropOldestPolicy
from cutctx._policies.masking import ObservationMaskingPolicy as ObservationMaskingPolicy
from cutctx._policies.summarizing import SummarizingPolicy as SummarizingPolicy

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "EMPTY_METADATA",
    "GROUP_ID_PREFIX",
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
    "CompactionReport",
    "ContextWindow",
    "DropOldestPolicy",
    "ObservationMaskingPolicy",
    "PlanTranscriptMismatch",
    "PolicyChain",
    "Role",
    "SummarizationRequest",
    "SummarizingPolicy",
    "SummaryMissing",
    "TokenEstimator",
    "TokenizerEstimator",
    "Transcript",
    "TranscriptTurn",
    "TurnAction",
    "TurnReplacement",
    "WindowStats",
    "compact_messages",
    "default_chain",
]

# Tracebacks, reprs and docs show the public path (cutctx.CompactionPlan), not the private one.
for _name in __all__:
    _value = globals()[_name]
    if getattr(_value, "__module__", "").startswith("cutctx."):
        _value.__module__ = __name__
del _name, _value
