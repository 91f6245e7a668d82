"""The core: values, errors, estimators, the invariants gate, plans, reports and the executor.

It imports no policy and no edge module.
"""
