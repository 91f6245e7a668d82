"""Provider message formats: the edge between wire messages and cutctx transcripts.

The core never imports this package.
"""
