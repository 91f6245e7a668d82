"""``verify``: re-derive a record's plan from its transcript and say what, if anything, differs.

The seal names a field edited after the record was made, the plan hash an edited plan, the
transcript digest another transcript; then the policy (rebuilt from the record, or given)
decides again and the plans are compared byte for byte. See docs/records.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._audit.policies import NotRebuildable, policy_config, rebuild
from cutctx._audit.records import (
    LABELS,
    SEALED,
    CompactionRecord,
    argument_error,
    transcript_digest,
)
from cutctx._core.digest import canonical_json, json_digest
from cutctx._core.errors import BudgetUnsatisfiable
from cutctx._core.protocols import CompactionPolicy
from cutctx._core.values import Transcript

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["Verification", "verify"]

_SHOWN: Final = 3
"""Differing turns named in one difference."""


@dataclass(frozen=True, slots=True)
class Verification:
    """The outcome of ``verify``: ``ok`` exactly when nothing differs.

    Each difference is one short sentence for a person, in the order ``verify`` checks: the
    seal, the plan's own hash, the transcript, the policy, then the plan it re-derives.

    .. versionadded:: 0.1.0
    """

    ok: bool
    differences: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.differences, tuple) or not all(
            isinstance(item, str) for item in self.differences
        ):
            raise ValidationError(
                "Verification.differences must be a tuple of str",
                details={"field": "Verification.differences"},
            )
        if self.ok is not (not self.differences):
            raise ValidationError(
                "Verification.ok must be True exactly when there are no differences",
                details={"field": "Verification.ok"},
            )


def verify(
    record: CompactionRecord, transcript: Transcript, policy: CompactionPolicy | None = None
) -> Verification:
    """Re-derive the record's plan from ``transcript`` and say what, if anything, differs.

    ``ok`` means the policy decides, under the record's budget, a plan whose canonical JSON is
    byte identical to the record's, and that no field was edited after the record was made.
    Without ``policy``, the built-in policy is rebuilt from the record's name, version and
    configuration.

    .. versionadded:: 0.1.0

    >>> from cutctx import CompactionBudget, DropOldestPolicy, Role, Transcript, TranscriptTurn
    >>> t = Transcript((TranscriptTurn("u", Role.USER, "hi", 1),))
    >>> budget, policy = CompactionBudget(10), DropOldestPolicy()
    >>> verify(CompactionRecord.of(policy.decide(t, budget), t, budget, policy), t)
    Verification(ok=True, differences=())

    Raises:
        ValidationError: if ``policy`` is ``None`` and the record's policy cannot be rebuilt
            from data (a policy of the caller's own, or one priced by an estimator that is not a
            ``CharRatioEstimator``), or an argument is of the wrong type.
    """
    if not isinstance(record, CompactionRecord):
        raise argument_error("record", "a cutctx.CompactionRecord", record, owner="verify")
    if not isinstance(transcript, Transcript):
        raise argument_error("transcript", "a cutctx.Transcript", transcript, owner="verify")
    if policy is not None and not isinstance(policy, CompactionPolicy):
        raise argument_error("policy", "a CompactionPolicy or None", policy, owner="verify")
    differences = list(_edited(record))
    record_json = record._plan_json
    if json_digest(record_json) != record.plan_hash:
        differences.append("the record's plan_hash does not match its plan")
    digest = transcript_digest(transcript)
    if digest != record.transcript_digest:
        differences.append(
            "the transcript is not the one the record was made for "
            f"(digest {record.transcript_digest[:12]}… in the record, {digest[:12]}… here)"
        )
    chosen = _policy(record, policy, edited="policy" in _edited_keys(record))
    if isinstance(chosen, str):
        differences.append(chosen)
        return Verification(ok=False, differences=tuple(differences))
    made = (chosen.name, chosen.version)
    if made != (record.policy_name, record.policy_version):
        differences.append(
            f"the policy differs: the record names {record.policy_name}@{record.policy_version}, "
            f"the policy is {made[0]}@{made[1]}"
        )
    elif policy is not None and record.policy_config is not None:
        given = policy_config(policy)
        if given is not None and canonical_json(given) != canonical_json(record.policy_config):
            differences.append("the policy's configuration differs from the record's")
    try:
        derived = chosen.decide(transcript, record.budget)
    except BudgetUnsatisfiable as error:
        differences.append(f"the policy refuses this transcript under the record's budget: {error}")
        return Verification(ok=False, differences=tuple(differences))
    if derived.canonical_json() != record_json:
        differences.extend(_plan_differences(json.loads(record_json), derived.to_dict()))
    if derived.plan_hash() != record.plan_hash:
        differences.append(
            f"the plan hash differs: {record.plan_hash[:12]}… in the record, "
            f"{derived.plan_hash()[:12]}… re-derived"
        )
    return Verification(ok=not differences, differences=tuple(differences))


def _edited_keys(record: CompactionRecord) -> list[str]:
    seal = record.seal or {}
    now = record._sealed()
    return [name for name in SEALED if seal.get(name) != now[name]]


def _edited(record: CompactionRecord) -> Iterator[str]:
    for name in _edited_keys(record):
        yield f"the record's {LABELS[name]} was edited after it was made (its seal differs)"


def _policy(
    record: CompactionRecord, policy: CompactionPolicy | None, *, edited: bool
) -> CompactionPolicy | str:
    """Return the policy to decide with, or the difference that stops verification."""
    if policy is not None:
        return policy
    try:
        config = record.policy_config
        return rebuild(
            record.policy_name,
            None if config is None else json.loads(canonical_json(config)),
            version=record.policy_version,
        )
    except NotRebuildable as error:
        if edited:
            return f"the record's policy cannot be rebuilt: {error}"
        raise ValidationError(
            f"verify() needs policy=: {error}, so the record's policy "
            f"{record.policy_name}@{record.policy_version} cannot be rebuilt from it",
            details={"field": "policy", "policy_name": record.policy_name},
        ) from None
    except ValidationError as error:
        return f"the record's policy configuration cannot be rebuilt: {error.message}"


def _plan_differences(record: dict[str, Any], derived: dict[str, Any]) -> list[str]:
    """Name what differs between the record's plan and the re-derived one (they do differ)."""
    found: list[str] = []
    theirs, ours = record.get("actions"), derived["actions"]
    if theirs != ours:
        found.append(_action_difference(theirs, ours))
    for key in sorted((record.keys() | derived.keys()) - {"actions"}):
        if key not in derived:
            found.append(f"the record's plan holds the unknown key {key!r}")
        elif key not in record:
            found.append(f"the record's plan lacks {key!r}")
        elif canonical_json(record[key]) != canonical_json(derived[key]):
            found.append(
                f"{key} differs: {_short(record[key])} in the record, "
                f"{_short(derived[key])} re-derived"
            )
    if not found:  # pragma: no cover - equal keys and values give equal canonical JSON
        found.append("the record's plan JSON differs from the re-derived plan's")
    return found


