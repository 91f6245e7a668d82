"""The public surface: what ``cutctx`` exports, in what order, under what module and shape."""

from __future__ import annotations

import ast
import inspect
import re
import tomllib
from pathlib import Path
from typing import Any

import baseaicore
import pytest
from baseaicore import SuiteError
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import cutctx
from cutctx import (
    BudgetUnsatisfiable,
    CompactionBudget,
    CompactionError,
    CompactionExecutor,
    CompactionPlan,
    CompactionReport,
    DropOldestPolicy,
    PlanTranscriptMismatch,
    Role,
    SummarizationRequest,
    SummaryMissing,
    Transcript,
    TranscriptTurn,
    TurnAction,
)
from cutctx.formats import openai_chat
from tests.contract import PLAN_FIELDS, REPORT_FIELDS

# The contract's public API (docs/contract.md), in the order the contract first listed them.
DOCUMENTED = {
    # values
    "Role",
    "TranscriptTurn",
    "EMPTY_METADATA",
    "Transcript",
    "CompactionBudget",
    "Action",
    "TurnReplacement",
    "TurnAction",
    "SummarizationRequest",
    "CompactionPlan",
    "CompactedTranscript",
    "CompactionReport",
    "SUMMARY_TURN_ID_PREFIX",
    "GROUP_ID_PREFIX",
    "DEFAULT_PLACEHOLDER",
    # protocols and the default estimator
    "TokenEstimator",
    "CompactionPolicy",
    "CharRatioEstimator",
    # policies
    "ObservationMaskingPolicy",
    "SummarizingPolicy",
    "DropOldestPolicy",
    "PolicyChain",
    "default_chain",
    # executor
    "CompactionExecutor",
    # errors
    "CompactionError",
    "BudgetUnsatisfiable",
    "SummaryMissing",
    "PlanTranscriptMismatch",
    # the release, as in 0.1
    "__version__",
}
# Additions beyond that first list, decided and documented elsewhere: the tokenizer wrapper,
# the re-exported ValidationError and the audit layer (records, verify, explain) are always
# exported; the provider-format helper and its result type join with the formats edge.
ADDED_ALWAYS = {
    "TextEstimator",
    "TokenizerEstimator",
    "ValidationError",
    "CompactionRecord",
    "Verification",
    "explain",
    "verify",
}
# Re-exports of another distribution's very class: their __module__ stays that distribution's.
REEXPORTED = {"ValidationError": baseaicore.ValidationError}
# The agent loop: the window, its stats value and the summarizing policy of bounded input.
ADDED_LOOP = {"ContextWindow", "WindowStats", "BoundedSummarizingPolicy"}
# The priority policy (docs/policies.md), for the shedding order context-clipper's users know,
# and the two message keys of context-clipper's that users write (docs/contract.md).
ADDED_PRIORITY = {"PriorityPolicy", "PRIORITY_KEY", "STICKY_KEY"}
# The excerpting policy (docs/policies.md): tool results over the budget's max_result_tokens.
ADDED_EXCERPTS = {"ExcerptingPolicy", "recall"}
# The messages entry points' async twin and their default policy, named (docs/policies.md).
ADDED_MESSAGES = {"acompact_messages", "default_messages_policy"}
ADDED_OPTIONALLY = {"compact_messages", "CompactedMessages"}


def ruf022_key(name: str) -> tuple[int, str]:
    """Ruff's RUF022 isort-style order: CONSTANTS, then Classes, then everything else."""
    if name.isupper():
        return 0, name
    if name[0].isupper():
        return 1, name
    return 2, name


