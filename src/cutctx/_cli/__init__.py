"""The ``cutctx`` command line: an edge over the public API that the library never imports.

It reads and writes files by design; nothing under ``cutctx`` outside this package imports it
(a test and an import contract say so).
"""

from cutctx._cli.app import main as main

__all__ = ["main"]
