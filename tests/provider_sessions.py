"""A deterministic agent session in Gemini and Bedrock Converse form, and what a loop measures.

One seeded session: the task first, then per step a model turn calling one tool (one in ten
two or three in parallel) with its results of 60 to 3 000 words, or a reply and a new user
message; calls carry thought signatures (Gemini) or reasoning (Converse), one result in
twenty is an error, one in twenty-five holds a small image. ``run_window`` feeds it step by step
to a ``ContextWindow`` and returns what the acceptance bar reads: invalid and over-budget
requests, requests without the task, the prefix-hit rate, and whether a window restored from
the state mid-run sends the same requests.
"""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cutctx import ContextWindow
from tests.format_validators import png

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx import TokenEstimator
    from cutctx.formats import Format

TOOLS = ("read_file", "run_tests", "grep", "list_dir", "shell", "git_diff")
WORDS = (
    *("build", "cache", "key", "module", "import", "failed", "passed", "test", "step", "link"),
    *("error", "warning", "config", "value", "path", "request", "response", "token", "batch"),
)
TASK = "Task: the nightly build fails; find why and fix it."
SIGNATURE = base64.b64encode(bytes(range(48))).decode()
TINY_PNG = png(1, 1)


@dataclass(frozen=True, slots=True)
class Step:
    """What one step adds: a model note and its calls (tool, id, result, error) or a reply."""

    text: str
    calls: tuple[tuple[str, str, str, bool, bool], ...] = ()
    user: str = ""


def session(steps: int, seed: int = 2026) -> list[Step]:
    """Return the ``steps`` - 1 steps after the task (see the module docstring)."""
    rng = random.Random(seed)

    def text(low: int, high: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(low, high + 1)))

    made: list[Step] = []
    number = 0
    for _ in range(steps - 1):
        if rng.random() < 0.08:
            made.append(Step(text(20, 200), user=text(10, 100)))
            continue
        calls = []
        for _ in range(rng.randrange(2, 4) if rng.random() < 0.1 else 1):
            size = rng.choices(((60, 300), (300, 1_000), (1_000, 3_000)), (45, 30, 25))[0]
            calls.append(
                (
                    rng.choice(TOOLS),
                    f"call_{number}",
                    text(*size),
                    rng.random() < 0.05,
                    rng.random() < 0.04,
                )
            )
            number += 1
        made.append(Step(text(10, 80), tuple(calls)))
    return made


def gemini_steps(steps: list[Step]) -> list[list[dict[str, Any]]]:
    """The session as Gemini contents: what each step appends (the task at step 0)."""
    out: list[list[dict[str, Any]]] = [[{"role": "user", "parts": [{"text": TASK}]}]]
    for step in steps:
        if not step.calls:
            out.append(
                [
                    {"role": "model", "parts": [{"text": step.text}]},
                    {"role": "user", "parts": [{"text": step.user}]},
                ]
            )
            continue
        parts: list[dict[str, Any]] = [{"text": step.text, "thought": True}]
        answers: list[dict[str, Any]] = []
        for position, (tool, call_id, result, error, image) in enumerate(step.calls):
            call: dict[str, Any] = {
                "function_call": {
                    "name": tool,
                    "args": {"path": f"src/{call_id}.py"},
                    "id": call_id,
                }
            }
            if position == 0:
                call["thought_signature"] = SIGNATURE
            parts.append(call)
            response: dict[str, Any] = {
                "name": tool,
                "id": call_id,
                "response": {"error": result} if error else {"output": result},
            }
            if image:
                response["parts"] = [{"inline_data": {"mime_type": "image/png", "data": TINY_PNG}}]
            answers.append({"function_response": response})
        out.append([{"role": "model", "parts": parts}, {"role": "user", "parts": answers}])
    return out