class TestExports:
    def test_all_is_the_documented_list(self) -> None:
        exported = set(cutctx.__all__)
        assert len(exported) == len(cutctx.__all__), "a name is exported twice"
        assert (
            exported - ADDED_OPTIONALLY
            == DOCUMENTED
            | ADDED_ALWAYS
            | ADDED_LOOP
            | ADDED_PRIORITY
            | ADDED_EXCERPTS
            | ADDED_MESSAGES
        )
        optional = exported & ADDED_OPTIONALLY
        assert optional in (set(), ADDED_OPTIONALLY), "the helper and its result come together"

    def test_all_is_sorted_the_way_ruff_sorts_it(self) -> None:
        assert cutctx.__all__ == sorted(cutctx.__all__, key=ruf022_key)

    def test_every_exported_name_exists(self) -> None:
        for name in cutctx.__all__:
            assert hasattr(cutctx, name), name

    def test_every_exported_class_and_function_reports_the_public_module(self) -> None:
        checked = 0
        for name in cutctx.__all__:
            value = getattr(cutctx, name)
            if name in REEXPORTED:
                continue
            if inspect.isclass(value) or inspect.isfunction(value):
                assert value.__module__ == "cutctx", name
                checked += 1
        assert checked >= len(DOCUMENTED) - 4  # all but the four constants

    def test_validation_error_is_the_very_baseaicore_class(self) -> None:
        for name, original in REEXPORTED.items():
            assert getattr(cutctx, name) is original
        assert baseaicore.ValidationError.__module__.startswith("baseaicore")
        with pytest.raises(cutctx.ValidationError):
            CompactionBudget(-1)
        with pytest.raises(baseaicore.ValidationError):
            openai_chat.to_transcript("not a list")  # type: ignore[type-var]

    def test_every_exported_error_is_in_the_one_documented_tree(self) -> None:
        tree = (Path(__file__).resolve().parents[2] / "docs" / "errors.md").read_text("utf-8")
        errors = [
            name
            for name in cutctx.__all__
            if inspect.isclass(getattr(cutctx, name))
            and issubclass(getattr(cutctx, name), BaseException)
        ]
        assert len(errors) == 5
        for name in errors:
            code = getattr(cutctx, name).code
            assert re.search(rf"cutctx\.{name} +{code}", tree), name

    def test_nothing_private_leaks_into_all(self) -> None:
        """``__version__`` is public (a dunder); no other name with a leading underscore is."""
        assert [name for name in cutctx.__all__ if name.startswith("_")] == ["__version__"]

    def test_the_version_is_a_release_string(self) -> None:
        assert re.fullmatch(r"\d+\.\d+\.\d+", cutctx.__version__)

    def test_the_version_stays_within_the_applications_pin(self) -> None:
        """Both applications pin ``cutctx>=0.1,<0.2``: a version outside it cannot be installed
        beside them, and above 0.1.0 it must be, or pip would prefer the published 0.1.0."""
        version = Version(cutctx.__version__)
        assert version in SpecifierSet(">=0.1,<0.2")
        assert version > Version("0.1.0")

    def test_the_version_is_written_once_and_the_build_reads_it(self) -> None:
        """pyproject.toml names no version of its own: hatch reads ``cutctx/_version.py``."""
        root = Path(__file__).resolve().parents[2]
        project = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))
        source = root / project["tool"]["hatch"]["version"]["path"]
        (assignment,) = [
            node
            for node in ast.parse(source.read_text("utf-8")).body
            if isinstance(node, ast.Assign)
        ]
        assert "version" not in project["project"]
        assert project["project"]["dynamic"] == ["version"]
        assert source == root / "src" / "cutctx" / "_version.py"
        assert ast.literal_eval(assignment.value) == cutctx.__version__ == "0.1.1"
        written = [
            path.relative_to(root).as_posix()
            for path in (root / "src").rglob("*.py")
            if "__version__ =" in path.read_text("utf-8")
        ]
        assert written == ["src/cutctx/_version.py"]


def positional(kind: Any) -> list[str]:
    return [
        parameter.name
        for parameter in inspect.signature(kind).parameters.values()
        if parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    ]


