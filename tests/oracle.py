"""Independent oracles: each policy's rule restated as a small, obviously-correct loop.

Nothing here imports cutctx's private modules or reuses its algorithms: every rule is written
again from docs/contract.md (the promises and the 0.1 compatibility) and the decisions in
docs/policies.md, as plainly as possible, and returns the plan it expects in the shape of
``CompactionPlan.to_dict()``. ``None`` means "no plan may exist" (the untouchable set is over
budget).

A rule is described by a small tuple, so chains of rules can be restated too:
``Mask(keep_recent_results, placeholder)``, ``Summarize(prompt_id, target_ratio,
min_span_turns)``, ``Drop()`` and ``Priority(mask_results, keep_recent_results, placeholder)``.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from cutctx import (
    CompactionBudget,
    CompactionPlan,
    CompactionPolicy,
    Role,
    Transcript,
    TranscriptTurn,
)

PLACEHOLDER = "[tool result masked by cutctx]"
CHARS_PER_TOKEN = 4.0


@dataclass(frozen=True)
class Mask:
    """The masking rule's configuration."""

    keep_recent_results: int = 2
    placeholder: str = PLACEHOLDER
    exclude_tools: tuple[str, ...] = ()
    min_reclaim: int = 0


@dataclass(frozen=True)
class Summarize:
    """The summarizing rule's configuration."""

    prompt_id: str = "p"
    target_ratio: float = 0.2
    min_span_turns: int = 4


@dataclass(frozen=True)
class Drop:
    """The drop-oldest rule (it has no configuration)."""


@dataclass(frozen=True)
class Priority:
    """The priority rule's configuration."""

    mask_results: bool = False
    keep_recent_results: int = 0
    placeholder: str = PLACEHOLDER


Rule = Mask | Summarize | Drop | Priority


def rule_name(rule: Rule) -> str:
    """The published name of a rule's policy (``priority`` for the priority rule)."""
    if isinstance(rule, Mask):
        return "observation_masking"
    if isinstance(rule, Summarize):
        return "summarizing"
    if isinstance(rule, Priority):
        return "priority"
    return "drop_oldest"


def chain_name(rules: list[Rule]) -> str:
    """The published name of a chain of rules (every built-in version is 1.0.0)."""
    return "chain(" + "+".join(rule_name(rule) + "@1.0.0" for rule in rules) + ")"


# ---------------------------------------------------------------------------------------------
# Structure: the untouchable set and the exchanges, restated.


def is_untouchable(transcript: Transcript, budget: CompactionBudget, position: int) -> bool:
    """Contract 2: system turns, pinned turns and the last ``protected_recent_turns`` turns."""
    turn = transcript.turns[position]
    in_tail = position >= len(transcript.turns) - budget.protected_recent_turns
    return turn.role == Role.SYSTEM or turn.pinned or in_tail


def exchange_of(transcript: Transcript, position: int) -> list[int]:
    """Contract 3: every position sharing the turn's ``tool_call_id`` (or the turn alone)."""
    call = transcript.turns[position].tool_call_id
    if call is None:
        return [position]
    return [p for p, turn in enumerate(transcript.turns) if turn.tool_call_id == call]


def is_removable(transcript: Transcript, budget: CompactionBudget, position: int) -> bool:
    """A turn may leave the view only if no member of its exchange is untouchable."""
    return not any(is_untouchable(transcript, budget, p) for p in exchange_of(transcript, position))


def untouchable_total(transcript: Transcript, budget: CompactionBudget) -> int:
    """The tokens of the strict untouchable set."""
    return sum(
        turn.token_estimate
        for p, turn in enumerate(transcript.turns)
        if is_untouchable(transcript, budget, p)
    )


