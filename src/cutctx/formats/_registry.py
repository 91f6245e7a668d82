"""Formats found by name: the built-in ones, the frameworks', and those installed packages add.

A package joins the registry by declaring an entry point in the group ``cutctx.formats`` whose
name is its format's ``name`` and whose object is the ``Format`` (or a class or function that
makes it)::

    [project.entry-points."cutctx.formats"]
    my_format = "my_package.formats:MY_FORMAT"

It is then named like a built-in one: ``format="my_format"`` in a window, ``compact_messages``
or ``recall``, in a window's state and in ``cutctx --format my_format``. This is the one module
of the library that reads installed packages' metadata (files on ``sys.path``): only when a name
is none of the built-in ones, and each name once.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any, Final

from baseaicore import ValidationError

from cutctx.formats._common import shown
from cutctx.formats._format import Format

__all__ = ["ENTRY_POINT_GROUP", "installed", "installed_names"]

ENTRY_POINT_GROUP: Final = "cutctx.formats"
"""The entry-point group a package declares its formats in (the entry point's name is the
format's ``name``).

.. versionadded:: 0.1.1
"""

_FOUND: dict[str, Format[Any]] = {}  # names already loaded: an entry point is loaded once


def installed(name: str) -> Format[Any] | None:
    """Return the format an installed package registers as ``name``, or ``None``.

    Raises:
        ValidationError: for an entry point that does not load, is not a ``Format``, or makes
            a format of another name.
    """
    found = _FOUND.get(name)
    if found is not None:
        return found
    for point in entry_points(group=ENTRY_POINT_GROUP, name=name):
        try:
            loaded: object = point.load()
        except Exception as error:  # noqa: BLE001 - a third party's import error, reported in one line
            raise ValidationError(
                f"format {name!r}: its entry point {point.value!r} does not load "
                f"({type(error).__name__}: {shown(str(error), 80)})",
                details={"field": "format", "entry_point": point.value},
            ) from None
        if not isinstance(loaded, Format) and callable(loaded):
            loaded = loaded()
        if not isinstance(loaded, Format):
            raise ValidationError(
                f"format {name!r}: its entry point {point.value!r} is not a cutctx.formats.Format",
                details={"field": "format", "entry_point": point.value},
            )
        if loaded.name != name:
            raise ValidationError(
                f"format {name!r}: its entry point makes a format named {shown(loaded.name)}",
                details={"field": "format", "entry_point": point.value},
            )
        _FOUND[name] = loaded
        return loaded
    return None


def installed_names() -> tuple[str, ...]:
    """Return the names installed packages register formats under, sorted."""
    return tuple(sorted({point.name for point in entry_points(group=ENTRY_POINT_GROUP)}))
