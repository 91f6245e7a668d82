"""What the command line shows: the plan table and the token statistics (the page: ``page``)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from cutctx._core.metadata import TOOL_NAME_METADATA
from cutctx._core.values import Action, Role
from cutctx.formats._format import presentation_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cutctx._cli.job import Job
    from cutctx._core.values import TranscriptTurn

__all__ = [
    "COLOURS",
    "VERBS",
    "Row",
    "content_tokens",
    "rows",
    "shown_tokens",
    "stats_data",
    "stats_text",
    "summary_line",
    "table",
]

COLOURS: Final = {
    Action.KEEP: "#4c9a5f",
    Action.MASK: "#d9a441",
    Action.SUMMARIZE: "#5b7fc7",
    Action.DROP: "#c75b5b",
    Action.EXCERPT: "#a06cc0",
}
VERBS: Final = {
    Action.KEEP: "keep",
    Action.MASK: "mask",
    Action.SUMMARIZE: "summarize",
    Action.DROP: "drop",
    Action.EXCERPT: "excerpt",
}
_REPLACES: Final = (Action.MASK, Action.EXCERPT)
"""The actions that send a turn with a new body, at the replacement's price."""


@dataclass(frozen=True, slots=True)
class Row:
    """One turn of a plan, as the table and the page show it."""

    index: str
    turn_id: str
    role: str
    tokens: int
    after: int
    action: Action
    reason: str


def rows(job: Job, reasons: Sequence[str]) -> list[Row]:
    """Return one row per turn, in transcript order, with its reason."""
    out: list[Row] = []
    for turn, action, reason in zip(
        job.transcript.turns, job.decided.actions, reasons, strict=True
    ):
        after = turn.token_estimate
        if action.action in _REPLACES and action.replacement is not None:
            after = action.replacement.token_estimate
        elif action.action is not Action.KEEP:
            after = 0
        out.append(
            Row(
                _index(turn),
                turn.turn_id,
                turn.role.value,
                turn.token_estimate,
                after,
                action.action,
                reason,
            )
        )
    return out


def _index(turn: TranscriptTurn) -> str:
    """Return the turn's place in the file (``3.2``: message 3, block 2; ``system``: top level)."""
    turn_id = turn.turn_id
    return turn_id[1:] if turn_id.startswith("m") else turn_id


def table(job: Job, lines: Sequence[Row]) -> str:
    """Return the plan as a text table and its before/after totals."""
    plan = job.decided
    header = ("index", "role", "tokens", "action", "reason")
    cells = [
        (row.index, row.role, shown_tokens(row), VERBS[row.action], row.reason) for row in lines
    ]
    widths = [max([len(header[i]), *(len(cell[i]) for cell in cells)]) for i in range(4)]
    out = []
    for cell in [header, *cells]:
        left = "  ".join(
            value.rjust(widths[i]) if i in (0, 2) else value.ljust(widths[i])
            for i, value in enumerate(cell[:4])
        )
        out.append(f"{left}  {cell[4]}".rstrip())
    if not cells:
        out.append("(none)")
    counts = {action: sum(row.action is action for row in lines) for action in Action}
    kept = len(lines) - counts[Action.DROP] - counts[Action.SUMMARIZE]
    out.append("")
    out.append(f"before: {_many(plan.tokens_before, 'token')} in {_many(len(lines), 'turn')}")
    out.append(
        f"after:  {_many(plan.tokens_after_estimate, 'token')} in {_many(kept, 'turn')} "
        f"({_budget(job, counts)})"
    )
    out.append(
        f"policy: {plan.policy_name}@{plan.policy_version}; tokenizer: {job.settings.tokenizer}"
    )
    return "\n".join(out) + "\n"


def shown_tokens(row: Row) -> str:
    """Return a row's tokens as shown: ``before->after`` for a turn sent with a new body."""
    if row.action in _REPLACES:
        return f"{row.tokens}->{row.after}"
    return str(row.tokens)


