"""``cutctx.formats._images``: image sizes read from real files, and the providers' rules."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from cutctx.formats import anthropic, openai_chat, openai_responses
from cutctx.formats._images import (
    ANTHROPIC_IMAGE_MAX_TOKENS,
    OPENAI_IMAGE_UNSIZED_TOKENS,
    anthropic_image_tokens,
    image_size,
    openai_image_tokens,
)
from tests.image_files import (
    ENCODINGS,
    anthropic_formula,
    exif_with_thumbnail,
    image_base64,
    image_bytes,
    openai_formula,
)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class TestImageSize:
    @pytest.mark.parametrize("encoding", ENCODINGS)
    @pytest.mark.parametrize("size", [(1, 1), (200, 100), (100, 200), (1568, 3), (3001, 2049)])
    def test_reads_the_size_of_a_real_file(self, encoding: str, size: tuple[int, int]) -> None:
        assert image_size(image_base64(encoding, *size)) == size

    @pytest.mark.parametrize(
        ("encoding", "chunk"),
        [("webp-lossy", b"VP8 "), ("webp-lossless", b"VP8L"), ("webp-alpha", b"VP8X")],
    )
    def test_the_webp_files_cover_each_chunk_layout(self, encoding: str, chunk: bytes) -> None:
        assert image_bytes(encoding, 30, 20)[12:16] == chunk

    def test_a_jpeg_frame_is_found_past_exif_with_a_thumbnail(self) -> None:
        data = image_bytes("jpeg-exif", 640, 480)
        assert data[2:4] == b"\xff\xe1"  # the decoy EXIF segment comes first
        assert exif_with_thumbnail(17, 9)[4:] in data
        assert image_size(b64(data)) == (640, 480)

    def test_a_jpeg_with_fill_bytes_before_a_marker_is_read(self) -> None:
        data = image_bytes("jpeg", 30, 40)
        assert image_size(b64(data[:2] + b"\xff\xff" + data[2:])) == (30, 40)

    def test_only_the_bytes_that_hold_the_size_are_decoded(self) -> None:
        # Everything after the frame header is invalid base64: it is never looked at.
        for encoding in ("png", "gif", "webp-lossy", "jpeg"):
            data = image_base64(encoding, 50, 60)
            assert image_size(data[:400] + "%" * 50_000) == (50, 60), encoding

    @pytest.mark.parametrize(
        "data",
        [
            "",
            "A",
            "%%%notbase64",
            b64(b"\xff\xd8\xff\xe0JFIF"),  # a JPEG cut inside its first segment
            b64(b"\xff\xd8\xff\xda\x00\x08" + bytes(40)),  # scan data before any frame
            b64(b"\xff\xd8\xff\xe0\x00\x01" + bytes(40)),  # a segment length below 2
            b64(b"\xff\xd8\x00\x00" + bytes(40)),  # not a marker
            b64(b"\xff\xd8" + b"\xff\xd0" * 300),  # no frame within the segment limit
            b64(b"\xff\xd8\xff\xd8" + bytes(40)),  # a second SOI
            b64(b"\xff\xd8\xff\xc0\x00\x11\x08"),  # a frame header cut short
            b64(b"\x89PNG\r\n\x1a\n" + bytes(22)),  # no IHDR chunk
            b64(b"RIFF\x00\x00\x00\x00WEBPVP8 " + bytes(18)),  # no VP8 start code
            b64(b"RIFF\x00\x00\x00\x00WEBPVP8L" + bytes(18)),  # no VP8L signature
            b64(b"RIFF\x00\x00\x00\x00WEBPALPH" + bytes(18)),  # an unknown first chunk
            b64(b"RIFF\x00\x00\x00\x00WEBPVP8X"),  # cut short
            b64(b"GIF89a\x00\x00\x05\x00"),  # zero width
            b64(b"BM" + bytes(40)),  # a BMP: not a provider format
        ],
    )
    def test_returns_none_when_no_size_can_be_read(self, data: str) -> None:
        assert image_size(data) is None

    def test_base64_broken_inside_a_jpeg_segment_chain_is_unreadable(self) -> None:
        data = image_base64("jpeg-exif", 64, 64)
        assert image_size(data[:40] + "\n" + data[40:]) is None

    def test_invalid_base64_where_the_next_segment_starts_is_unreadable(self) -> None:
        data = image_base64("jpeg", 64, 64)  # SOI, APP0 (18 bytes), DQT (69): a marker at 89
        assert image_size(data) == (64, 64)
        assert image_size(data[:116] + "%%%%" + data[120:]) is None  # bytes 87 to 89


class TestAnthropicImageTokens:
    @pytest.mark.parametrize("encoding", ["jpeg", "webp-lossy", "png", "gif"])
    def test_a_200_by_100_image_costs_27_in_every_encoding(self, encoding: str) -> None:
        source = {"type": "base64", "media_type": "x", "data": image_base64(encoding, 200, 100)}
        assert anthropic_image_tokens(source) == 27

    def test_large_images_are_scaled_to_the_area_limit(self) -> None:
        source = {"type": "base64", "data": image_base64("jpeg", 4000, 3000)}
        assert anthropic_image_tokens(source) == 1590 == round(anthropic_formula(4000, 3000))

    def test_a_data_url_source_is_read_and_others_cost_the_maximum(self) -> None:
        url = "data:image/png;base64," + image_base64("png", 200, 100)
        assert anthropic_image_tokens({"type": "url", "url": url}) == 27
        assert anthropic_image_tokens({"type": "url", "url": "https://x/y.png"}) == 1600
        assert anthropic_image_tokens({"type": "file", "file_id": "f"}) == 1600
        assert anthropic_image_tokens(None) == ANTHROPIC_IMAGE_MAX_TOKENS

    def test_the_format_prices_an_image_block_by_its_size(self) -> None:
        block = {
            "type": "image",
            "source": {"type": "base64", "data": image_base64("jpeg", 200, 100)},
        }
        message: dict[str, Any] = {"role": "user", "content": [block]}
        # the request's count holds the head's filler reserve, as an empty request's does
        assert anthropic.count_tokens([message]) - anthropic.count_tokens([]) == 27


class TestOpenAIImageTokens:
    @pytest.mark.parametrize("encoding", ["jpeg", "webp-lossy", "png", "gif"])
    def test_a_200_by_100_image_costs_255_in_every_encoding(self, encoding: str) -> None:
        url = "data:image/x;base64," + image_base64(encoding, 200, 100)
        assert openai_image_tokens(url, "auto") == 255
        assert openai_image_tokens(url, None) == 255
        assert openai_image_tokens(url, "low") == 85

    def test_large_images_are_scaled_before_tiling(self) -> None:
        url = "data:image/jpeg;base64," + image_base64("jpeg", 4096, 1024)
        assert openai_image_tokens(url, "high") == openai_formula(4096, 1024) == 85 + 170 * 4

    def test_an_unreadable_image_costs_the_most_the_rule_allows(self) -> None:
        assert openai_image_tokens("https://x/y.jpg", "high") == OPENAI_IMAGE_UNSIZED_TOKENS
        assert openai_formula(768, 2048) == OPENAI_IMAGE_UNSIZED_TOKENS

    def test_both_openai_formats_price_a_jpeg_by_its_size(self) -> None:
        url = "data:image/jpeg;base64," + image_base64("jpeg-exif", 200, 100)
        chat = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]
        item = {"role": "user", "content": [{"type": "input_image", "image_url": url}]}
        assert openai_chat.count_tokens(chat) == 255
        assert openai_responses.count_tokens([item]) == 255
