"""Contract 5: the plans and reports of the named cases equal their goldens, byte for byte.

A difference means a policy's behaviour changed: bump its ``version`` and run
``python -m tests.goldens --write`` (the old version's goldens stay).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests import goldens
from tests.golden_cases import CASES, POLICIES

if TYPE_CHECKING:
    from pathlib import Path

EXPECTED = goldens.expected_files()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_golden_file_is_reproduced_byte_for_byte(name: str) -> None:
    path = goldens.ROOT / name
    assert path.is_file(), f"missing golden {name}: run python -m tests.goldens --write"
    assert path.read_bytes() == EXPECTED[name].encode("utf-8"), f"{name} differs"


def test_no_stale_golden_lies_in_a_current_version_directory() -> None:
    assert [line for line in goldens.differences() if line.startswith("stale")] == []


def test_every_policy_case_and_budget_kind_is_recorded() -> None:
    """The goldens cover each policy, each case, and fitting, unmet and unsatisfiable budgets."""
    directories = {name.split("/")[0] for name in EXPECTED}
    assert directories == {golden.directory for golden in POLICIES}
    assert len(directories) == 10
    cases = {name.split("/")[1].split("__")[0] for name in EXPECTED}
    assert cases == set(CASES)
    assert any(name.endswith(".error.json") for name in EXPECTED)
    assert any('"budget_unmet":true' in text for text in EXPECTED.values())
    assert any('"action":"summarize"' in text for text in EXPECTED.values())
    assert any('"action":"mask"' in text for text in EXPECTED.values())
    assert any('"action":"drop"' in text for text in EXPECTED.values())
    assert any('"action":"excerpt"' in text for text in EXPECTED.values())
    assert any('"excerpted_turn_ids":' in text for text in EXPECTED.values())


def test_the_goldens_without_a_cap_hold_no_excerpt() -> None:
    """A cap is never on by default: no policy recorded without one excerpts, nor reports it."""
    capped = {golden.directory for golden in POLICIES if golden.max_result_tokens is not None}
    assert len(capped) == 3
    for name, text in EXPECTED.items():
        if name.split("/")[0] not in capped:
            assert '"excerpt' not in text, name


def test_writing_into_an_empty_root_then_comparing_finds_no_difference(tmp_path: Path) -> None:
    assert goldens.write(tmp_path) == len(EXPECTED)
    assert goldens.differences(tmp_path) == []


def test_a_changed_golden_and_a_stale_golden_are_reported(tmp_path: Path) -> None:
    goldens.write(tmp_path)
    name = sorted(EXPECTED)[0]
    (tmp_path / name).write_text("{}\n", "utf-8")
    stale = tmp_path / name.split("/")[0] / "gone__fits.plan.json"
    stale.write_text("{}\n", "utf-8")
    assert goldens.differences(tmp_path) == [
        f"differs: {name}",
        f"stale: {stale.parent.name}/gone__fits.plan.json",
    ]


def test_writing_leaves_another_version_directory_alone(tmp_path: Path) -> None:
    old = tmp_path / "drop_oldest@0.9.0" / "kept.plan.json"
    old.parent.mkdir()
    old.write_text("old\n", "utf-8")
    goldens.write(tmp_path)
    assert old.read_text("utf-8") == "old\n"
    assert goldens.differences(tmp_path) == []
