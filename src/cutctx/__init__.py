"""cutctx: deterministic, auditable compaction of LLM transcripts.

Plan → fulfil → apply: a policy's ``decide(transcript, budget)`` returns a ``CompactionPlan``
(nothing spent, nothing changed); the caller produces any summaries the plan requests; and
``CompactionExecutor().apply(transcript, plan, summaries)`` returns the compacted view and its
report. cutctx never calls a model. Everything public is exported here; the rest is private.
"""

from cutctx._chain import PolicyChain as PolicyChain
from cutctx._chain import default_chain as default_chain
from cutctx._compact import CompactedMessages as CompactedMessages
from cutctx._compact import compact_messages as compact_messages
from cutctx._drop import DropOldestPolicy as DropOldestPolicy
from cutctx._errors import BudgetUnsatisfiable as BudgetUnsatisfiable
from cutctx._errors import CompactionError as CompactionError
from cutctx._errors import PlanTranscriptMismatch as PlanTranscriptMismatch
from cutctx._errors import SummaryMissing as SummaryMissing
from cutctx._estimators import CharRatioEstimator as CharRatioEstimator
from cutctx._estimators import TokenizerEstimator as TokenizerEstimator
from cutctx._executor import CompactionExecutor as CompactionExecutor
from cutctx._masking import ObservationMaskingPolicy as ObservationMaskingPolicy
from cutctx._plan import CompactionPlan as CompactionPlan
from cutctx._report import CompactedTranscript as CompactedTranscript
from cutctx._report import CompactionReport as CompactionReport
from cutctx._summarizing import SummarizingPolicy as SummarizingPolicy
from cutctx._typing import CompactionPolicy as CompactionPolicy
from cutctx._typing import TokenEstimator as TokenEstimator
from cutctx._values import DEFAULT_PLACEHOLDER as DEFAULT_PLACEHOLDER
from cutctx._values import EMPTY_METADATA as EMPTY_METADATA
from cutctx._values import GROUP_ID_PREFIX as GROUP_ID_PREFIX
from cutctx._values import SUMMARY_TURN_ID_PREFIX as SUMMARY_TURN_ID_PREFIX
from cutctx._values import Action as Action
from cutctx._values import CompactionBudget as CompactionBudget
from cutctx._values import Role as Role
from cutctx._values import SummarizationRequest as SummarizationRequest
from cutctx._values import Transcript as Transcript
from cutctx._values import TranscriptTurn as TranscriptTurn
from cutctx._values import TurnAction as TurnAction
from cutctx._values import TurnReplacement as TurnReplacement

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "EMPTY_METADATA",
    "GROUP_ID_PREFIX",
    "SUMMARY_TURN_ID_PREFIX",
    "Action",
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
    "compact_messages",
    "default_chain",
]

# Tracebacks, reprs and docs show the public path (cutctx.CompactionPlan), not the private one.
for _name in __all__:
    _value = globals()[_name]
    if getattr(_value, "__module__", "").startswith("cutctx."):
        _value.__module__ = __name__
del _name, _value
