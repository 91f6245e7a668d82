"""The audit layer: records a plan can be re-verified from, and the reason for every action."""
