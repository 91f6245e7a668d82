"""The page ``plan --html`` writes: the conversation as a strip of blocks sized by tokens.

The strip is the page's width and never wider. Each turn's width is its share of the
conversation's tokens (a percentage of the strip), so widths compare as token counts do: a
125 000-token turn is 125 times as wide as a 1 000-token one. A turn under ``BAND_SHARE`` of the
tokens would be a sliver, so each run of such turns folds into one band: as wide as its turns
together, labelled with their ids, count and tokens, each turn a stripe in it, still sized by
its tokens. A band is at least ``BAND_MIN_PX`` wide, so the smallest still shows; there are at
most about ``2 / BAND_SHARE`` blocks and bands, so those minimums fit any screen, and the strip
clips rather than overflows. The page has no script and fetches nothing.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Final

from cutctx._cli.views import COLOURS, VERBS, shown_tokens
from cutctx._core.values import Action

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cutctx._cli.job import Job
    from cutctx._cli.views import Row

__all__ = ["BAND_MIN_PX", "BAND_SHARE", "html_page", "strip"]

BAND_SHARE: Final = 0.01
"""A turn under this share of the conversation's tokens is shown in a band with its neighbours."""

BAND_MIN_PX: Final = 3
"""The narrowest a band is drawn, in CSS pixels."""

_STYLE: Final = """
body{font:14px system-ui,sans-serif;margin:2em;color:#222}
.strip{display:flex;width:100%;height:110px;margin:1em 0;overflow:hidden;border-radius:3px}
.turn,.band{flex-grow:0;flex-shrink:1;min-width:0;overflow:hidden;box-sizing:border-box;
box-shadow:inset -1px 0 #fff}
.turn{color:#fff;padding:3px 0;font-size:11px;display:flex;flex-direction:column}
.turn b,.turn span,.band i{padding:0 3px;white-space:nowrap;overflow:hidden;
text-overflow:ellipsis}
.turn span{opacity:.85}
.band{min-width:%dpx;display:flex;flex-direction:column;background:#eee;
box-shadow:inset -2px 0 #fff}
.band i{font:11px system-ui,sans-serif;color:#333;padding:3px;flex:none}
.stripes{display:flex;flex:1}.stripes .turn{flex-shrink:0;padding:0;box-shadow:none}
.key{color:#fff;padding:2px 8px;margin-right:6px;border-radius:3px}
table{border-collapse:collapse}td,th{padding:2px 8px;text-align:left}
tr.keep{background:#fff}tr td:nth-child(4){text-align:right}
tr.mask,tr.summarize,tr.drop{color:#fff}
""".replace("%dpx", f"{BAND_MIN_PX}px")


def strip(lines: Sequence[Row]) -> list[tuple[float, list[int]]]:
    """Return the strip's pieces: each one's share of the tokens and the rows it shows.

    A piece of one row at or over ``BAND_SHARE`` is a block; every other piece is a band, a run
    of rows each under it. A conversation of no tokens gives every turn an equal share.
    """
    weights = [row.tokens for row in lines]
    total = sum(weights)
    if total == 0:
        weights, total = [1] * len(lines), max(1, len(lines))
    pieces: list[tuple[float, list[int]]] = []
    band: list[int] = []
    for index, weight in enumerate(weights):
        if weight / total < BAND_SHARE:
            band.append(index)
            continue
        if band:
            pieces.append((sum(weights[i] for i in band) / total, band))
            band = []
        pieces.append((weight / total, [index]))
    if band:
        pieces.append((sum(weights[i] for i in band) / total, band))
    return pieces


def html_page(job: Job, lines: Sequence[Row]) -> str:
    """Return a self-contained page: the strip of the conversation's turns and the plan's table."""
    plan = job.decided
    title = f"cutctx plan: {job.conversation.name}"
    total = sum(row.tokens for row in lines)
    blocks = []
    for share, members in strip(lines):
        if len(members) == 1 and share >= BAND_SHARE:
            blocks.append(_turn(lines[members[0]], share))
            continue
        rows = [lines[i] for i in members]
        tokens = sum(row.tokens for row in rows)
        within = [
            (row.tokens / tokens) if tokens else 1 / len(rows)
            for row in rows  # a band of no tokens (total 0 or all zero): equal stripes
        ]
        ids = rows[0].turn_id if len(rows) == 1 else f"{rows[0].turn_id} to {rows[-1].turn_id}"
        label = f"{ids} · {len(rows)} turn{'s' * (len(rows) != 1)} · {tokens} tokens"
        counts = ", ".join(
            f"{sum(row.action is action for row in rows)} {VERBS[action]}"
            for action in Action
            if any(row.action is action for row in rows)
        )
        stripes = "".join(
            _turn(row, part, inner=True) for row, part in zip(rows, within, strict=True)
        )
        blocks.append(
            f'<div class="band" style="flex-basis:{_percent(share)}" '
            f'title="{html.escape(label + " — " + counts)}"><i>{html.escape(label)}</i>'
            f'<div class="stripes">{stripes}</div></div>'
        )
    table_rows = "".join(
        f'<tr class="{row.action.value}"><td>{html.escape(row.index)}</td>'
        f"<td>{html.escape(row.turn_id)}</td><td>{html.escape(row.role)}</td>"
        f"<td>{shown_tokens(row)}</td><td>{VERBS[row.action]}</td>"
        f"<td>{html.escape(row.reason)}</td></tr>"
        for row in lines
    )
    # The excerpt key and colour appear only on a page that has an excerpt: every other page
    # stays as it was before excerpts existed.
    shown = [
        action
        for action in Action
        if action is not Action.EXCERPT or any(row.action is action for row in lines)
    ]
    legend = "".join(f'<span class="key {action.value}">{VERBS[action]}</span>' for action in shown)
    colours = "".join(f".{action.value}{{background:{COLOURS[action]}}}" for action in shown)
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
            f"format {job.conversation.format.name}",
            f"plan sha256 {plan.plan_hash()}",
        )
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{_STYLE}{colours}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{facts}</p>
<p>{legend} &middot; {len(lines)} turns, {total} tokens; a turn's width is its share of them</p>
<div class="strip">{"".join(blocks)}</div>
<table><thead><tr><th>index</th><th>id</th><th>role</th><th>tokens</th><th>action</th><th>reason</th></tr></thead>
<tbody>{table_rows}</tbody></table>
</body></html>
"""


def _turn(row: Row, share: float, *, inner: bool = False) -> str:
    """Return one turn's block (or, ``inner``, its stripe in a band) at ``share`` of its parent."""
    label = f"{row.turn_id} · {row.role} · {shown_tokens(row)} tokens · {VERBS[row.action]}"
    body = (
        ""
        if inner
        else (
            f"<b>{html.escape(row.turn_id)}</b><span>{html.escape(row.role)}</span>"
            f"<span>{row.tokens}</span>"
        )
    )
    return (
        f'<div class="turn {row.action.value}" data-tokens="{row.tokens}" '
        f'style="flex-basis:{_percent(share)}" '
        f'title="{html.escape(label + " — " + row.reason)}">{body}</div>'
    )


def _percent(share: float) -> str:
    """Return ``share`` as a CSS percentage, precise to a thousandth of a percent."""
    return f"{100 * share:.3f}%"
