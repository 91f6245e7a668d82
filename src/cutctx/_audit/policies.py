"""The built-in policies as data: each one's configuration, and the policy rebuilt from it.

One row per built-in policy class, in ``ROWS``: its ``name`` (the one a record holds), how to read
an instance's configuration as plain JSON, and how to rebuild the instance from that JSON. Adding
a policy is adding a row; a new knob with a default is one more key read with that default, so
records written before it still rebuild. A chain's configuration holds its members, each
``{"name", "version", "config"}``, rebuilt recursively.

A row is two small functions and one line; ``DropOldestPolicy``, with no knobs, is the smallest::

    PolicyRow(DropOldestPolicy, "drop_oldest", lambda _: {}, lambda _: DropOldestPolicy()),
    PolicyRow(ExcerptingPolicy, "excerpting", _excerpting, _excerpting_from),

A policy cutctx cannot rebuild — a class without a row, or one whose estimator is not a
``CharRatioEstimator`` (a tokenizer is a function, not data) — is described by ``None`` or by the
estimator's name, and ``rebuild`` raises ``NotRebuildable`` for it: verifying its record needs
the policy itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._core.estimators import CharRatioEstimator
from cutctx._policies.bounded import BoundedSummarizingPolicy
from cutctx._policies.chain import PolicyChain
from cutctx._policies.drop import DropOldestPolicy
from cutctx._policies.excerpting import ExcerptingPolicy
from cutctx._policies.masking import ObservationMaskingPolicy
from cutctx._policies.priority import PriorityPolicy
from cutctx._policies.summarizing import SummarizingPolicy

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx._core.protocols import CompactionPolicy, TokenEstimator

__all__ = ["ROWS", "Config", "NotRebuildable", "PolicyRow", "describe", "policy_config", "rebuild"]

CHAIN: Final = "chain"
"""The row name of ``PolicyChain``, whose own ``name`` is ``chain(...)``."""
_REQUIRED: Final = object()


class NotRebuildable(Exception):
    """The configuration names a policy or estimator that cannot be rebuilt from data."""


class Config:
    """A policy configuration being read: each read names its key in any error.

    ``finish()`` refuses any key no read asked for, so a record with an unknown knob fails.
    """

    __slots__ = ("_data", "_read", "_where")

    def __init__(self, data: object, where: str) -> None:
        if not isinstance(data, Mapping):
            raise _bad(where, "a JSON object", data)
        self._data: Mapping[str, Any] = data
        self._where = where
        self._read: set[str] = set()

    def _get(self, key: str, default: object) -> object:
        self._read.add(key)
        if key in self._data:
            return self._data[key]
        if default is _REQUIRED:
            raise ValidationError(
                f"{self._where} lacks the key {key!r}", details={"field": f"{self._where}.{key}"}
            )
        return default

    def count(self, key: str, default: object = _REQUIRED) -> int:
        """Return the int >= 0 at ``key`` (``default`` when absent)."""
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _bad(f"{self._where}.{key}", "an int >= 0", value)
        return value

    def text(self, key: str, default: object = _REQUIRED) -> str:
        """Return the string at ``key`` (``default`` when absent)."""
        value = self._get(key, default)
        if not isinstance(value, str):
            raise _bad(f"{self._where}.{key}", "a string", value)
        return value

    def number(self, key: str, default: object = _REQUIRED) -> float:
        """Return the finite number at ``key`` as a float (``default`` when absent)."""
        value = self._get(key, default)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise _bad(f"{self._where}.{key}", "a finite number", value)
        return float(value)

    def flag(self, key: str, default: object = _REQUIRED) -> bool:
        """Return the bool at ``key`` (``default`` when absent)."""
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise _bad(f"{self._where}.{key}", "true or false", value)
        return value

    def names(self, key: str, default: object = _REQUIRED) -> tuple[str, ...]:
        """Return the array of strings at ``key`` as a tuple (``default`` when absent)."""
        value = self._get(key, default)
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise _bad(f"{self._where}.{key}", "a JSON array of strings", value)
        return tuple(value)

    def estimator(self, key: str) -> TokenEstimator:
        """Return the ``CharRatioEstimator`` at ``key``, or raise ``NotRebuildable`` for another."""
        inner = Config(self._get(key, _REQUIRED), f"{self._where}.{key}")
        name = inner._data.get("name")
        if "chars_per_token" not in inner._data and isinstance(name, str):
            raise NotRebuildable(f"the estimator {name!r} is not data")
        made = CharRatioEstimator(inner.number("chars_per_token"))
        inner.finish()
        return made

    def policies(self, key: str) -> tuple[CompactionPolicy, ...]:
        """Return the policies described at ``key`` (a list of ``describe`` objects), rebuilt."""
        value = self._get(key, _REQUIRED)
        if not isinstance(value, list | tuple):
            raise _bad(f"{self._where}.{key}", "a JSON array", value)
        return tuple(
            _rebuild_described(item, f"{self._where}.{key}[{index}]")
            for index, item in enumerate(value)
        )

    def optional_text(self, key: str) -> str | None:
        """Return the string or ``None`` at ``key`` (``None`` when absent)."""
        value = self._get(key, None)
        if value is not None and not isinstance(value, str):
            raise _bad(f"{self._where}.{key}", "a string or null", value)
        return value

    def raw(self, key: str) -> object:
        """Return the value at ``key`` as it is (``None`` when absent), counting it as read."""
        self._read.add(key)
        return self._data.get(key)

    def finish(self) -> None:
        """Raise if the configuration holds a key no read asked for."""
        unknown = sorted(str(key) for key in self._data.keys() - self._read)
        if unknown:
            raise ValidationError(
                f"{self._where} holds the unknown key {unknown[0]!r}",
                details={"field": f"{self._where}.{unknown[0]}"},
            )


@dataclass(frozen=True, slots=True)
class PolicyRow:
    """One built-in policy class: its record name, its configuration and its rebuilding."""

    kind: type[Any]
    name: str
    configure: Callable[[Any], dict[str, Any]]
    rebuild: Callable[[Config], CompactionPolicy]


def estimator_config(estimator: TokenEstimator) -> dict[str, Any]:
    """Return the estimator as data: the character ratio, or (not rebuildable) its name."""
    if type(estimator) is CharRatioEstimator:
        return {"chars_per_token": estimator.chars_per_token}
    # Named as the plan names it (``CompactionPlan.estimator_name``).
    name = getattr(estimator, "name", None)
    if not isinstance(name, str) or not name:
        kind = type(estimator)
        name = f"{kind.__module__}.{kind.__qualname__}"
    return {"name": name}


def _masking(policy: ObservationMaskingPolicy) -> dict[str, Any]:
    return {
        "keep_recent_results": policy.keep_recent_results,
        "placeholder": policy.placeholder,
        "estimator": estimator_config(policy.estimator),
        "exclude_tools": list(policy.exclude_tools),
        "min_reclaim": policy.min_reclaim,
    }


def _masking_from(config: Config) -> ObservationMaskingPolicy:
    return ObservationMaskingPolicy(
        config.count("keep_recent_results"),
        config.text("placeholder"),
        estimator=config.estimator("estimator"),
        exclude_tools=config.names("exclude_tools", ()),
        min_reclaim=config.count("min_reclaim", 0),
    )


def _priority(policy: PriorityPolicy) -> dict[str, Any]:
    return {
        "mask_results": policy.mask_results,
        "keep_recent_results": policy.keep_recent_results,
        "placeholder": policy.placeholder,
        "estimator": estimator_config(policy.estimator),
    }


def _priority_from(config: Config) -> PriorityPolicy:
    return PriorityPolicy(
        mask_results=config.flag("mask_results"),
        keep_recent_results=config.count("keep_recent_results"),
        placeholder=config.text("placeholder"),
        estimator=config.estimator("estimator"),
    )


def _bounded(policy: BoundedSummarizingPolicy) -> dict[str, Any]:
    return {
        "prompt_id": policy.prompt_id,
        "max_input_tokens": policy.max_input_tokens,
        "target_ratio": policy.target_ratio,
    }


def _bounded_from(config: Config) -> BoundedSummarizingPolicy:
    return BoundedSummarizingPolicy(
        config.text("prompt_id"),
        max_input_tokens=config.count("max_input_tokens"),
        target_ratio=config.number("target_ratio"),
    )


def _summarizing(policy: SummarizingPolicy) -> dict[str, Any]:
    return {
        "prompt_id": policy.prompt_id,
        "target_ratio": policy.target_ratio,
        "min_span_turns": policy.min_span_turns,
    }


def _summarizing_from(config: Config) -> SummarizingPolicy:
    return SummarizingPolicy(
        config.text("prompt_id"), config.number("target_ratio"), config.count("min_span_turns")
    )


def _excerpting(policy: ExcerptingPolicy) -> dict[str, Any]:
    return {"estimator": estimator_config(policy.estimator), "recall_tool": policy.recall_tool}


def _excerpting_from(config: Config) -> ExcerptingPolicy:
    return ExcerptingPolicy(
        estimator=config.estimator("estimator"), recall_tool=config.optional_text("recall_tool")
    )


def _chain(policy: PolicyChain) -> dict[str, Any]:
    return {"policies": [describe(member) for member in policy.policies]}


ROWS: Final[tuple[PolicyRow, ...]] = (
    PolicyRow(ObservationMaskingPolicy, "observation_masking", _masking, _masking_from),
    PolicyRow(SummarizingPolicy, "summarizing", _summarizing, _summarizing_from),
    PolicyRow(BoundedSummarizingPolicy, "bounded_summarizing", _bounded, _bounded_from),
    PolicyRow(PriorityPolicy, "priority", _priority, _priority_from),
    PolicyRow(DropOldestPolicy, "drop_oldest", lambda _: {}, lambda _: DropOldestPolicy()),
    PolicyRow(ExcerptingPolicy, "excerpting", _excerpting, _excerpting_from),
    PolicyRow(PolicyChain, CHAIN, _chain, lambda config: PolicyChain(config.policies("policies"))),
)
"""Every built-in policy class cutctx can describe and rebuild; a new policy adds its row."""

_BY_KIND: Final = {row.kind: row for row in ROWS}
_BY_NAME: Final = {row.name: row for row in ROWS}


def policy_config(policy: CompactionPolicy) -> dict[str, Any] | None:
    """Return ``policy``'s configuration as plain JSON, or ``None`` for a class without a row."""
    row = _BY_KIND.get(type(policy))
    return None if row is None else row.configure(policy)


