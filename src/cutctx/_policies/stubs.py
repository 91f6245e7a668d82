"""``StubDroppingPolicy``: the messages default's second version makes stubs pay for their place.

A masked exchange still costs its call and its stub; hundreds of them fill a window, and masking
fresher results to keep them loses what the agent needs next. This policy drops the oldest
exchanges whose results are all stubs already, before any fresher result is masked.

With ``index=True`` (the window's, when recall is on) a dropped exchange stays one recall away:
instead of dropping the run, it folds it into one *recall index*, a summary turn the library
writes itself (no model call): a line naming the first ``INDEX_DIGITS`` hex digits of each
dropped result's digest, which ``cutctx_recall`` opens. The index sits where the run began, so
it changes only the bytes a cut changes anyway; later cuts add indexes of their own after it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, ClassVar, Final

from cutctx._core.digest import json_string_digest
from cutctx._core.metadata import KIND_METADATA, MASKED_KIND
from cutctx._core.values import SUMMARY_TURN_ID_PREFIX, Action, Role, check_bool
from cutctx._policies.config import estimator_config
from cutctx._policies.draft import BuiltinPolicy, Draft, Group, check_estimator, keep_all
from cutctx._policies.drop import drop_actions, drop_in_order, unit_heads

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any, Self

    from cutctx._core.invariants import Layout, Units
    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.values import CompactionBudget, Transcript, TranscriptTurn
    from cutctx._policies.config import Config
    from cutctx._policies.draft import Describe

__all__ = [
    "INDEX_DIGITS",
    "INDEX_LABEL",
    "INDEX_PROMPT_ID",
    "StubDroppingPolicy",
    "index_text",
]

INDEX_PROMPT_ID: Final = "cutctx.recall_index"
"""The ``prompt_id`` of a recall index's request: the library writes its text (``index_text``)."""
INDEX_DIGITS: Final = 12
"""How many hex digits of a dropped result's digest its index names (``cutctx_recall`` opens a
result by a prefix this long)."""
INDEX_LABEL: Final = "Tool results dropped to fit; cutctx_recall reads each back by its sha256:"
"""The opening of every recall index."""
_LABEL_ROOM: Final = 32
"""Tokens a recall index's target leaves for the label and framing a format puts on a summary."""
_INPUT_SHARE: Final = 4
"""One index covers at most ``1 / _INPUT_SHARE`` of the budget in stubs (a summary's input is
bounded by ``summary_input_tokens``, by default ``compact_to``); more make more indexes."""
_INDEX_SHARE: Final = 4
"""Once the indexes cost ``1 / _INDEX_SHARE`` of the budget, stubbed exchanges are dropped plainly:
the index never crowds out the results the agent needs next."""
_DIGEST: Final = re.compile(r"sha256:([0-9a-f]{64})")


