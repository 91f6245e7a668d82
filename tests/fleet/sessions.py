"""A long agent session in Chat Completions messages, and the window every worker serves it with.

``session(steps)`` is a coding agent's conversation, the same on every call (a seeded generator,
standard library only, so a worker process imports it cheaply): a system message and the task,
then steps that append an assistant message calling one to three tools and their results (some
far over the result cap), now and then an answer and a new user message, or nothing (a retried
call). The messages are written in the order the provider documents their keys (``role`` first,
``{"type": "text", "text": ...}``), which ``jsonb`` does not keep. Every text starts with a
unique tag (``[7]``).

``new_window()`` and ``restore(state)`` are the one configuration the in-process window and the
workers share; ``summarize`` is deterministic, so every process writes the same summaries.
"""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING, Any, Final

from cutctx import ContextWindow

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cutctx import SummarizationRequest, TranscriptTurn

STEPS: Final = 200
MAX_TOKENS: Final = 12_000
SEED: Final = 26

_WORDS: Final = (
    *("build", "test", "error", "warning", "module", "import", "cache", "lint", "passed"),
    *("failed", "line", "file", "path", "été", "naïve", "中文", "{json:", "[1,", "2]}"),
    *('"quoted"', "back\\slash", "tab\tnewline\n"),
)
_TOOLS: Final = ("read_file", "run_tests", "grep", "edit_file")

Message = dict[str, Any]


class _Texts:
    """Tagged texts of a chosen size, from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.tag = 0

    def text(self, low: int, high: int) -> str:
        self.tag += 1
        size = self.random.randint(low, high)
        words = self.random.choices(_WORDS, k=size // 6 + 1)  # about 6 characters a word
        return f"[{self.tag}] " + " ".join(words).strip() + "."

    def content(self, low: int, high: int) -> str | list[Message]:
        """A text, or (one time in three) the same as a list of one text part."""
        text = self.text(low, high)
        return [{"type": "text", "text": text}] if self.random.randrange(3) == 0 else text


def session(steps: int = STEPS, seed: int = SEED) -> list[list[Message]]:
    """The messages each of ``steps`` steps appends (step 0: the system prompt and the task)."""
    texts = _Texts(seed)
    rng = texts.random
    out: list[list[Message]] = [
        [
            {"role": "system", "content": texts.text(100, 400)},
            {"role": "user", "content": texts.content(50, 300)},
        ]
    ]
    call = 0
    while len(out) < steps:
        event = rng.choices(("tools", "answer", "same"), weights=(8, 1, 1))[0]
        if event == "same":
            out.append([])
            continue
        if event == "answer":
            out.append(
                [
                    {"role": "assistant", "content": texts.text(20, 400)},
                    {"role": "user", "content": texts.content(10, 200)},
                ]
            )
            continue
        ids = [f"call_{call + k}" for k in range(rng.randint(1, 3))]
        call += len(ids)
        calls = [
            {
                "id": i,
                "type": "function",
                "function": {
                    "name": rng.choice(_TOOLS),
                    "arguments": json.dumps({"path": f"src/{i}.py", "line": rng.randint(1, 500)}),
                },
            }
            for i in ids
        ]
        step: list[Message] = [
            {"role": "assistant", "content": texts.text(0, 120), "tool_calls": calls}
        ]
        for i in ids:
            size = rng.choice((80, 300, 900, 2_000, 6_000, 16_000))
            step.append(
                {"role": "tool", "tool_call_id": i, "content": texts.content(size // 2, size)}
            )
        out.append(step)
    return out


def summarize(request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
    """A deterministic summary of ``turns``: the tags of the texts it stands for."""
    tags = [turn.content.split(" ", 1)[0] for turn in turns if turn.content.startswith("[")]
    return f"Summary of {len(turns)} turns ({request.target_tokens} tokens): " + " ".join(tags[:40])


def new_window() -> ContextWindow:
    """The window a conversation starts with."""
    return ContextWindow("openai_chat", max_tokens=MAX_TOKENS, keep_first=1, summarize=summarize)


def restore(state: dict[str, Any]) -> ContextWindow:
    """The window ``state`` continues (the callables given again)."""
    return ContextWindow.from_state(state, summarize=summarize)
