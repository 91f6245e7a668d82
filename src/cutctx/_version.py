"""cutctx's version, written here only: the package, the build and the command line read it."""

__version__ = "0.1.1"
