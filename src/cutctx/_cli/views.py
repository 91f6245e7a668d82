"""What the command line shows: the plan table, the HTML strip and the token statistics."""

from __future__ import annotations

import html
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from cutctx._core.values import Action, Role
from cutctx.formats._common import Pricer, as_json

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cutctx._cli.job import Job
    from cutctx._core.values import TranscriptTurn

__all__ = ["Row", "html_page", "rows", "stats_text", "table"]

_COLOURS: Final = {
    Action.KEEP: "#4c9a5f",
    Action.MASK: "#d9a441",
    Action.SUMMARIZE: "#5b7fc7",
    Action.DROP: "#c75b5b",
    Action.EXCERPT: "#a06cc0",
}
_VERBS: Final = {
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
    cells = [(row.index, row.role, _tokens(row), _VERBS[row.action], row.reason) for row in lines]
    widths = [max(len(header[i]), *(len(cell[i]) for cell in cells)) for i in range(4)]
    out = []
    for cell in [header, *cells]:
        left = "  ".join(
            value.rjust(widths[i]) if i in (0, 2) else value.ljust(widths[i])
            for i, value in enumerate(cell[:4])
        )
        out.append(f"{left}  {cell[4]}".rstrip())
    counts = {action: sum(row.action is action for row in lines) for action in Action}
    kept = len(lines) - counts[Action.DROP] - counts[Action.SUMMARIZE]
    out.append("")
    out.append(f"before: {plan.tokens_before} tokens in {len(lines)} turns")
    out.append(
        f"after:  {plan.tokens_after_estimate} tokens in {kept} turns "
        f"(budget {job.budget.max_tokens}; {_counts(counts)})"
    )
    out.append(
        f"policy: {plan.policy_name}@{plan.policy_version}; tokenizer: {job.settings.tokenizer}"
    )
    return "\n".join(out) + "\n"


def _tokens(row: Row) -> str:
    if row.action in _REPLACES:
        return f"{row.tokens}->{row.after}"
    return str(row.tokens)


def _counts(counts: dict[Action, int]) -> str:
    return ", ".join(f"{counts[action]} {_past(action)}" for action in Action if counts[action])


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
        f"cutctx: {job.conversation.name}: {len(job.conversation.messages)} -> {messages_after} "
        f"messages, {plan.tokens_before} -> {plan.tokens_after_estimate} tokens "
        f"(budget {job.budget.max_tokens}; {_counts(counts)})"
    )


