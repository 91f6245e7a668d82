"""The built-in policies as data: each one's configuration, and the policy rebuilt from it.

Each built-in policy class is the one source of its configuration: it writes it
(``BuiltinPolicy._config``) and reads it back (``BuiltinPolicy._from_config``, through
``Config``, which names any missing, malformed or unknown key). ``BUILTINS`` lists the classes a
record may name and ``ROWS`` holds one row per class, made from the class itself: its record
``name`` (a chain's is ``chain``), and nothing else to keep in step. A new built-in policy writes
its two methods and joins ``BUILTINS``; a new knob with a default is one more key read with that
default, so records written before it still rebuild. A chain's configuration holds its members,
each ``{"name", "version", "config"}``, rebuilt recursively.

A policy cutctx cannot rebuild — a class not in ``BUILTINS`` (a subclass of a built-in one
included: it may decide otherwise), or one whose estimator is a function rather than data (a
tokenizer; see ``cutctx._policies.config``) — is described by ``None`` or by the estimator's
name, and ``rebuild`` raises ``NotRebuildable`` for it: verifying its record needs the policy
itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

from baseaicore import ValidationError

from cutctx._policies.bounded import BoundedSummarizingPolicy
from cutctx._policies.chain import PolicyChain
from cutctx._policies.config import Config, NotRebuildable, estimator_config
from cutctx._policies.drop import DropOldestPolicy
from cutctx._policies.excerpting import ExcerptingPolicy
from cutctx._policies.floor import FloorChain, RoomChain
from cutctx._policies.large import LargeResultMaskingPolicy
from cutctx._policies.masking import ObservationMaskingPolicy
from cutctx._policies.priority import PriorityPolicy
from cutctx._policies.stubs import StubDroppingPolicy
from cutctx._policies.summarizing import SummarizingPolicy

if TYPE_CHECKING:
    from cutctx._core.protocols import CompactionPolicy
    from cutctx._policies.draft import BuiltinPolicy

__all__ = [
    "BUILTINS",
    "ROWS",
    "Config",
    "NotRebuildable",
    "PolicyRow",
    "describe",
    "estimator_config",
    "policy_config",
    "rebuild",
]

CHAIN: Final = "chain"
"""The row name of ``PolicyChain``, whose own ``name`` is ``chain(...)``."""

BUILTINS: Final[tuple[type[BuiltinPolicy], ...]] = (
    ObservationMaskingPolicy,
    LargeResultMaskingPolicy,
    SummarizingPolicy,
    BoundedSummarizingPolicy,
    PriorityPolicy,
    DropOldestPolicy,
    ExcerptingPolicy,
    StubDroppingPolicy,
    PolicyChain,
    FloorChain,
    RoomChain,
)
"""Every built-in policy class a record may name (a test walks ``cutctx._policies`` for them)."""


@dataclass(frozen=True, slots=True)
class PolicyRow:
    """One built-in policy class and its record name; its configuration is the class's own."""

    kind: type[BuiltinPolicy]
    name: str

    def configure(self, policy: BuiltinPolicy) -> dict[str, Any]:
        """Return ``policy``'s configuration as plain JSON (what its class writes)."""
        return policy._config(describe)

    def rebuild(self, config: Config) -> CompactionPolicy:
        """Return the policy ``config`` describes (read by its class)."""
        return self.kind._from_config(config)


ROWS: Final[tuple[PolicyRow, ...]] = tuple(
    PolicyRow(kind, CHAIN if issubclass(kind, PolicyChain) else kind._NAME) for kind in BUILTINS
)
"""One row per class of ``BUILTINS``, made from the class."""

_BY_KIND: Final[dict[type[Any], PolicyRow]] = {row.kind: row for row in ROWS}
# A name may have a row for each version (a chain: PolicyChain 1.0.0, FloorChain 1.1.0,
# RoomChain 1.2.0).
_BY_NAME: Final = {(row.name, row.kind._VERSION): row for row in ROWS}
_LATEST: Final = {row.name: row for row in ROWS if not issubclass(row.kind, FloorChain)}


def policy_config(policy: CompactionPolicy) -> dict[str, Any] | None:
    """Return ``policy``'s configuration as plain JSON, or ``None`` for a class without a row."""
    row = _BY_KIND.get(type(policy))
    return None if row is None else row.configure(cast("BuiltinPolicy", policy))


def describe(policy: CompactionPolicy) -> dict[str, Any]:
    """Return ``{"name", "version", "config"}`` for ``policy`` (how a chain holds its members)."""
    return {"name": policy.name, "version": policy.version, "config": policy_config(policy)}


def rebuild(
    name: str, config: object, where: str = "policy.config", version: str | None = None
) -> CompactionPolicy:
    """Return the built-in policy named ``name`` with ``config`` (see ``policy_config``).

    The caller compares the rebuilt policy's ``name`` and ``version`` with the ones recorded.

    Raises:
        NotRebuildable: for a policy without a row, a ``None`` configuration or an estimator
            that is not data (neither a ``CharRatioEstimator`` nor the ``TextEstimator``).
        ValidationError: for a configuration that is malformed, naming the key.
    """
    key = CHAIN if name.startswith(CHAIN + "(") else name
    row = _BY_NAME.get((key, version)) if version is not None else None
    row = row or _LATEST.get(key)
    if row is None or config is None:
        raise NotRebuildable(f"{name!r} is not a built-in policy cutctx can rebuild")
    reader = Config(config, where, _rebuild_described)
    made = row.rebuild(reader)
    reader.finish()
    return made


def _rebuild_described(value: object, where: str) -> CompactionPolicy:
    """Return the policy a ``describe`` object holds, checking its recorded name and version."""
    entry = Config(value, where)
    name, version = entry.text("name"), entry.text("version")
    made = rebuild(name, entry.raw("config"), f"{where}.config", version)
    entry.finish()
    if (made.name, made.version) != (name, version):
        raise ValidationError(
            f"{where} records {name}@{version}, which rebuilds as {made.name}@{made.version}",
            details={"field": where},
        )
    return made
