"""The ``plan --html`` page laid out by a real browser: headless Chromium measures its strip.

The page is written by the console script; a copy of it gets a small script that writes each
block's measured width into the document, and ``chromium --headless --dump-dom`` prints the
document after layout. A screenshot is left beside it for a person to look at. Chromium is the
Debian package ``chromium`` (``.ci/run`` installs it); without it this test fails, saying so.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from typing import TYPE_CHECKING, Any

from cutctx._cli.page import BAND_SHARE
from tests.cli.test_console_script import cutctx
from tests.cli_cases import long_session, write_json

if TYPE_CHECKING:
    from pathlib import Path

VIEWPORT = (1280, 900)

MEASURE = """<script>
const strip = document.querySelector('.strip').getBoundingClientRect();
const turns = [...document.querySelectorAll('.turn')].map(block => ({
  id: block.querySelector('b') ? block.querySelector('b').textContent : block.title.split(' ')[0],
  tokens: Number(block.dataset.tokens),
  width: block.getBoundingClientRect().width,
  banded: block.closest('.band') !== null,
}));
const bands = [...document.querySelectorAll('.band')].map(band => ({
  turns: band.querySelectorAll('.turn').length,
  width: band.getBoundingClientRect().width,
}));
const measured = {
  viewport: window.innerWidth, page: document.documentElement.scrollWidth,
  strip: strip.width, stripRight: strip.right,
  pieces: document.querySelector('.strip').children.length, turns, bands,
};
document.body.textContent = 'MEASURED' + JSON.stringify(measured) + 'END';
</script>"""


def chromium() -> str:
    """The system's Chromium (the Debian package), which the gate installs."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("headless Chromium is needed: apt-get install -y chromium")


def browse(page: Path, *flags: str) -> str:
    done = subprocess.run(  # noqa: S603 - the system browser on our own page
        [
            chromium(),
            "--headless",
            "--no-sandbox",  # as root (CI), Chromium refuses to start with its sandbox
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}",
            *flags,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class TestHtmlInABrowser:
    def test_a_long_conversations_strip_fits_and_its_widths_compare_as_tokens_do(
        self, tmp_path: Path
    ) -> None:
        """400 turns: the strip fits the page, widths follow tokens, small turns fold in bands."""
        path = write_json(tmp_path / "long.json", long_session())
        page = tmp_path / "long.html"
        done = cutctx("plan", str(path), "--max-tokens", "200000", "--html", str(page))
        assert done.returncode == 0, done.stderr
        browse(page, f"--screenshot={tmp_path / 'long.png'}")
        measuring = tmp_path / "measured.html"
        measuring.write_text(
            page.read_text("utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8"
        )
        dom = browse(measuring, "--virtual-time-budget=5000", "--dump-dom")
        found = re.search(r"MEASURED(.*)END", dom)
        assert found is not None, dom[-2000:]
        measured: dict[str, Any] = json.loads(found.group(1))
        turns = measured["turns"]
        widths = {turn["id"]: turn["width"] for turn in turns}
        assert len(turns) == 402
        assert measured["strip"] <= measured["viewport"]
        assert measured["stripRight"] <= measured["viewport"]
        assert measured["page"] <= measured["viewport"]  # nothing scrolls sideways
        # Widths are monotone in tokens (to a pixel: the narrowest band is drawn at its minimum).
        ordered = sorted(turns, key=lambda turn: turn["tokens"])
        assert all(
            later["width"] >= earlier["width"] - 1 for earlier, later in itertools.pairwise(ordered)
        )
        assert widths["m103"] > 50 * max(widths["m243"], 1)  # 125 000 tokens against 1 000
        assert widths["m103"] > measured["strip"] / 3
        # Few pieces, and the small turns are readable bands of many turns each.
        assert measured["pieces"] <= 2 / BAND_SHARE + 1
        assert max(band["turns"] for band in measured["bands"]) >= 100
        assert max(band["width"] for band in measured["bands"]) >= 200
        assert sum(turn["banded"] for turn in turns) >= 300