def describe(policy: CompactionPolicy) -> dict[str, Any]:
    """Return ``{"name", "version", "config"}`` for ``policy`` (how a chain holds its members)."""
    return {"name": policy.name, "version": policy.version, "config": policy_config(policy)}


def rebuild(name: str, config: object, where: str = "policy.config") -> CompactionPolicy:
    """Return the built-in policy named ``name`` with ``config`` (see ``policy_config``).

    The caller compares the rebuilt policy's ``name`` and ``version`` with the ones recorded.

    Raises:
        NotRebuildable: for a policy without a row, a ``None`` configuration or an estimator
            that is not a ``CharRatioEstimator``.
        ValidationError: for a configuration that is malformed, naming the key.
    """
    row = _BY_NAME.get(CHAIN if name.startswith(CHAIN + "(") else name)
    if row is None or config is None:
        raise NotRebuildable(f"{name!r} is not a built-in policy cutctx can rebuild")
    reader = Config(config, where)
    made = row.rebuild(reader)
    reader.finish()
    return made


def _rebuild_described(value: object, where: str) -> CompactionPolicy:
    """Return the policy a ``describe`` object holds, checking its recorded name and version."""
    entry = Config(value, where)
    name, version = entry.text("name"), entry.text("version")
    made = rebuild(name, entry.raw("config"), f"{where}.config")
    entry.finish()
    if (made.name, made.version) != (name, version):
        raise ValidationError(
            f"{where} records {name}@{version}, which rebuilds as {made.name}@{made.version}",
            details={"field": where},
        )
    return made


def _bad(where: str, expected: str, value: object) -> ValidationError:
    return ValidationError(
        f"{where} must be {expected}, got {type(value).__name__} {value!r:.60}",
        details={"field": where, "expected": expected},
    )