def _many(count: int, noun: str) -> str:
    """Return ``count`` and ``noun``, plural unless the count is one: ``1 turn``, ``2 turns``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _budget(job: Job, counts: dict[Action, int]) -> str:
    """Return ``budget N; 3 kept, 1 masked``: the budget and what the plan did (if anything)."""
    done = ", ".join(f"{counts[action]} {_past(action)}" for action in Action if counts[action])
    budget = f"budget {job.settings.max_tokens}"
    if job.budget.max_tokens != job.settings.max_tokens:  # the default estimate's margin
        budget += f", cut to {job.budget.max_tokens} for the estimate's margin"
    return f"{budget}; {done}" if done else budget


def _past(action: Action) -> str:
    return {
        "keep": "kept",
        "mask": "masked",
        "summarize": "summarized",
        "drop": "dropped",
        "excerpt": "excerpted",
    }[action.value]


def summary_line(job: Job, messages_after: int) -> str:
    """Return the one line ``compact`` writes on standard error."""
    plan = job.decided
    counts = {action: sum(a.action is action for a in plan.actions) for action in Action}
    return (
        f"cutctx: {job.conversation.name}: {len(job.conversation.messages)} -> "
        f"{_many(messages_after, 'message')}, {plan.tokens_before} -> "
        f"{_many(plan.tokens_after_estimate, 'token')} ({_budget(job, counts)})"
    )


KINDS: Final = (
    "system prompt",
    "user text",
    "assistant text",
    "tool calls",
    "tool results",
    "reasoning",
)


def stats_data(job: Job) -> dict[str, Any]:
    """Return the figures ``stats`` shows, as plain JSON data (the keys are in docs/cli.md).

    ``by_role`` follows the roles' order, ``by_tool`` the most tokens first (then the name),
    ``by_kind`` the kinds' order; a role, tool or kind with nothing is left out. The figures are
    the conversation's, as the format's ``count_tokens`` counts it, less what an empty request
    counts (a reply's priming, the reserve of the filler that may open an Anthropic request): a
    request-level turn that holds nothing but that reserve is not shown. A reserve a message
    holds (Anthropic's and Bedrock's room for a filler before a thinking turn) is its own.
    """
    content = content_tokens(job)
    turns = [turn for turn in job.transcript.turns if turn.turn_id in content]
    by_role: dict[str, list[int]] = {}
    for turn in turns:
        counts = by_role.setdefault(turn.role.value, [0, 0])
        counts[0] += 1
        counts[1] += content[turn.turn_id]
    tools, kinds = _tools_and_kinds(job, content)
    return {
        "name": job.conversation.name,
        "format": job.conversation.format.name,
        "tokenizer": job.settings.tokenizer,
        "turns": len(turns),
        "tokens": sum(content.values()),
        "by_role": [
            {"role": role.value, "turns": by_role[role.value][0], "tokens": by_role[role.value][1]}
            for role in Role
            if role.value in by_role
        ],
        "by_tool": [
            {"tool": name, "calls": calls, "tokens": tokens}
            for name, (calls, tokens) in sorted(tools.items(), key=lambda row: (-row[1][1], row[0]))
        ],
        "by_kind": [
            {"kind": kind, "turns": kinds[kind][0], "tokens": kinds[kind][1]}
            for kind in KINDS
            if kinds[kind][0]
        ],
    }


def stats_text(job: Job) -> str:
    """Return the tokens of the conversation by role, by tool and by kind of content."""
    data = stats_data(job)
    total = data["tokens"]
    head = (
        f"{data['name']}: {_many(data['turns'], 'turn')}, {_many(total, 'token')} "
        f"({data['format']}, tokenizer {data['tokenizer']})"
    )
    out = [head]
    for section, key, count in (
        ("role", "by_role", "turns"),
        ("tool", "by_tool", "calls"),
        ("kind", "by_kind", "turns"),
    ):
        out.append("")
        out += _section(
            (section, count, "tokens", "share"),
            [(entry[section], entry[count], entry["tokens"]) for entry in data[key]],
            total,
        )
    return "\n".join(out) + "\n"


def _section(
    header: tuple[str, str, str, str], data: Sequence[tuple[str, int, int]], total: int
) -> list[str]:
    cells = [
        header,
        *((name, str(count), str(tokens), _share(tokens, total)) for name, count, tokens in data),
    ]
    if len(cells) == 1:
        cells.append(("(none)", "", "", ""))
    widths = [max(len(cell[i]) for cell in cells) for i in range(4)]
    return [
        "  ".join(
            value.ljust(widths[i]) if i == 0 else value.rjust(widths[i])
            for i, value in enumerate(cell)
        ).rstrip()
        for cell in cells
    ]


def _share(tokens: int, total: int) -> str:
    return f"{100 * tokens / total:.1f} %" if total else "-"


def content_tokens(job: Job) -> dict[str, int]:
    """Return each turn's tokens, by turn id, without the reserve no message holds.

    A turn's tokens are its estimate, as the format's ``count_tokens`` prices it; a request-level
    head turn's leave out the head's reserve (its price with no system text:
    ``Format.head(None)``, Anthropic's room for the filler that may open a request), and a head
    turn left with nothing (no system text) is left out. So the figures add up to the format's
    ``count_tokens`` less what an empty request counts.
    """
    fmt = job.conversation.format
    reserve = sum(turn.token_estimate for turn in fmt.head(None, estimator=job.estimator))
    content: dict[str, int] = {}
    for turn in job.transcript.turns:
        if job.binding.parts[turn.turn_id].index is not None:
            content[turn.turn_id] = turn.token_estimate
        elif turn.token_estimate > reserve or turn.content:
            content[turn.turn_id] = max(0, turn.token_estimate - reserve)
    return content


def _tools_and_kinds(
    job: Job, content: dict[str, int]
) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Attribute tokens to tools (calls and results) and to kinds of content."""
    fmt = job.conversation.format
    messages = job.conversation.messages
    tools: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    kinds: dict[str, list[int]] = {kind: [0, 0] for kind in KINDS}

    def add(kind: str, tokens: int) -> None:
        kinds[kind][0] += 1
        kinds[kind][1] += tokens

    for turn in job.transcript.turns:
        if turn.turn_id not in content:
            continue
        tokens_in = content[turn.turn_id]
        part = job.binding.parts[turn.turn_id]
        message: dict[str, Any] = messages[part.index] if part.index is not None else {}
        if turn.role is Role.SYSTEM:
            add("system prompt", tokens_in)
        elif turn.role is Role.TOOL:
            name = turn.metadata.get(TOOL_NAME_METADATA, "(unknown)")
            tools[name][1] += tokens_in
            add("tool results", tokens_in)
        elif turn.role is Role.USER:
            add("user text", tokens_in)
        else:
            calls, thoughts = presentation_of(fmt).pieces(
                message, estimator=job.estimator, tokens=tokens_in
            )
            for name, tokens in calls:
                tools[name][0] += 1
                tools[name][1] += tokens
            called = sum(tokens for _, tokens in calls)
            rest = tokens_in - called - thoughts
            if called:
                add("tool calls", called)
            if thoughts:
                add("reasoning", thoughts)
            if rest > 0 or not (called or thoughts):
                add("assistant text", rest)
    return tools, kinds
