"""The one helper that writes or compares the determinism goldens (contract 5).

For every policy in ``tests.golden_cases.POLICIES``, every named case and each of its budgets
(with the policy's result cap, if it has one) it records, under
``tests/goldens/<policy name>@<version>/``:

- ``<case>__<budget>.plan.json`` — ``plan.canonical_json()``, the text the plan hash covers;
- ``<case>__<budget>.report.json`` — the canonical JSON of ``report.to_dict()`` after applying the
  plan with the summaries ``"summary of <n> turns"``;
- ``<case>__<budget>.error.json`` instead of both, when the budget is unsatisfiable: the error's
  ``code`` and ``details``.

Usage: ``python -m tests.goldens --write`` (re)writes the goldens of the *current* versions and
removes files there that no case produces any more; every other version's directory is left as it
is, so a version bump keeps the old goldens. ``python -m tests.goldens`` compares and lists the
differences. The tests compare byte for byte through ``expected_files``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cutctx import BudgetUnsatisfiable, CompactionExecutor
from tests.golden_cases import CASES, POLICIES, budgets

ROOT = Path(__file__).resolve().parent / "goldens"


def canonical(value: object) -> str:
    """Canonical JSON: sorted keys, no whitespace, non-ASCII kept, no NaN."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def expected_files() -> dict[str, str]:
    """Every golden file's path (relative to ``ROOT``, with ``/``) and its exact text."""
    files: dict[str, str] = {}
    executor = CompactionExecutor()
    for golden in POLICIES:
        directory = golden.directory
        for case, build in CASES.items():
            transcript = build()
            for budget_name, budget in budgets(transcript, golden.max_result_tokens).items():
                stem = f"{directory}/{case}__{budget_name}"
                try:
                    plan = golden.make().decide(transcript, budget)
                except BudgetUnsatisfiable as error:
                    body = {"code": error.code, "details": error.details}
                    files[f"{stem}.error.json"] = canonical(body) + "\n"
                    continue
                summaries = {
                    request.group_id: f"summary of {len(request.turn_ids)} turns"
                    for request in plan.summarization_requests
                }
                report = executor.apply(transcript, plan, summaries).report
                files[f"{stem}.plan.json"] = plan.canonical_json() + "\n"
                files[f"{stem}.report.json"] = canonical(report.to_dict()) + "\n"
    return files


def current_directories() -> set[str]:
    """The directories of the current policy versions."""
    return {golden.directory for golden in POLICIES}


def differences(root: Path = ROOT) -> list[str]:
    """Every golden that is missing, differs, or is stale in a current version's directory."""
    expected = expected_files()
    found: list[str] = []
    for name, text in sorted(expected.items()):
        path = root / name
        if not path.is_file():
            found.append(f"missing: {name}")
        elif path.read_bytes() != text.encode("utf-8"):
            found.append(f"differs: {name}")
    for directory in sorted(current_directories()):
        for path in sorted((root / directory).glob("*.json")):
            name = f"{directory}/{path.name}"
            if name not in expected:
                found.append(f"stale: {name}")
    return found


def write(root: Path = ROOT) -> int:
    """Write the current versions' goldens (and remove their stale files); return the count."""
    expected = expected_files()
    for directory in current_directories():
        for path in (root / directory).glob("*.json"):
            if f"{directory}/{path.name}" not in expected:
                path.unlink()
    for name, text in expected.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    return len(expected)


def main(argv: list[str] | None = None) -> int:
    """Write with ``--write``; otherwise compare and print the differences."""
    parser = argparse.ArgumentParser(prog="python -m tests.goldens", description=__doc__)
    parser.add_argument("--write", action="store_true", help="(re)write the current goldens")
    options = parser.parse_args(argv)
    if options.write:
        print(f"wrote {write()} golden files under {ROOT}")  # noqa: T201 - a command line
        return 0
    found = differences()
    for line in found:
        print(line)  # noqa: T201 - a command line
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