class StubDroppingPolicy(BuiltinPolicy):
    """Drops whole exchanges whose tool results are all masked stubs, oldest first, until it fits.

    An exchange qualifies when it holds at least one ``TOOL`` turn and every one of them is
    masked (``cutctx.kind: masked``); an exchange with an untouchable member is skipped, as
    ``DropOldestPolicy`` skips it. Nothing else is touched. With ``index=True`` the exchanges
    it would drop are summarized instead, into recall indexes (requests named
    ``INDEX_PROMPT_ID``, priced with ``estimator``, whose text ``index_text`` writes), each
    covering at most a quarter of the budget in stubs.

    .. versionadded:: 0.1.1
    """

    __slots__ = ("_estimator", "_index")

    _NAME: ClassVar[str] = "stub_dropping"
    _VERSION: ClassVar[str] = "1.0.0"
    masks: ClassVar[bool] = True  # removes only exchanges already masked
    drops: ClassVar[bool] = True

    def __init__(self, *, index: bool = False, estimator: TokenEstimator | None = None) -> None:
        self._index = check_bool("StubDroppingPolicy", "index", index)
        self._estimator = check_estimator("StubDroppingPolicy", estimator)

    def _config(self, describe: Describe) -> dict[str, Any]:
        del describe  # no members
        return {"index": self._index, "estimator": estimator_config(self._estimator)}

    @classmethod
    def _from_config(cls, config: Config) -> Self:
        return cls(index=config.flag("index"), estimator=config.estimator("estimator"))

    def __repr__(self) -> str:
        if not self._index:
            return "StubDroppingPolicy()"
        return f"StubDroppingPolicy(index=True, estimator={self._estimator!r})"

    def _draft(self, transcript: Transcript, budget: CompactionBudget, shape: Layout) -> Draft:
        total = shape.total
        if total <= budget.max_tokens:
            return keep_all(shape)
        units = shape.units
        stubbed = _stubbed_units(transcript.turns, units.unit_of)
        dropped: set[int] = set()
        heads = (unit for unit in unit_heads(units) if unit in stubbed)
        if (
            not self._index
            or _indexed_tokens(transcript.turns) >= budget.max_tokens // _INDEX_SHARE
        ):
            total = drop_in_order(
                units, heads, units.unit_tokens, total, budget.max_tokens, dropped
            )
            return Draft(drop_actions(units, dropped), total)
        return self._indexed(transcript.turns, budget, units, heads, total)

    def _indexed(
        self,
        turns: Sequence[TranscriptTurn],
        budget: CompactionBudget,
        units: Units,
        heads: Iterable[int],
        total: int,
    ) -> Draft:
        """Fold the stubbed units, oldest first, into indexes until ``total`` fits."""
        members_of: dict[int, list[int]] = {}
        for index, unit in enumerate(units.unit_of):
            members_of.setdefault(unit, []).append(index)
        groups: list[list[int]] = []
        group: list[int] = []
        stubs = 0
        exact = total  # the running figure estimates each entry alone; this one is the plan's
        limit, most = budget.max_tokens, max(1, budget.max_tokens // _INPUT_SHARE)
        price = self._estimator.estimate_tokens
        for unit in heads:
            if total <= limit:
                break
            if units.locked[unit]:
                continue
            cost = units.unit_tokens[unit]
            if group and stubs + cost > most:
                groups.append(group)
                group, stubs = [], 0
            if not group:
                total += price(INDEX_LABEL) + _LABEL_ROOM
            group.extend(members_of[unit])
            stubs += cost
            exact -= cost
            total -= cost - sum(price(entry) for entry in _entries(turns, members_of[unit]))
        if group:
            groups.append(group)
        actions = [Action.KEEP] * len(turns)
        made: list[Group] = []
        for members in groups:
            for index in members:
                actions[index] = Action.SUMMARIZE
            target = price(index_text(turns[index] for index in members)) + _LABEL_ROOM
            made.append(Group(sorted(members), target, INDEX_PROMPT_ID))
            exact += target
        draft = Draft(actions, exact)
        draft.groups = made
        return draft


def index_text(turns: Iterable[TranscriptTurn]) -> str:
    """Return the recall index of ``turns``: ``INDEX_LABEL`` and each result's digest prefix.

    A masked result names its original's digest in its stub; a result whose body names none is
    listed by the digest of its body (``ObservationMaskingPolicy``'s digest of a body).
    """
    return INDEX_LABEL + "".join(_entries(list(turns), None))


def _entries(turns: Sequence[TranscriptTurn], members: Sequence[int] | None) -> list[str]:
    """Return the index entries (`` sha256:<prefix>``) of the results among ``turns``."""
    picked = turns if members is None else [turns[index] for index in members]
    entries = []
    for turn in picked:
        if turn.role is Role.TOOL:
            found = _DIGEST.search(turn.content)
            digest = found.group(1) if found else json_string_digest(turn.content)
            entries.append(f" sha256:{digest[:INDEX_DIGITS]}")
    return entries


def _indexed_tokens(turns: Sequence[TranscriptTurn]) -> int:
    """Return what the recall indexes among ``turns`` cost (summaries opening ``INDEX_LABEL``)."""
    return sum(
        turn.token_estimate
        for turn in turns
        if turn.turn_id.startswith(SUMMARY_TURN_ID_PREFIX) and turn.content.startswith(INDEX_LABEL)
    )


def _stubbed_units(turns: Sequence[TranscriptTurn], unit_of: Sequence[int]) -> set[int]:
    """Return the units holding a tool result and only masked ones."""
    results: dict[int, bool] = {}
    for turn, unit in zip(turns, unit_of, strict=True):
        if turn.role is Role.TOOL:
            masked = bool(turn.metadata) and turn.metadata.get(KIND_METADATA) == MASKED_KIND
            results[unit] = results.get(unit, True) and masked
    return {unit for unit, masked in results.items() if masked}
