"""The per-call entry points for provider messages, built on ``cutctx.formats``."""
