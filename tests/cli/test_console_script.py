"""The installed ``cutctx`` console script, run as a subprocess on real files in a temporary folder.

Each command, each exit code, standard input, a folder of files, JSONL, a request body's shape,
the HTML page, verify's two outcomes and ``python -m cutctx``. Expected figures come from the
library's public API. (Coverage does not follow subprocesses: tests/unit/test_cli.py runs the
same paths in process.)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cutctx import CharRatioEstimator, __version__, compact_messages
from cutctx.formats import openai_chat
from tests.cli_cases import anthropic_body, chat_messages, write_json, write_jsonl

ROOT = Path(__file__).resolve().parents[2]


def console_script() -> str:
    """The ``cutctx`` script installed beside the running interpreter (or on ``PATH``)."""
    beside = Path(sys.executable).parent / "cutctx"
    found = str(beside) if beside.exists() else shutil.which("cutctx")
    assert found, "the cutctx console script is not installed (run scripts/bootstrap)"
    return found


def cutctx(
    *argv: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own console script, arguments from the test
        [console_script(), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        timeout=120,
    )


class TestConsoleScript:
    def test_plan_prints_a_table_and_exits_0(self, tmp_path: Path) -> None:
        messages = chat_messages()
        path = write_json(tmp_path / "chat.json", messages)
        done = cutctx("plan", str(path), "--max-tokens", "700")
        plan = compact_messages(messages, max_tokens=700, format="openai_chat", keep_first=1).plan
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout.splitlines()[0].split() == [
            "index",
            "role",
            "tokens",
            "action",
            "reason",
        ]
        assert f"after:  {plan.tokens_after_estimate} tokens" in done.stdout

    def test_compact_keeps_a_request_bodys_shape_and_summarises_on_stderr(
        self, tmp_path: Path
    ) -> None:
        body = anthropic_body()
        path = write_json(tmp_path / "body.json", body)
        done = cutctx("compact", str(path), "--max-tokens", "700")
        result = json.loads(done.stdout)
        expected = compact_messages(
            body["messages"],
            max_tokens=700,
            format="anthropic",
            keep_first=1,
            system=body["system"],
        )
        assert done.returncode == 0
        assert {k: v for k, v in result.items() if k != "messages"} == {
            k: v for k, v in body.items() if k != "messages"
        }
        assert result["messages"] == expected.messages
        assert done.stderr.count("\n") == 1
        assert done.stderr.startswith(f"cutctx: {path}: ")

    def test_compact_reads_standard_input_and_jsonl(self) -> None:
        messages = chat_messages()
        lines = "".join(json.dumps(m) + "\n" for m in messages)
        done = cutctx("compact", "-", "--max-tokens", "700", stdin=lines)
        expected = compact_messages(
            messages, max_tokens=700, format="openai_chat", keep_first=1
        ).messages
        assert done.returncode == 0
        assert [json.loads(line) for line in done.stdout.splitlines()] == expected

    def test_a_folder_of_files_is_compacted_file_by_file(self, tmp_path: Path) -> None:
        folder = tmp_path / "sessions"
        folder.mkdir()
        write_json(folder / "a.json", chat_messages())
        write_jsonl(folder / "b.jsonl", chat_messages(2))
        out = tmp_path / "out"
        done = cutctx("compact", str(folder), "--max-tokens", "700", "-o", str(out))
        assert done.returncode == 0
        assert done.stderr.count("\n") == 2  # one summary line each; no progress off a terminal
        assert json.loads((out / "a.json").read_text("utf-8")) == (
            compact_messages(
                chat_messages(), max_tokens=700, format="openai_chat", keep_first=1
            ).messages
        )
        assert len((out / "b.jsonl").read_text("utf-8").splitlines()) == len(
            compact_messages(
                chat_messages(2), max_tokens=700, format="openai_chat", keep_first=1
            ).messages
        )

    def test_the_html_page_is_self_contained(self, tmp_path: Path) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        page = tmp_path / "plan.html"
        done = cutctx("plan", str(path), "--max-tokens", "700", "--html", str(page))
        text = page.read_text("utf-8")
        assert done.returncode == 0
        assert "<script" not in text
        assert "http://" not in text
        assert "https://" not in text
        assert text.count('class="turn ') == len(
            openai_chat.to_transcript(chat_messages())[0].turns
        )

    def test_stats_adds_up_to_the_formats_count(self, tmp_path: Path) -> None:
        messages = chat_messages()
        path = write_json(tmp_path / "chat.json", messages)
        done = cutctx("stats", str(path), "--tokenizer", "chars")  # the format's own count
        assert done.returncode == 0
        counted = openai_chat.count_tokens(messages, estimator=CharRatioEstimator())
        assert f"10 turns, {counted} tokens" in done.stdout

    def test_verify_exits_0_for_its_own_record_and_1_for_a_changed_file(
        self, tmp_path: Path
    ) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        record = tmp_path / "record.json"
        made = cutctx("plan", str(path), "--max-tokens", "700", "--json")
        record.write_text(made.stdout, encoding="utf-8")
        same = cutctx("verify", str(path), str(record))
        changed = chat_messages()
        changed[-1]["content"] = "Fix it, please."
        write_json(path, changed)
        differs = cutctx("verify", str(path), str(record))
        assert (made.returncode, same.returncode, differs.returncode) == (0, 0, 1)
        assert same.stdout == f"verified {json.loads(made.stdout)['plan_hash']}\n"
        assert differs.stdout.startswith("not verified: ")
        assert differs.stdout.count("\n") == 1

    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (["plan", "missing.json", "--max-tokens", "10"], "missing.json: no such file"),
            (["plan", "bad.json", "--max-tokens", "10"], "invalid JSON"),
            (["plan", "chat.json", "--max-tokens", "-5"], "max_tokens"),
            (
                ["stats", "chat.json", "--tokenizer", "no_such_encoding"],
                "unknown tokenizer 'no_such_encoding'",
            ),
            (["plan", "chat.json"], "--max-tokens"),
        ],
    )
    def test_bad_input_exits_2_with_one_line_and_no_traceback(
        self, argv: list[str], message: str, tmp_path: Path
    ) -> None:
        write_json(tmp_path / "chat.json", chat_messages())
        (tmp_path / "bad.json").write_text("[{", encoding="utf-8")
        done = cutctx(*argv, cwd=tmp_path)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr.startswith("cutctx: error: ")
        assert done.stderr.count("\n") == 1
        assert message in done.stderr
        assert "Traceback" not in done.stderr

    def test_a_budget_that_cannot_be_met_exits_3(self, tmp_path: Path) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        done = cutctx("compact", str(path), "--max-tokens", "50")
        assert (done.returncode, done.stdout) == (3, "")
        assert "over the budget of 50" in done.stderr

    def test_python_dash_m_cutctx_is_the_same_command(self, tmp_path: Path) -> None:
        path = write_json(tmp_path / "chat.json", chat_messages())
        module = subprocess.run(  # noqa: S603 - the running interpreter, arguments from the test
            [sys.executable, "-m", "cutctx", "stats", str(path)],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert module.returncode == 0
        assert module.stdout == cutctx("stats", str(path)).stdout

    def test_version_prints_the_packages_version(self) -> None:
        done = cutctx("--version")
        assert (done.returncode, done.stdout, done.stderr) == (0, f"cutctx {__version__}\n", "")

    def test_the_shipped_session_masks_and_drops_at_a_sensible_budget(self) -> None:
        done = cutctx("plan", str(ROOT / "examples" / "agent-session.json"), "--max-tokens", "2000")
        actions = {line.split()[3] for line in done.stdout.splitlines()[1:] if line[:1] == " "}
        assert done.returncode == 0
        assert {"keep", "mask", "drop"} <= actions

    def test_a_lone_surrogate_escape_is_written_back_through_a_real_pipe(
        self, tmp_path: Path
    ) -> None:
        messages = chat_messages()
        messages[1]["content"] = "Why \ud800 did it fail?"
        path = write_json(tmp_path / "chat.json", messages)
        done = cutctx("compact", str(path), "--max-tokens", "700")
        assert (done.returncode, done.stderr.count("\n")) == (0, 1), done.stderr
        assert '"Why \\ud800 did it fail?"' in done.stdout
        assert json.loads(done.stdout)[1]["content"] == "Why \ud800 did it fail?"

    def test_json_nested_too_deeply_is_bad_input(self, tmp_path: Path) -> None:
        path = tmp_path / "deep.json"
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
        done = cutctx("compact", str(path), "--max-tokens", "700")
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == f"cutctx: error: {path}: the JSON is nested too deeply to read\n"
