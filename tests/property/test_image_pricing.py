"""Images are priced from their pixels: for every size and every encoding, a real file made
by Pillow is priced within 10 % of the provider's formula (computed here, independently).

Would catch: a header layout read wrongly or not at all (an image priced at the maximum, or at
another image's size, such as an EXIF thumbnail's), a scaling rule applied in the wrong order.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cutctx.formats._images import anthropic_image_tokens, image_size, openai_image_tokens
from tests.image_files import ENCODINGS, anthropic_formula, image_base64, openai_formula


@st.composite
def sizes(draw: st.DrawFn) -> tuple[int, int]:
    """Widths and heights from 1 to 5000 px, at most 4 megapixels (so files stay quick)."""
    width = draw(st.integers(1, 5000))
    height = draw(st.integers(1, min(5000, 4_000_000 // width)))
    return width, height


@given(encoding=st.sampled_from(ENCODINGS), size=sizes())
def test_every_encoding_and_size_is_priced_within_ten_percent_of_the_formula(
    encoding: str, size: tuple[int, int]
) -> None:
    """The size is read exactly, and both providers' prices are within 10 % of their formulas
    (Anthropic's within 10 % or the one token that rounding up adds)."""
    width, height = size
    data = image_base64(encoding, width, height)
    assert image_size(data) == (width, height)

    anthropic = anthropic_image_tokens({"type": "base64", "data": data})
    expected = anthropic_formula(width, height)
    assert abs(anthropic - expected) <= max(0.1 * expected, 1.0)
    assert anthropic >= expected  # rounded up, never under

    url = "data:image/png;base64," + data
    for detail in ("high", "auto", "low"):
        openai = openai_image_tokens(url, detail)
        assert abs(openai - openai_formula(width, height, detail)) <= 0.1 * openai