class TestFieldOrder:
    @pytest.mark.parametrize(
        ("kind", "expected"),
        [
            (
                TranscriptTurn,
                [
                    "turn_id",
                    "role",
                    "content",
                    "token_estimate",
                    "tool_call_id",
                    "pinned",
                    "metadata",
                ],
            ),
            (CompactionBudget, ["max_tokens", "protected_recent_turns"]),
            (SummarizationRequest, ["group_id", "turn_ids", "target_tokens", "prompt_id"]),
            (TurnAction, ["turn_id", "action", "summary_group", "replacement"]),
        ],
        ids=lambda value: getattr(value, "__name__", ""),
    )
    def test_positional_fields_follow_the_documented_order(
        self, kind: Any, expected: list[str]
    ) -> None:
        assert positional(kind)[: len(expected)] == expected

    @pytest.mark.parametrize(
        ("kind", "expected"),
        [
            (CompactionPlan, [*PLAN_FIELDS, "transcript", "budget", "estimator_name"]),
            (CompactionReport, [*REPORT_FIELDS, "estimator_name", "excerpted_turn_ids"]),
        ],
        ids=lambda value: getattr(value, "__name__", ""),
    )
    def test_the_plan_and_the_report_take_every_field_by_keyword_only(
        self, kind: Any, expected: list[str]
    ) -> None:
        """As in 0.1, which never accepted their fields positionally."""
        parameters = inspect.signature(kind).parameters
        assert list(parameters) == expected
        assert {p.kind for p in parameters.values()} == {inspect.Parameter.KEYWORD_ONLY}

    def test_the_budget_takes_its_result_cap_by_keyword_only_and_off_by_default(self) -> None:
        parameter = inspect.signature(CompactionBudget).parameters["max_result_tokens"]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
        assert parameter.default is None

    def test_the_plan_defaults_what_0_1_defaulted_and_requires_transcript_and_budget(
        self,
    ) -> None:
        parameters = inspect.signature(CompactionPlan).parameters
        defaults = {
            name: p.default
            for name, p in parameters.items()
            if p.default is not inspect.Parameter.empty
        }
        assert defaults == {
            "summarization_requests": (),
            "estimator_ratio": None,
            "budget_unmet": False,
            "estimator_name": None,
        }


class TestErrorCodes:
    @pytest.mark.parametrize(
        ("kind", "code"),
        [
            (CompactionError, "COMPACTION_ERROR"),
            (BudgetUnsatisfiable, "COMPACTION_BUDGET_UNSATISFIABLE"),
            (SummaryMissing, "COMPACTION_SUMMARY_MISSING"),
            (PlanTranscriptMismatch, "COMPACTION_PLAN_MISMATCH"),
        ],
    )
    def test_each_error_has_its_stable_code_and_is_a_suite_error(
        self, kind: type[CompactionError], code: str
    ) -> None:
        assert kind.code == code
        assert issubclass(kind, SuiteError)
        assert issubclass(kind, CompactionError)


class TestSpecHeadlineExample:
    """The contract's headline: the first thing a user runs must work exactly as written."""

    def test_runs_exactly_as_written(self) -> None:
        transcript = Transcript(
            (
                TranscriptTurn("s", Role.SYSTEM, "You are a careful assistant.", 12),
                TranscriptTurn("u1", Role.USER, "What changed in the build?", 30),
                TranscriptTurn("a1", Role.ASSISTANT, "Let me look.", 20, tool_call_id="c1"),
                TranscriptTurn("t1", Role.TOOL, "<4 kB of build log>", 900, tool_call_id="c1"),
                TranscriptTurn("a2", Role.ASSISTANT, "The cache key changed.", 25),
            )
        )
        snapshot = [
            (t.turn_id, t.role, t.content, t.token_estimate, t.tool_call_id, t.pinned)
            for t in transcript.turns
        ]
        originals = transcript.turns
        plan = DropOldestPolicy().decide(
            transcript, CompactionBudget(max_tokens=100, protected_recent_turns=1)
        )
        # 12 + 30 + 20 + 900 + 25 = 987; kept s 12 + a2 25 = 37.
        assert (plan.tokens_before, plan.tokens_after_estimate, plan.budget_unmet) == (
            987,
            37,
            False,
        )
        view = CompactionExecutor().apply(transcript, plan)
        assert view.transcript.turn_ids() == ("s", "a2")
        assert view.report.dropped_turn_ids == ("u1", "a1", "t1")
        assert transcript.turn_ids() == ("s", "u1", "a1", "t1", "a2")

        assert transcript.turns is originals
        assert snapshot == [
            (t.turn_id, t.role, t.content, t.token_estimate, t.tool_call_id, t.pinned)
            for t in transcript.turns
        ]
        assert all(not t.metadata for t in transcript.turns)
        assert view.transcript.turns[0] is originals[0]
        assert view.transcript.turns[1] is originals[4]