def json_digest(text: str) -> str:
    """0.1's digest of a text: SHA-256 of ``json.dumps(text, ensure_ascii=False)`` as UTF-8.

    The whole text at once (cutctx hashes slices). A lone surrogate, which UTF-8 cannot encode,
    is written as the escape ``json.dumps`` gives it (``\\udXXX``): the documented rule.
    """
    encoded = json.dumps(text, ensure_ascii=False).encode("utf-8", "backslashreplace")
    return hashlib.sha256(encoded).hexdigest()


def digest_group(turn_ids: list[str]) -> str:
    """``span-`` and the first 16 hex digits of the digest of the NUL-joined turn ids."""
    return "span-" + json_digest("\x00".join(turn_ids))[:16]


def stub_text(placeholder: str, turn: TranscriptTurn) -> str:
    """The stub text of a masked turn: label, the original's estimate and its digest."""
    digest = json_digest(turn.content)
    return (
        placeholder + " (original: " + str(turn.token_estimate) + " tokens, sha256:" + digest + ")"
    )


# ---------------------------------------------------------------------------------------------
# Decisions: per turn id, what happens to it.


@dataclass
class Decision:
    """What a rule decided, by turn id, plus the requests' targets and the recorded ratio."""

    masks: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> (stub, tokens)
    drops: set[str] = field(default_factory=set)
    groups: list[tuple[list[str], int, str]] = field(default_factory=list)  # ids, target, prompt
    ratio: float | None = None


def masking(transcript: Transcript, budget: CompactionBudget, rule: Mask) -> Decision:
    """Mask old TOOL turns, oldest first, until the total fits — and, with ``min_reclaim``,
    until that much came back, or not at all if the eligible results give less."""
    decision = Decision()
    total = sum(turn.token_estimate for turn in transcript.turns)
    if total <= budget.max_tokens:
        return decision
    tool_positions = [p for p, t in enumerate(transcript.turns) if t.role == Role.TOOL]
    # The floor counts every TOOL turn, untouchable or not: it never moves.
    protected_tools = set(tool_positions[max(0, len(tool_positions) - rule.keep_recent_results) :])
    eligible: list[tuple[TranscriptTurn, str, int]] = []
    for p in tool_positions:
        turn = transcript.turns[p]
        if p in protected_tools or is_untouchable(transcript, budget, p):
            continue
        if turn.metadata.get("cutctx.kind") == "masked":
            continue
        if turn.metadata.get("cutctx.tool_name") in rule.exclude_tools:
            continue
        stub = stub_text(rule.placeholder, turn)
        cost = math.ceil(len(stub) / CHARS_PER_TOKEN)
        if cost >= turn.token_estimate:
            continue
        eligible.append((turn, stub, cost))
    if sum(turn.token_estimate - cost for turn, _, cost in eligible) < rule.min_reclaim:
        return decision
    reclaimed = 0
    for turn, stub, cost in eligible:
        if total <= budget.max_tokens and reclaimed >= rule.min_reclaim:
            break
        decision.masks[turn.turn_id] = (stub, cost)
        decision.ratio = CHARS_PER_TOKEN
        total = total - turn.token_estimate + cost
        reclaimed += turn.token_estimate - cost
    return decision


def summarizing(transcript: Transcript, budget: CompactionBudget, rule: Summarize) -> Decision:
    """Fold the oldest piece of whole removable exchanges."""
    decision = Decision()
    turns = transcript.turns
    if sum(turn.token_estimate for turn in turns) <= budget.max_tokens:
        return decision
    pieces = whole_pieces(transcript, removable_runs(transcript, budget))

    def target_of(piece: list[int]) -> int:
        return max(1, round(sum(turns[p].token_estimate for p in piece) * rule.target_ratio))

    # A piece is taken only if long enough and its summary would be smaller than it is.
    qualifying = [
        piece
        for piece in pieces
        if len(piece) >= rule.min_span_turns
        and target_of(piece) < sum(turns[p].token_estimate for p in piece)
    ]
    if not qualifying:
        return decision
    span = min(qualifying, key=lambda piece: piece[0])
    target = target_of(span)
    decision.groups.append(([turns[p].turn_id for p in span], target, rule.prompt_id))
    return decision


