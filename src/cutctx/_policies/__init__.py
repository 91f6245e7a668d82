"""The built-in policies and the chain: each decides a plan from a transcript and a budget."""
