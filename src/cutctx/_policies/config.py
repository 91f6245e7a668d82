"""A policy's configuration as plain JSON, and its reading back: each built-in class's one source.

Every built-in policy class writes its own configuration (``BuiltinPolicy._config``) and makes
itself again from one (``BuiltinPolicy._from_config``, reading through ``Config``, which names
any missing, malformed or unknown key). A record holds what ``_config`` writes and ``verify``
rebuilds the policy with ``_from_config``, so the two cannot drift apart: there is no second
table of knobs. A new knob with a default is read with that default, so records written before
it still rebuild.

An estimator is data when it is a ``CharRatioEstimator`` (its ratio) or the ``TextEstimator``
(its versioned name); any other is a function, named as a plan names it, and rebuilding it
raises ``NotRebuildable``: verifying its record needs the policy itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._core.estimators import CharRatioEstimator, restored_estimator

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx._core.protocols import CompactionPolicy, TokenEstimator

__all__ = ["Config", "NotRebuildable", "estimator_config", "estimator_name"]

_REQUIRED: Final = object()


class NotRebuildable(Exception):
    """The configuration names a policy or estimator that cannot be rebuilt from data."""


def estimator_name(estimator: TokenEstimator) -> str:
    """Return the name a plan and a record give an estimator that is not a character ratio.

    Its ``name`` when it has one, else its class's qualified name.
    """
    name = getattr(estimator, "name", None)
    if isinstance(name, str) and name:
        return name
    kind = type(estimator)
    return f"{kind.__module__}.{kind.__qualname__}"


def estimator_config(estimator: TokenEstimator) -> dict[str, Any]:
    """Return the estimator as data: the character ratio, or its name (see ``Config.estimator``)."""
    if type(estimator) is CharRatioEstimator:
        return {"chars_per_token": estimator.chars_per_token}
    return {"name": estimator_name(estimator)}


class Config:
    """A policy configuration being read: each read names its key in any error.

    ``finish()`` refuses any key no read asked for, so a record with an unknown knob fails.
    ``member`` rebuilds one described member of a chain (``{"name", "version", "config"}``) at
    a place named for errors; without it a chain's members cannot be read.
    """

    __slots__ = ("_data", "_member", "_read", "_where")

    def __init__(
        self,
        data: object,
        where: str,
        member: Callable[[object, str], CompactionPolicy] | None = None,
    ) -> None:
        if not isinstance(data, Mapping):
            raise _bad(where, "a JSON object", data)
        self._data: Mapping[str, Any] = data
        self._where = where
        self._member = member
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
        """Return the estimator at ``key``: a ``CharRatioEstimator`` or the ``TextEstimator``.

        Raises:
            NotRebuildable: for an estimator recorded by another name (a function, not data).
        """
        inner = Config(self._get(key, _REQUIRED), f"{self._where}.{key}")
        name = inner._data.get("name")
        if "chars_per_token" not in inner._data and isinstance(name, str):
            made = restored_estimator(None, name)
            if made is None:
                raise NotRebuildable(f"the estimator {name!r} is not data")
            inner.text("name")
            inner.finish()
            return made
        made = CharRatioEstimator(inner.number("chars_per_token"))
        inner.finish()
        return made

    def policies(self, key: str) -> tuple[CompactionPolicy, ...]:
        """Return the policies described at ``key`` (a list of described members), rebuilt."""
        value = self._get(key, _REQUIRED)
        if not isinstance(value, list | tuple):
            raise _bad(f"{self._where}.{key}", "a JSON array", value)
        member = self._member
        if member is None:
            raise NotRebuildable(f"{self._where}.{key}: no way to rebuild a member was given")
        where = f"{self._where}.{key}"
        return tuple(member(item, f"{where}[{index}]") for index, item in enumerate(value))

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


def _bad(where: str, expected: str, value: object) -> ValidationError:
    return ValidationError(
        f"{where} must be {expected}, got {type(value).__name__} {value!r:.60}",
        details={"field": where, "expected": expected},
    )