def removable_runs(transcript: Transcript, budget: CompactionBudget) -> list[list[int]]:
    """The maximal runs of adjacent removable turns, as lists of positions."""
    runs: list[list[int]] = []
    previous = False
    for p in range(len(transcript.turns)):
        removable = is_removable(transcript, budget, p)
        if removable and previous:
            runs[-1].append(p)
        elif removable:
            runs.append([p])
        previous = removable
    return runs


def whole_pieces(transcript: Transcript, pieces: list[list[int]]) -> list[list[int]]:
    """Split pieces at every turn whose exchange reaches outside, until nothing changes."""
    while True:
        split: list[list[int]] = []
        for piece in pieces:
            part: list[int] = []
            for p in piece:
                if all(q in piece for q in exchange_of(transcript, p)):
                    part.append(p)
                else:
                    split.append(part)
                    part = []
            split.append(part)
        split = [part for part in split if part]
        if split == pieces:
            return pieces
        pieces = split


def dropping(transcript: Transcript, budget: CompactionBudget) -> Decision:
    """Drop whole removable exchanges, by earliest member, until the total fits."""
    decision = Decision()
    total = sum(turn.token_estimate for turn in transcript.turns)
    seen: set[int] = set()
    for p in range(len(transcript.turns)):
        if total <= budget.max_tokens:
            break
        if p in seen:
            continue
        members = exchange_of(transcript, p)
        seen.update(members)
        if not is_removable(transcript, budget, p):
            continue
        for q in members:
            decision.drops.add(transcript.turns[q].turn_id)
            total -= transcript.turns[q].token_estimate
    return decision


def priority_of(turn: TranscriptTurn) -> int:
    """A turn's ``cutctx.priority``: an optional minus and ASCII digits; 0 when absent."""
    value = turn.metadata.get("cutctx.priority", "0")
    digits = value.removeprefix("-")
    if not digits or any(character not in "0123456789" for character in digits):
        raise ValueError(f"turn {turn.turn_id}: priority {value!r} is not an integer")
    return int(value)


def level_of(transcript: Transcript, position: int) -> int:
    """The level a turn is shed at: the highest priority in its exchange."""
    return max(priority_of(transcript.turns[p]) for p in exchange_of(transcript, position))


def prioritizing(transcript: Transcript, budget: CompactionBudget, rule: Priority) -> Decision:
    """Level by level, lowest first: mask the level's results (if asked), then drop its
    exchanges, each oldest first, until the total fits."""
    decision = Decision()
    turns = transcript.turns
    total = sum(turn.token_estimate for turn in turns)
    levels = sorted({level_of(transcript, p) for p in range(len(turns))})
    tool_positions = [p for p, t in enumerate(turns) if t.role == Role.TOOL]
    floor = set(tool_positions[max(0, len(tool_positions) - rule.keep_recent_results) :])
    for level in levels:
        if total <= budget.max_tokens:
            break
        if rule.mask_results:
            candidates = [p for p in tool_positions if level_of(transcript, p) == level]
            total = _mask_level(transcript, budget, rule, candidates, floor, total, decision)
        seen: set[int] = set()
        for p in range(len(turns)):
            if total <= budget.max_tokens:
                break
            if p in seen:
                continue
            members = exchange_of(transcript, p)
            seen.update(members)
            if level_of(transcript, p) != level or not is_removable(transcript, budget, p):
                continue
            for q in members:
                turn_id = turns[q].turn_id
                decision.drops.add(turn_id)
                if turn_id in decision.masks:  # a stub leaves with its exchange
                    total -= decision.masks.pop(turn_id)[1]
                else:
                    total -= turns[q].token_estimate
    return decision


