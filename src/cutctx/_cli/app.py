"""The ``cutctx`` command: ``plan``, ``compact``, ``verify`` and ``stats`` on conversation files.

Exit codes: 0 done; 1 ``verify`` found a difference; 2 bad input (one line
``cutctx: error: ...`` on standard error); 3 the budget cannot be met. No traceback reaches the
user: every failure the library reports is a typed error, turned into one line here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final, NoReturn

from baseaicore import SuiteError, ValidationError

from cutctx._audit.explain import explain
from cutctx._audit.records import CompactionRecord
from cutctx._audit.verify import verify
from cutctx._cli.inputs import FORMATS, CliError, expand, read, read_text
from cutctx._cli.job import POLICIES, Job, Settings, rebuilt_policy, system_digest
from cutctx._cli.page import html_page
from cutctx._cli.views import rows, stats_data, stats_text, summary_line, table
from cutctx._core.digest import utf8
from cutctx._core.errors import BudgetUnsatisfiable
from cutctx._version import __version__
from cutctx.formats import resolve

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["main"]

OK: Final = 0
DIFFERS: Final = 1
BAD_INPUT: Final = 2
UNMET: Final = 3


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other error of the command."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see {self.prog} --help)")


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """Return the parser and each command's own parser, by name."""
    parser = _Parser(
        prog="cutctx",
        description="Plan, compact, verify and measure LLM conversations (JSON or JSONL files).",
        epilog="Exit codes: 0 done, 1 verify found a difference, 2 bad input, "
        "3 the budget cannot be met.",
    )
    parser.add_argument("--version", action="version", version=f"cutctx {__version__}")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    reading = _Parser(add_help=False)  # how the file is read and priced: every command but verify
    reading.add_argument(
        "--format",
        type=_format_name,
        metavar="FORMAT",
        help=f"the messages' format: {', '.join(FORMATS)} or one an installed package "
        "registers (detected when omitted)",
    )
    reading.add_argument(
        "--tokenizer",
        default="text",
        metavar="NAME",
        help="text (the default: TextEstimator, counts like cl100k_base from the text's "
        "structure), chars (4 characters a token) or a tiktoken encoding, such as cl100k_base, "
        "with the cutctx[tiktoken] extra",
    )
    planning = _Parser(add_help=False)  # how the plan is made: plan and compact
    planning.add_argument(
        "--max-tokens",
        type=int,
        required=True,
        metavar="N",
        help="the budget the conversation must fit",
    )
    planning.add_argument(
        "--protected-recent-turns",
        type=int,
        default=4,
        metavar="N",
        help="the last N turns are untouchable (default 4)",
    )
    planning.add_argument(
        "--keep-first",
        type=int,
        default=1,
        metavar="N",
        help="keep the first N non-system messages, the task (default 1; 0 keeps none)",
    )
    planning.add_argument(
        "--policy",
        choices=POLICIES,
        default="default",
        help="default (mask, then drop; by priority where messages have one), mask, drop, priority",
    )
    planning.add_argument(
        "--max-result-tokens",
        type=int,
        metavar="N",
        help="send each tool result over N tokens as an excerpt, its first and last lines "
        "(off by default)",
    )
    files = _Parser(add_help=False)
    files.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="a JSON or JSONL file, a folder of them, or - for standard input",
    )

    plan = commands.add_parser(
        "plan",
        parents=[files, planning, reading],
        help="show what compaction would do, turn by turn",
    )
    plan.add_argument("--json", action="store_true", help="print the audit record instead")
    plan.add_argument("--html", metavar="OUT", help="also write a self-contained page to OUT")
    plan.set_defaults(run=_plan)

    compact = commands.add_parser(
        "compact",
        parents=[files, planning, reading],
        help="write the compacted conversation, in the file's own shape",
    )
    compact.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="write to OUT, never the input (a folder when several files are given)",
    )
    compact.set_defaults(run=_compact)

    verify = commands.add_parser("verify", help="re-derive a recorded plan and compare it")
    verify.add_argument("files", nargs=1, metavar="FILE", help="the conversation (or -)")
    verify.add_argument("record", metavar="RECORD", help="the record `cutctx plan --json` wrote")
    verify.set_defaults(run=_verify)

    stats = commands.add_parser(
        "stats", parents=[files, reading], help="tokens by role, by tool and by kind of content"
    )
    stats.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    stats.set_defaults(run=_stats)
    commands.add_parser(  # listed here; its own parser reads its arguments (_proxy)
        "proxy",
        add_help=False,
        help="serve an HTTP proxy that keeps an agent's requests within a budget "
        "(the cutctx[proxy] extra; cutctx proxy --help)",
    )
    return parser, {"plan": plan, "compact": compact, "verify": verify, "stats": stats}


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; an argument a command does not take is that command's error."""
    parser, commands = _parser()
    arguments, unknown = parser.parse_known_args(argv)
    if unknown:  # the command is known here: its own help lists what it takes
        commands[arguments.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return arguments


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (``sys.argv[1:]`` when ``None``); return the exit code."""
    try:
        code = _main(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader left (``cutctx plan ... | head``): say nothing more, as other tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return OK
    return code


def _main(argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["proxy"]:
        return _proxy(words[1:])
    try:
        arguments = _arguments(argv)
        names = expand(arguments.files)
        arguments.several = len(names) > 1
        arguments.tables = 0
        if arguments.several and arguments.run is _compact and not arguments.output:
            raise CliError("several inputs need -o FOLDER, where each output is written")
    except SystemExit as done:  # --help and --version print what they show and stop here
        return done.code if isinstance(done.code, int) else OK
    except CliError as error:
        return _fail(str(error), error.code)
    run: Callable[[argparse.Namespace, str], int] = arguments.run
    worst = OK
    for number, name in enumerate(names, start=1):
        if len(names) > 1 and sys.stderr.isatty():
            _note(f"cutctx: [{number}/{len(names)}] {name}")
        try:
            code = run(arguments, name)
        except CliError as error:
            code = _fail(str(error), error.code)
        except BudgetUnsatisfiable as error:
            code = _fail(f"{name}: the budget cannot be met: {error}", UNMET)
        except SuiteError as error:
            code = _fail(f"{name}: {error}", BAD_INPUT)
        except RecursionError:  # JSON nested deeper than Python can follow: bad input, not a bug
            code = _fail(f"{name}: the JSON is nested too deeply to read", BAD_INPUT)
        except Exception as error:  # noqa: BLE001 - a bug still ends in one line, not a traceback
            code = _fail(f"{name}: internal error, please report it: {error!r:.200}", BAD_INPUT)
        worst = max(worst, code)
    return worst


def _proxy(argv: list[str]) -> int:
    """Run ``cutctx proxy``: its server and client are imported only now, from the extra."""
    try:
        from cutctx._proxy.cli import main as proxy  # noqa: PLC0415 - the extra, when it runs
    except ImportError as error:
        return _fail(
            f"cutctx proxy needs the proxy extra ({error.name} is missing): from a checkout, "
            'pip install ".[proxy]"',
            BAD_INPUT,
        )
    return proxy(argv)


def _settings(arguments: argparse.Namespace) -> Settings:
    """Return the settings the options give (``stats`` plans nothing: it has the defaults)."""
    if not hasattr(arguments, "max_tokens"):
        return Settings(tokenizer=arguments.tokenizer)
    if arguments.keep_first < 0:
        raise CliError(f"--keep-first must be 0 or more, got {arguments.keep_first}")
    cap = arguments.max_result_tokens
    if cap is not None and cap < 1:
        raise CliError(f"--max-result-tokens must be 1 or more, got {cap}")
    return Settings(
        max_tokens=arguments.max_tokens,
        protected_recent_turns=arguments.protected_recent_turns,
        keep_first=arguments.keep_first,
        policy=arguments.policy,
        tokenizer=arguments.tokenizer,
        max_result_tokens=cap,
    )


def _job(arguments: argparse.Namespace, name: str, *, plan: bool = True) -> Job:
    settings = _settings(arguments)
    conversation = read(name, arguments.format)
    job = Job.prepare(conversation, settings, plan=False)
    if not plan:
        return job
    try:
        return job.planned()
    except BudgetUnsatisfiable as error:
        hint = job.excerpt_hint()
        said = f"{name}: the budget cannot be met: {error}"
        if hint is not None:
            said += f"; a large tool result can be sent as an excerpt with {hint}"
        raise CliError(said, UNMET) from None


def _plan(arguments: argparse.Namespace, name: str) -> int:
    page = None
    if arguments.html:
        page = _target(arguments.html, name, ".html", several=arguments.several)
        _refuse_overwriting(name, page, "--html")
    job = _job(arguments, name)
    lines = rows(job, _reasons(job))
    if page is not None:
        _write(page, html_page(job, lines))
    if arguments.json:
        _out(_json_line(job.record().to_dict()))
    elif arguments.several:  # each table under its file's name, as head(1) shows several files
        gap = "\n" if arguments.tables else ""
        arguments.tables += 1
        _out(f"{gap}==> {name} <==\n{table(job, lines)}")
    else:
        _out(table(job, lines))
    return _outcome(job)


def _compact(arguments: argparse.Namespace, name: str) -> int:
    target = None
    if arguments.output:
        target = _target(arguments.output, name, None, several=arguments.several)
        _refuse_overwriting(name, target, "-o")
    job = _job(arguments, name)
    code = _outcome(job)
    if code != OK:
        return code
    messages, _ = job.apply()
    text = job.conversation.reshaped(messages)
    if target is not None:
        _write(target, text)
    else:
        _out(text)
    _note(summary_line(job, len(messages)))
    return OK


def _verify(arguments: argparse.Namespace, name: str) -> int:
    record = _record(arguments.record)
    settings = Settings(
        max_tokens=record.budget.max_tokens,
        protected_recent_turns=record.budget.protected_recent_turns,
        keep_first=record.keep_first or 0,
        tokenizer=record.tokenizer or "chars",
        max_result_tokens=record.budget.max_result_tokens,
    )
    job = Job.prepare(read(name, record.format), settings, plan=False)
    outcome = verify(record, job.transcript, rebuilt_policy(record, job.estimator))
    differences = list(outcome.differences)
    if record.system_digest != system_digest(job.conversation.system):
        differences.insert(0, "the system text is not the one the record was made for")
    if not differences:
        _out(f"verified {record.plan_hash}\n")
        return OK
    _out(f"not verified: {'; '.join(differences)}\n")
    return DIFFERS


def _record(path: str) -> CompactionRecord:
    """Read the record file ``path`` (the output of ``cutctx plan --json``)."""
    text = read_text(path)
    not_one = f"{path}: not a record (cutctx plan --json writes one)"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise CliError(f"{not_one}: invalid JSON: {error}") from None
    except RecursionError:
        raise CliError(f"{not_one}: the JSON is nested too deeply to read") from None
    if not isinstance(data, dict):
        raise CliError(f"{not_one}: it is a JSON {_JSON_TYPES.get(type(data), 'value')}")
    if "schema_version" not in data:  # a conversation, a request body: not a version problem
        raise CliError(f"{not_one}: it has no schema_version")
    try:
        return CompactionRecord.from_dict(data)
    except SuiteError as error:
        raise CliError(f"{not_one}: {error}") from None


_JSON_TYPES: Final = {list: "array", str: "string", int: "number", float: "number"}


def _stats(arguments: argparse.Namespace, name: str) -> int:
    job = _job(arguments, name, plan=False)
    _out(_json_line(stats_data(job)) if arguments.json else stats_text(job))
    return OK


def _json_line(data: object) -> str:
    """Return ``data`` as one line of compact JSON."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"


def _reasons(job: Job) -> tuple[str, ...]:
    return explain(job.decided, job.transcript, job.budget)


def _outcome(job: Job) -> int:
    """Report a plan that could not meet its budget (exit 3), naming both numbers."""
    plan = job.decided
    if plan.budget_unmet:
        return _fail(
            f"{job.conversation.name}: the budget cannot be met: the plan still needs "
            f"{plan.tokens_after_estimate} tokens, over the budget of {job.budget.max_tokens} "
            f"(policy {plan.policy_name} ran out of moves)",
            UNMET,
        )
    return OK


def _target(out: str, name: str, suffix: str | None, *, several: bool) -> Path:
    """Return where output for input ``name`` goes: ``out``, or inside the folder ``out``.

    With several inputs ``out`` is a folder (made if missing), and each output is named after
    its input.
    """
    path = Path(out)
    if several and not path.is_dir():
        try:
            path.mkdir(parents=True)
        except OSError as error:
            raise CliError(f"{out}: cannot make the folder: {error.strerror or error}") from None
    if path.is_dir():
        stem = Path("stdin" if name == "-" else name)
        return path / (stem.stem + suffix if suffix else stem.name)
    return path


def _refuse_overwriting(name: str, target: Path, option: str) -> None:
    """Refuse an output that is the input itself (by name, link or hard link): it would be lost."""
    if name == "-" or not target.exists():
        return
    try:
        same = target.samefile(name)
    except OSError:  # the input cannot be looked at: reading it reports why
        return
    if same:
        raise CliError(f"{name}: {option} {target} is the input itself; write it elsewhere")


def _write(path: Path, text: str) -> None:
    try:
        path.write_bytes(utf8(text))
    except OSError as error:
        raise CliError(f"{path}: cannot write: {error.strerror or error}") from None


def _out(text: str) -> None:
    """Write ``text`` on standard output, a lone surrogate in it as its JSON escape (``utf8``)."""
    sys.stdout.write(utf8(text).decode("utf-8"))


def _note(line: str) -> None:
    """Write a line on standard error, after whatever standard output holds so far."""
    sys.stdout.flush()
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _fail(message: str, code: int) -> int:
    _note(f"cutctx: error: {message}")
    return code


def _format_name(name: str) -> str:
    """Accept a format's name: a built-in one or one an installed package registers."""
    if name in FORMATS:  # a framework's is resolved later, with its extra's message if missing
        return name
    try:
        resolve(name)
    except ValidationError as error:
        raise argparse.ArgumentTypeError(error.message.removeprefix("format: ")) from None
    return name
