"""``cutctx proxy``: its arguments, its start-up line, and the server it runs.

``cutctx proxy --upstream URL [--port 8787] [--host 127.0.0.1] [--max-tokens N] [--store STORE]
[--ttl SECONDS] [--max-body BYTES]``. Bad arguments are one line on standard error and exit 2,
as the command's other errors; the server runs until it is stopped (Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from typing import TYPE_CHECKING, Final, NoReturn

from cutctx import ValidationError
from cutctx._proxy.app import DEFAULT_MAX_BODY, DEFAULT_TTL, create_app
from cutctx._proxy.store import StoreUnavailable, open_store
from cutctx._proxy.upstream import check_upstream

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["DEFAULT_PORT", "main", "startup_line"]

DEFAULT_PORT: Final = 8787
BAD_INPUT: Final = 2


class _Refused(Exception):
    """A bad argument, said in one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Refused(f"{message} (see {self.prog} --help)")


def _positive(kind: type[int] | type[float], what: str) -> Callable[[str], int | float]:
    def read(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{what} must be more than 0, got {text}")
        return value

    return read


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"--port must be 0 to 65535, got {text!r}")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cutctx proxy",
        description="Serve an HTTP proxy in front of a model provider that keeps each "
        "conversation's requests within a budget (Anthropic Messages, OpenAI Chat and "
        "Responses); every other request is forwarded as it came.",
    )
    parser.add_argument(
        "--upstream", required=True, metavar="URL",
        help="the provider to forward to, e.g. https://api.anthropic.com or https://api.openai.com",
    )  # fmt: skip
    parser.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0 picks one"
    )
    parser.add_argument(
        "--host", default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1: this machine only)",
    )  # fmt: skip
    parser.add_argument(
        "--max-tokens", type=_positive(int, "--max-tokens"), metavar="N",
        help="the most input a request may carry, system prompt and tools included "
        "(default: the model's context size less the reply's max_tokens)",
    )  # fmt: skip
    parser.add_argument(
        "--store", metavar="STORE",
        help="where the windows are kept: sqlite:///PATH (default: a file in the user's cache "
        "directory), postgresql://... (the cutctx[postgres] extra) or memory:",
    )  # fmt: skip
    parser.add_argument(
        "--ttl", type=_positive(float, "--ttl"), default=DEFAULT_TTL, metavar="SECONDS",
        help=f"forget a conversation idle this long (default {int(DEFAULT_TTL)}: 7 days)",
    )  # fmt: skip
    parser.add_argument(
        "--max-body", type=_positive(int, "--max-body"), default=DEFAULT_MAX_BODY,
        metavar="BYTES", help=f"answer 413 to a larger request body (default {DEFAULT_MAX_BODY})",
    )  # fmt: skip
    return parser


def startup_line(host: str, port: int, upstream: str) -> str:
    """Return the line the proxy prints when it listens: where, to where, and how to use it."""
    shown = f"[{host}]" if ":" in host else host
    base = f"http://{shown}:{port}"
    return (
        f"cutctx proxy: listening on {base}, forwarding to {upstream}. "
        f"Claude Code: ANTHROPIC_BASE_URL={base} claude; "
        f"OpenAI SDKs and Codex: OPENAI_BASE_URL={base}/v1"
    )


def _fail(message: str) -> int:
    print(f"cutctx proxy: error: {message}", file=sys.stderr)  # noqa: T201 - the command's output
    return BAD_INPUT


def main(argv: Sequence[str]) -> int:
    """Run ``cutctx proxy`` with ``argv`` (the arguments after ``proxy``); return the exit code."""
    try:
        arguments = _parser().parse_args(list(argv))
        upstream = check_upstream(arguments.upstream)
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else 0
    except (_Refused, ValueError) as error:
        return _fail(str(error))
    try:
        store = open_store(arguments.store)
    except (StoreUnavailable, ValidationError) as error:
        return _fail(str(error))
    try:
        return _serve(arguments, upstream, store)
    finally:
        store.close()


def _serve(arguments: argparse.Namespace, upstream: str, store: object) -> int:
    import uvicorn  # noqa: PLC0415 - the server is imported when it runs

    family = socket.AF_INET6 if ":" in arguments.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((arguments.host, arguments.port))
        listener.listen(2048)  # connections wait from now on: the start-up line is true
    except OSError as error:
        listener.close()
        return _fail(f"cannot listen on {arguments.host}:{arguments.port}: {error.strerror}")
    app = create_app(
        upstream, store=store,  # type: ignore[arg-type]
        max_tokens=arguments.max_tokens, max_body=arguments.max_body, ttl=arguments.ttl,
    )  # fmt: skip
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log = logging.getLogger("cutctx.proxy")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    port = listener.getsockname()[1]
    print(startup_line(arguments.host, port, upstream), file=sys.stderr, flush=True)  # noqa: T201
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", ws="none",
        server_header=False, date_header=False,
    )  # fmt: skip
    try:
        uvicorn.Server(config).run(sockets=[listener])
    except KeyboardInterrupt:  # Ctrl-C: the server stopped cleanly, as asked
        pass
    finally:
        listener.close()
    return 0
