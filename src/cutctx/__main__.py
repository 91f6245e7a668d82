"""``python -m cutctx``: the same command line as the ``cutctx`` console script."""

from cutctx._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