def _mask_level(  # noqa: PLR0917 - a private helper of prioritizing
    transcript: Transcript,
    budget: CompactionBudget,
    rule: Priority,
    candidates: list[int],
    floor: set[int],
    total: int,
    decision: Decision,
) -> int:
    """Mask the level's results, oldest first, until the total fits; return the new total."""
    for p in candidates:
        if total <= budget.max_tokens:
            break
        turn = transcript.turns[p]
        if p in floor or is_untouchable(transcript, budget, p):
            continue
        if turn.metadata.get("cutctx.kind") == "masked":
            continue
        stub = stub_text(rule.placeholder, turn)
        cost = math.ceil(len(stub) / CHARS_PER_TOKEN)
        if cost >= turn.token_estimate:
            continue
        decision.masks[turn.turn_id] = (stub, cost)
        decision.ratio = CHARS_PER_TOKEN
        total = total - turn.token_estimate + cost
    return total


def decide_rule(transcript: Transcript, budget: CompactionBudget, rule: Rule) -> Decision:
    """Run one rule."""
    if isinstance(rule, Mask):
        return masking(transcript, budget, rule)
    if isinstance(rule, Summarize):
        return summarizing(transcript, budget, rule)
    if isinstance(rule, Priority):
        return prioritizing(transcript, budget, rule)
    return dropping(transcript, budget)


# ---------------------------------------------------------------------------------------------
# Plans: a decision (or a chain of them) written out as CompactionPlan.to_dict() would be.


def expected_plan(
    transcript: Transcript, budget: CompactionBudget, rules: list[Rule], *, chained: bool
) -> dict[str, Any] | None:
    """The plan dict for one rule (``chained=False``) or a chain of rules; ``None`` if none may
    exist."""
    if untouchable_total(transcript, budget) > budget.max_tokens:
        return None
    fate: dict[str, Any] = {}  # real id -> ("mask", stub, n) | ("drop",) | ("group", key)
    members_of: dict[int, list[str]] = {}  # group key -> real ids in transcript order
    targets: dict[int, tuple[int, str]] = {}  # group key -> (target tokens, prompt id)
    ratio: float | None = None
    order = {turn.turn_id: p for p, turn in enumerate(transcript.turns)}
    next_key = 0
    for rule in rules:
        view, standins = project(transcript, fate, members_of, targets)
        if chained and sum(turn.token_estimate for turn in view.turns) <= budget.max_tokens:
            break
        decision = decide_rule(view, budget, rule)
        if ratio is None:
            ratio = decision.ratio
        next_key = _absorb(decision, fate, members_of, targets, standins, order, next_key)
    return _write(transcript, budget, rules, fate, members_of, targets, ratio, chained=chained)


def _absorb(  # noqa: PLR0917 - a private helper of expected_plan
    decision: Decision,
    fate: dict[str, Any],
    members_of: dict[int, list[str]],
    targets: dict[int, tuple[int, str]],
    standins: dict[str, int],
    order: dict[str, int],
    next_key: int,
) -> int:
    """Write one rule's decision over a view back onto the real turn ids; return the next key."""
    for turn_id, (stub, cost) in decision.masks.items():
        fate[turn_id] = ("mask", stub, cost)
    for turn_id in decision.drops:
        if turn_id in standins:  # dropping a stand-in drops its group and retires it
            key = standins[turn_id]
            for real in members_of.pop(key):
                fate[real] = ("drop",)
            del targets[key]
        else:
            fate[turn_id] = ("drop",)
    for ids, target, prompt in decision.groups:
        reals: list[str] = []
        for turn_id in ids:
            if turn_id in standins:  # folding a stand-in merges its group into this one
                key = standins[turn_id]
                reals.extend(members_of.pop(key))
                del targets[key]
            else:
                reals.append(turn_id)
        reals.sort(key=order.__getitem__)
        members_of[next_key] = reals
        targets[next_key] = (target, prompt)
        for real in reals:
            fate[real] = ("group", next_key)
        next_key += 1
    return next_key


