"""Tests that drive the installed ``cutctx`` console script as a user would."""