def _action_difference(theirs: object, ours: list[dict[str, Any]]) -> str:
    """Return one sentence naming the first turns whose actions differ."""
    if not isinstance(theirs, list) or not all(isinstance(item, Mapping) for item in theirs):
        return "the record's plan holds no list of actions"
    their_ids = [item.get("turn_id") for item in theirs]
    our_ids = [item["turn_id"] for item in ours]
    if their_ids != our_ids:
        at = next(
            (i for i, (a, b) in enumerate(zip(their_ids, our_ids, strict=False)) if a != b),
            min(len(their_ids), len(our_ids)),
        )
        return (
            f"the record's plan is for other turns: {len(their_ids)} actions for "
            f"{len(our_ids)} turns, first differing at position {at}"
        )
    differing = [
        (mine["turn_id"], _describe(item), _describe(mine))
        for item, mine in zip(theirs, ours, strict=True)
        if canonical_json(item) != canonical_json(mine)
    ]
    named = ", ".join(
        f"{turn_id!r} ({a} in the record, {b} re-derived)" if a != b else f"{turn_id!r} ({a})"
        for turn_id, a, b in differing[:_SHOWN]
    )
    more = f" (+{len(differing) - _SHOWN} more)" if len(differing) > _SHOWN else ""
    return f"the actions differ at {len(differing)} turn(s): {named}{more}"


def _describe(action: Mapping[str, Any]) -> str:
    """Return an action in a few words: ``mask (12 tokens)``, ``summarize into span-…``."""
    kind = action.get("action")
    replacement = action.get("replacement")
    group = action.get("summary_group")
    text = str(kind)
    if isinstance(replacement, Mapping):
        body = "excerpt" if kind == "excerpt" else "stub"
        shown = _short(replacement.get("content"), 24)
        text += f" ({replacement.get('token_estimate')} tokens, {body} {shown})"
    if group is not None:
        text += f" into {group}"
    return text


def _short(value: object, width: int = 40) -> str:
    text = canonical_json(value)
    return text if len(text) <= width else text[: width - 1] + "…"