def project(
    transcript: Transcript,
    fate: dict[str, Any],
    members_of: dict[int, list[str]],
    targets: dict[int, tuple[int, str]],
) -> tuple[Transcript, dict[str, int]]:
    """The view the decisions so far would give, and each stand-in's group key.

    A masked turn carries its stub (and ``cutctx.kind: masked``); a group is one assistant
    stand-in, at its earliest turn, priced at its target.
    """
    view: list[TranscriptTurn] = []
    standins: dict[str, int] = {}
    for turn in transcript.turns:
        what = fate.get(turn.turn_id, ("keep",))
        if what[0] == "keep":
            view.append(turn)
        elif what[0] == "mask":
            metadata = {**turn.metadata, "cutctx.kind": "masked"}
            view.append(
                TranscriptTurn(
                    turn.turn_id,
                    turn.role,
                    what[1],
                    what[2],
                    turn.tool_call_id,
                    turn.pinned,
                    metadata,
                )
            )
        elif what[0] == "group" and members_of[what[1]][0] == turn.turn_id:
            ids = members_of[what[1]]
            standin_id = "summary:" + digest_group(ids)
            standins[standin_id] = what[1]
            view.append(TranscriptTurn(standin_id, Role.ASSISTANT, "", targets[what[1]][0]))
    return Transcript(tuple(view)), standins


def _write(  # noqa: PLR0917 - a private helper of expected_plan
    transcript: Transcript,
    budget: CompactionBudget,
    rules: list[Rule],
    fate: dict[str, Any],
    members_of: dict[int, list[str]],
    targets: dict[int, tuple[int, str]],
    ratio: float | None,
    *,
    chained: bool,
) -> dict[str, Any]:
    actions: list[dict[str, Any]] = []
    after = 0
    for turn in transcript.turns:
        what = fate.get(turn.turn_id, ("keep",))
        entry: dict[str, Any] = {
            "turn_id": turn.turn_id,
            "action": "keep",
            "summary_group": None,
            "replacement": None,
        }
        if what[0] == "keep":
            after += turn.token_estimate
        elif what[0] == "mask":
            entry["action"] = "mask"
            entry["replacement"] = {"content": what[1], "token_estimate": what[2]}
            after += what[2]
        elif what[0] == "drop":
            entry["action"] = "drop"
        else:
            entry["action"] = "summarize"
            entry["summary_group"] = digest_group(members_of[what[1]])
        actions.append(entry)
    first_position = {turn.turn_id: p for p, turn in enumerate(transcript.turns)}
    requests = []
    for key in sorted(members_of, key=lambda k: first_position[members_of[k][0]]):
        target, prompt = targets[key]
        after += target
        requests.append(
            {
                "group_id": digest_group(members_of[key]),
                "turn_ids": list(members_of[key]),
                "target_tokens": target,
                "prompt_id": prompt,
            }
        )
    return {
        "actions": actions,
        "summarization_requests": requests,
        "tokens_before": sum(turn.token_estimate for turn in transcript.turns),
        "tokens_after_estimate": after,
        "policy_name": chain_name(rules) if chained else rule_name(rules[0]),
        "policy_version": "1.0.0",
        "estimator_ratio": ratio,
        "budget_unmet": after > budget.max_tokens,
    }


# ---------------------------------------------------------------------------------------------
# A test double: a built-in policy the chain must treat as foreign.


class Foreign:
    """Wraps a policy so a chain cannot recognise it and must call ``decide`` on a projection."""

    def __init__(self, inner: CompactionPolicy) -> None:
        self._inner = inner

    @property
    def name(self) -> str:
        """The wrapped policy's name, so a chain of wrappers is named like the real chain."""
        return self._inner.name

    @property
    def version(self) -> str:
        """The wrapped policy's version."""
        return self._inner.version

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        """Whatever the wrapped policy decides."""
        return self._inner.decide(transcript, budget)
