"""``cutctx proxy`` on the command line: its arguments, its errors, where it listens."""

from __future__ import annotations

import os
import re
import selectors
import signal
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

import httpx
import pytest

from cutctx._cli import main
from cutctx._proxy.cli import startup_line
from tests.proxy.fake_upstream import FakeUpstream
from tests.proxy.serving import serving

if TYPE_CHECKING:
    from pathlib import Path

EXTRAS = ("starlette", "uvicorn", "httpx")


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert captured.out == ""
    return lines[0]


class TestArguments:
    @pytest.mark.parametrize(
        ("arguments", "says"),
        [
            ([], "the following arguments are required: --upstream"),
            (["--upstream", "ftp://example.com"], "--upstream must be an http:// or https://"),
            (["--upstream", "http://x", "--port", "70000"], "--port must be 0 to 65535"),
            (["--upstream", "http://x", "--max-tokens", "0"], "--max-tokens must be more than 0"),
            (["--upstream", "http://x", "--max-tokens", "lots"], "--max-tokens must be a number"),
            (["--upstream", "http://x", "--ttl", "-5"], "--ttl must be more than 0"),
            (["--upstream", "http://x", "--max-body", "0"], "--max-body must be more than 0"),
            (["--upstream", "http://x", "--store", "bogus://db"], "--store: expected memory:"),
            (["--upstream", "http://x", "--colour"], "unrecognized arguments: --colour"),
        ],
    )
    def test_a_bad_argument_is_one_line_and_exit_2(
        self, arguments: list[str], says: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["proxy", *arguments]) == 2
        line = one_error_line(capsys)
        assert line.startswith("cutctx proxy: error: ")
        assert says in line

    def test_help_lists_every_option(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["proxy", "--help"]) == 0
        shown = capsys.readouterr().out
        for option in ("--upstream", "--port", "--host", "--max-tokens", "--store", "--ttl",
                       "--max-body"):  # fmt: skip
            assert option in shown
        assert "127.0.0.1" in shown

    def test_the_command_list_names_the_proxy(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["--help"]) == 0
        assert re.search(r"^\s+proxy\s", capsys.readouterr().out, re.MULTILINE)

    def test_without_the_extra_it_says_what_to_install(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.setitem(sys.modules, "cutctx._proxy.cli", None)
        assert main(["proxy", "--upstream", "http://x"]) == 2
        assert 'pip install ".[proxy]"' in one_error_line(capsys)

    def test_a_port_in_use_is_one_line_and_exit_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = str(taken.getsockname()[1])
            code = main(["proxy", "--upstream", "http://x", "--port", port, "--store", "memory:"])
        assert code == 2
        assert f"cannot listen on 127.0.0.1:{port}" in one_error_line(capsys)

    def test_the_startup_line_says_how_to_point_the_clients_here(self) -> None:
        line = startup_line("127.0.0.1", 8787, "https://api.anthropic.com")
        assert "ANTHROPIC_BASE_URL=http://127.0.0.1:8787 " in line
        assert "OPENAI_BASE_URL=http://127.0.0.1:8787/v1" in line
        assert "https://api.anthropic.com" in line
        assert "http://[::1]:1/v1" in startup_line("::1", 1, "http://x")


def read_line(process: subprocess.Popen[str], timeout: float = 30) -> str:
    assert process.stderr is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stderr, selectors.EVENT_READ)
        if not selector.select(timeout):
            process.kill()
            pytest.fail("cutctx proxy printed nothing")
    return process.stderr.readline()


class TestServing:
    def test_it_listens_on_loopback_by_default_and_forwards(self, tmp_path: Path) -> None:
        fake = FakeUpstream()
        with serving(fake.app, lifespan="off") as upstream:
            process = subprocess.Popen(  # noqa: S603 - our own command
                [sys.executable, "-m", "cutctx", "proxy", "--upstream", upstream,
                 "--port", "0", "--store", f"sqlite:///{tmp_path / 'w.sqlite3'}"],
                stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
            try:
                line = read_line(process)
                found = re.search(r"listening on http://([\d.]+):(\d+)", line)
                assert found is not None, line
                host, port = found.group(1), int(found.group(2))
                with httpx.Client(base_url=f"http://{host}:{port}") as client:
                    assert client.get("/healthz").status_code == 200
                    answer = client.get("/v1/models")
                logged = read_line(process)
            finally:
                process.send_signal(signal.SIGINT)
                code = process.wait(30)
                assert process.stderr is not None
                process.stderr.close()
        assert host == "127.0.0.1"
        assert answer.status_code == 200
        assert answer.content == fake.answers[-1]
        assert "GET /v1/models" in logged
        assert "status=200" in logged
        assert code == 0


class TestImports:
    @pytest.mark.parametrize(
        "code",
        [
            "import cutctx, cutctx.formats, cutctx.integrations",
            (
                "from cutctx._cli import main; main(['plan', 'examples/agent-session.json', "
                "'--max-tokens', '2000'])"
            ),
            "from cutctx._cli import main; main(['--help'])",
        ],
    )
    def test_the_library_and_its_other_commands_import_no_server(self, code: str) -> None:
        probe = f"{code}\nimport sys\nprint(sorted(set({EXTRAS!r}) & set(sys.modules)))"
        done = subprocess.run(  # noqa: S603 - our own interpreter
            [sys.executable, "-c", probe], capture_output=True, text=True, check=False,
            cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),  # noqa: PTH120
        )  # fmt: skip
        assert done.stdout.splitlines()[-1] == "[]", (done.stdout, done.stderr)
