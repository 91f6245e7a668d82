"""Test-run settings only; shared strategies and helpers live in importable modules."""

from hypothesis import HealthCheck, settings

# Shared machines are noisy: no per-example deadline; the example count keeps the gate fast.
settings.register_profile(
    "cutctx", deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("cutctx")