def html_page(job: Job, lines: Sequence[Row]) -> str:
    """Return a self-contained page: the conversation as a strip of blocks sized by tokens."""
    plan = job.decided
    title = f"cutctx plan: {job.conversation.name}"
    blocks = []
    for row in lines:
        label = f"{row.turn_id} · {row.role} · {_tokens(row)} tokens · {_VERBS[row.action]}"
        blocks.append(
            f'<div class="turn {row.action.value}" style="flex-grow:{max(row.tokens, 1)}" '
            f'title="{html.escape(label + " — " + row.reason)}">'
            f"<b>{html.escape(row.turn_id)}</b><span>{html.escape(row.role)}</span>"
            f"<span>{row.tokens}</span></div>"
        )
    table_rows = "".join(
        f'<tr class="{row.action.value}"><td>{html.escape(row.index)}</td>'
        f"<td>{html.escape(row.turn_id)}</td><td>{html.escape(row.role)}</td>"
        f"<td>{_tokens(row)}</td><td>{_VERBS[row.action]}</td><td>{html.escape(row.reason)}</td></tr>"
        for row in lines
    )
    # The excerpt key and colour appear only on a page that has an excerpt: every other page
    # stays as it was before excerpts existed.
    shown = [
        action
        for action in Action
        if action is not Action.EXCERPT or any(row.action is action for row in lines)
    ]
    legend = "".join(
        f'<span class="key {action.value}">{_VERBS[action]}</span>' for action in shown
    )
    colours = "".join(f".{action.value}{{background:{_COLOURS[action]}}}" for action in shown)
    if Action.EXCERPT in shown:
        colours += "tr.excerpt{color:#fff}"
    facts = " &middot; ".join(
        html.escape(fact)
        for fact in (
            f"{plan.tokens_before} tokens before",
            f"{plan.tokens_after_estimate} after",
            f"budget {job.budget.max_tokens}",
            f"policy {plan.policy_name}@{plan.policy_version}",
            f"tokenizer {job.settings.tokenizer}",
            f"format {job.conversation.format}",
            f"plan sha256 {plan.plan_hash()}",
        )
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body{{font:14px system-ui,sans-serif;margin:2em;color:#222}}
.strip{{display:flex;gap:2px;height:110px;margin:1em 0}}
.turn{{min-width:6px;overflow:hidden;color:#fff;padding:3px;font-size:11px;display:flex;
flex-direction:column;border-radius:3px}}
.turn span{{opacity:.85}}
.key{{color:#fff;padding:2px 8px;margin-right:6px;border-radius:3px}}
table{{border-collapse:collapse}}td,th{{padding:2px 8px;text-align:left}}
tr.keep{{background:#fff}}tr td:nth-child(4){{text-align:right}}
tr.mask,tr.summarize,tr.drop{{color:#fff}}
{colours}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{facts}</p>
<p>{legend}</p>
<div class="strip">{"".join(blocks)}</div>
<table><thead><tr><th>index</th><th>id</th><th>role</th><th>tokens</th><th>action</th><th>reason</th></tr></thead>
<tbody>{table_rows}</tbody></table>
</body></html>
"""


KINDS: Final = (
    "system prompt",
    "user text",
    "assistant text",
    "tool calls",
    "tool results",
    "reasoning",
)


def stats_text(job: Job) -> str:
    """Return the tokens of the conversation by role, by tool and by kind of content."""
    turns = job.transcript.turns
    total = job.transcript.token_estimate()
    by_role: dict[str, tuple[int, int]] = {}
    for turn in turns:
        count, tokens = by_role.get(turn.role.value, (0, 0))
        by_role[turn.role.value] = (count + 1, tokens + turn.token_estimate)
    tools, kinds = _tools_and_kinds(job)
    head = (
        f"{job.conversation.name}: {len(turns)} turns, {total} tokens "
        f"({job.conversation.format}, tokenizer {job.settings.tokenizer})"
    )
    out = [head, ""]
    out += _section(
        ("role", "turns", "tokens", "share"),
        [(role.value, *by_role[role.value]) for role in Role if role.value in by_role],
        total,
    )
    out.append("")
    out += _section(
        ("tool", "calls", "tokens", "share"),
        sorted(
            ((name, calls, tokens) for name, (calls, tokens) in tools.items()),
            key=lambda row: (-row[2], row[0]),
        ),
        total,
    )
    out.append("")
    out += _section(
        ("kind", "turns", "tokens", "share"),
        [(kind, kinds[kind][0], kinds[kind][1]) for kind in KINDS if kinds[kind][0]],
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


def _tools_and_kinds(job: Job) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Attribute tokens to tools (calls and results) and to kinds of content."""
    fmt = job.conversation.format
    messages = job.conversation.messages
    pricer = Pricer.of(fmt, job.estimator)
    names = _tool_names(fmt, messages)
    tools: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    kinds: dict[str, list[int]] = {kind: [0, 0] for kind in KINDS}

    def add(kind: str, tokens: int) -> None:
        kinds[kind][0] += 1
        kinds[kind][1] += tokens

    for turn in job.transcript.turns:
        part = job.binding.parts[turn.turn_id]
        message: dict[str, Any] = messages[part.index] if part.index >= 0 else {}
        if turn.role is Role.SYSTEM:
            add("system prompt", turn.token_estimate)
        elif turn.role is Role.TOOL:
            name = names.get(_result_id(fmt, message, part.block), "(unknown)")
            tools[name][1] += turn.token_estimate
            add("tool results", turn.token_estimate)
        elif turn.role is Role.USER:
            add("user text", turn.token_estimate)
        else:
            calls, thoughts = _assistant_pieces(fmt, message, pricer, turn.token_estimate)
            for name, tokens in calls:
                tools[name][0] += 1
                tools[name][1] += tokens
            called = sum(tokens for _, tokens in calls)
            rest = turn.token_estimate - called - thoughts
            if called:
                add("tool calls", called)
            if thoughts:
                add("reasoning", thoughts)
            if rest > 0 or not (called or thoughts):
                add("assistant text", rest)
    return tools, kinds


def _tool_names(fmt: str, messages: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Map every call id to the name of the tool it called."""
    names: dict[str, str] = {}
    for message in messages:
        if fmt == "openai_chat":
            for call in message.get("tool_calls") or ():
                body = call.get(call.get("type", "function")) or {}
                names[call["id"]] = body.get("name", "(unknown)")
        elif fmt == "openai_responses":
            if message.get("type") in ("function_call", "custom_tool_call"):
                names[message["call_id"]] = message["name"]
        elif isinstance(message.get("content"), list):
            for block in message["content"]:
                if block.get("type") == "tool_use":
                    names[block["id"]] = block["name"]
    return names


def _result_id(fmt: str, message: dict[str, Any], block: int | None) -> str:
    if fmt == "openai_chat":
        return str(message.get("tool_call_id"))
    if fmt == "openai_responses":
        return str(message.get("call_id"))
    assert block is not None  # noqa: S101 - Anthropic tool results are split by block
    return str(message["content"][block].get("tool_use_id"))


def _assistant_pieces(
    fmt: str, message: dict[str, Any], pricer: Pricer, tokens: int
) -> tuple[list[tuple[str, int]], int]:
    """Return an assistant turn's tool calls (name, tokens) and its reasoning tokens.

    Each piece is priced as its format prices it, so the rest of the turn is its text.
    """
    calls: list[tuple[str, int]] = []
    thoughts = 0
    if fmt == "openai_chat":
        for call in message.get("tool_calls") or ():
            kind = call.get("type", "function")
            body = call[kind]
            argument = body["arguments"] if kind == "function" else body["input"]
            calls.append(
                (body["name"], pricer.framing + pricer.text(body["name"]) + pricer.text(argument))
            )
    elif fmt == "openai_responses":
        kind = message.get("type")
        if kind in ("function_call", "custom_tool_call"):
            argument = message["arguments"] if kind == "function_call" else message["input"]
            calls.append((message["name"], pricer.text(message["name"]) + pricer.text(argument)))
        elif kind == "reasoning":
            thoughts = tokens  # the whole item is reasoning
    elif isinstance(message.get("content"), list):
        for block in message["content"]:
            kind = block.get("type")
            if kind == "tool_use":
                name = block["name"]
                calls.append(
                    (
                        name,
                        pricer.framing
                        + pricer.text(name)
                        + pricer.text(as_json(block.get("input"))),
                    )
                )
            elif kind == "thinking":
                thoughts += pricer.text(block["thinking"])
            elif kind == "redacted_thinking":
                thoughts += pricer.text(block["data"])
    return calls, thoughts
