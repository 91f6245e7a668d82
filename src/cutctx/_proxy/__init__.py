"""cutctx proxy: the window in front of any agent, over HTTP (the cutctx[proxy] extra)."""