def bedrock_steps(steps: list[Step]) -> list[list[dict[str, Any]]]:
    """The session as Converse messages: what each step appends (the task at step 0)."""
    out: list[list[dict[str, Any]]] = [[{"role": "user", "content": [{"text": TASK}]}]]
    for step in steps:
        if not step.calls:
            out.append(
                [
                    {"role": "assistant", "content": [{"text": step.text}]},
                    {"role": "user", "content": [{"text": step.user}]},
                ]
            )
            continue
        blocks: list[dict[str, Any]] = [
            {"reasoningContent": {"reasoningText": {"text": step.text, "signature": SIGNATURE}}}
        ]
        results: list[dict[str, Any]] = []
        for tool, call_id, result, error, image in step.calls:
            blocks.append(
                {"toolUse": {"toolUseId": call_id, "name": tool, "input": {"path": call_id}}}
            )
            content: list[dict[str, Any]] = [{"text": result}]
            if image:
                content.append({"image": {"format": "png", "source": {"bytes": TINY_PNG}}})
            block: dict[str, Any] = {"toolUseId": call_id, "content": content}
            if error:
                block["status"] = "error"
            results.append({"toolResult": block})
        out.append([{"role": "assistant", "content": blocks}, {"role": "user", "content": results}])
    return out


@dataclass(slots=True)
class LoopFigures:
    """What ``run_window`` measured."""

    requests: int = 0
    invalid: int = 0
    over: int = 0
    missing_task: int = 0
    stable_tokens: int = 0
    request_tokens: int = 0
    compactions: int = 0
    restored_same: bool = True

    @property
    def prefix_hit(self) -> float:
        """Tokens of leading contents equal to the previous request's, over all tokens."""
        return self.stable_tokens / self.request_tokens if self.request_tokens else 1.0


def run_window(
    fmt: Format[Any],
    appended: list[list[dict[str, Any]]],
    *,
    max_tokens: int,
    estimator: TokenEstimator,
    problems: Callable[[list[Any], list[Any]], list[str]],
    count: Callable[[list[Any]], int],
    restore_at: int | None = None,
    compact_to: float = 0.5,
) -> LoopFigures:
    """Feed ``appended`` step by step to a window; with ``restore_at``, from that step on also
    to a window restored from the JSON text of ``state()``, whose requests must be the same."""
    window = ContextWindow(
        fmt,
        max_tokens=max_tokens,
        compact_to=compact_to,
        keep_first=1,
        estimator=estimator,
        cache_breakpoints=True,
    )
    twin: ContextWindow | None = None
    figures = LoopFigures()
    history: list[dict[str, Any]] = []
    previous: list[str] = []
    prices: dict[str, int] = {}
    for step, added in enumerate(appended):
        history.extend(added)
        if step == restore_at:
            twin = ContextWindow.from_state(
                json.loads(json.dumps(window.state())), estimator=estimator
            )
        request = window.prepare(history)
        if twin is not None and twin.prepare(history) != request:
            figures.restored_same = False
        figures.requests += 1
        figures.invalid += bool(problems(request, history))
        figures.over += count(request) > max_tokens
        figures.missing_task += not _leads(request, history[0])
        keys = [json.dumps(_unmarked(message), sort_keys=True, default=repr) for message in request]
        for key, message in zip(keys, request, strict=True):
            if key not in prices:
                prices[key] = count([message])
        same = 0
        for new, old in zip(keys, previous, strict=False):
            if new != old:
                break
            same += 1
        figures.stable_tokens += sum(prices[key] for key in keys[:same])
        figures.request_tokens += sum(prices[key] for key in keys)
        previous = keys
    figures.compactions = window.stats.compactions
    return figures


def _unmarked(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` without the ``cachePoint`` blocks a window places (they move with the prefix)."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    return {**message, "content": [block for block in content if "cachePoint" not in block]}


def _leads(request: list[Any], task: dict[str, Any]) -> bool:
    """Whether ``request`` opens with the task: whole, or leading a merged message."""
    if not request:
        return False
    if request[0] is task:
        return True
    key = "parts" if "parts" in task else "content"
    first = _unmarked(request[0]).get(key, [])
    return bool(first[: len(task[key])] == task[key])
