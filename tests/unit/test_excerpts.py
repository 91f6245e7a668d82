"""The excerpt builder, its reader and recall's pages (``cutctx._core.excerpts``)."""

from __future__ import annotations

import json
import math
import random
import re

import pytest
from baseaicore import ValidationError, sha256_of

from cutctx import CharRatioEstimator, ObservationMaskingPolicy, TextEstimator
from cutctx._core.excerpts import (
    elision_line,
    excerpt,
    lines_of,
    page,
    parse_excerpt,
    priced_excerpt,
    shown_excerpt,
)

ELISION = re.compile(
    r"\[cutctx: (\d+) lines? left out \((\d+) tokens?\), sha256:([0-9a-f]{64})"
    r"(?:; call (.+) with this sha256 and start_line=(\d+) to read them)?\]"
)


def chars(text: str) -> int:
    """The character default's price."""
    return math.ceil(len(text) / 4)


def numbered(count: int, *, end: str = "\n") -> str:
    return "".join(f"line {n}{end}" for n in range(1, count + 1))


def split(made: str) -> tuple[list[str], str, list[str]]:
    """Return the head lines, the elision line and the tail lines of ``made`` (an oracle)."""
    lines = made.split("\n")
    at = [i for i, line in enumerate(lines) if ELISION.fullmatch(line)]
    assert len(at) == 1, made
    head = [line + "\n" for line in lines[: at[0]]]
    tail_lines = lines[at[0] + 1 :]
    tail = [line + "\n" for line in tail_lines[:-1]]
    if tail_lines and tail_lines[-1]:
        tail.append(tail_lines[-1])
    return head, lines[at[0]], tail


class TestLinesOf:
    @pytest.mark.parametrize(
        ("text", "lines"),
        [
            ("", []),
            ("a", ["a"]),
            ("a\n", ["a\n"]),
            ("a\nb", ["a\n", "b"]),
            ("\n\n", ["\n", "\n"]),
            ("a\r\nb\rc\u2028d\n", ["a\r\n", "b\rc\u2028d\n"]),
        ],
    )
    def test_a_line_ends_in_a_newline_and_only_there(self, text: str, lines: list[str]) -> None:
        assert lines_of(text) == lines
        assert "".join(lines_of(text)) == text


class TestExcerpt:
    def test_keeps_the_first_and_last_lines_and_one_elision_line_within_the_cap(self) -> None:
        log = numbered(100)
        made = excerpt(log, 60, chars)
        assert made is not None
        head, said, tail = split(made)
        lines = lines_of(log)
        assert head == lines[: len(head)]
        assert tail == lines[len(lines) - len(tail) :]
        assert head
        assert tail
        assert made == "".join(head) + said + "\n" + "".join(tail)
        assert chars(made) <= 60

    def test_the_elision_line_states_the_lines_tokens_and_the_stubs_digest(self) -> None:
        log = numbered(100)
        made = excerpt(log, 60, chars)
        assert made is not None
        head, said, tail = split(made)
        found = ELISION.fullmatch(said)
        assert found is not None
        kept = "".join(head) + "".join(tail)
        assert int(found.group(1)) == 100 - len(head) - len(tail)
        assert int(found.group(2)) == chars(log) - chars(kept)
        assert found.group(3) == sha256_of(log)
        assert found.group(3) in ObservationMaskingPolicy().stub(log, 999)
        assert found.group(4) is None

    def test_lines_are_taken_in_turn_head_first(self) -> None:
        log = "".join(f"{n:04d}\n" for n in range(1, 201))  # five characters a line
        # The elision line and its break (the figures keep their digits: 199 lines, 995 tokens).
        bare = len(elision_line(199, 995, "0" * 64)) + 1
        # Room for the elision line and one line: the head's; for two: one at each end.
        one = excerpt(log, bare + 5, len)
        two = excerpt(log, bare + 10, len)
        three = excerpt(log, bare + 15, len)
        assert one is not None
        assert two is not None
        assert three is not None
        assert [len(part) for part in split(one)[::2]] == [1, 0]
        assert [len(part) for part in split(two)[::2]] == [1, 1]
        assert [len(part) for part in split(three)[::2]] == [2, 1]

    def test_when_the_heads_next_line_does_not_fit_the_tail_goes_on_alone(self) -> None:
        log = "first\n" + "x" * 5000 + "\n" + numbered(50)
        made = excerpt(log, 80, chars)
        assert made is not None
        head, _, tail = split(made)
        assert head == ["first\n"]
        assert len(tail) > 2

    def test_when_the_tails_next_line_does_not_fit_the_head_goes_on_alone(self) -> None:
        log = numbered(50) + "x" * 5000 + "\nlast\n"
        made = excerpt(log, 80, chars)
        assert made is not None
        head, _, tail = split(made)
        assert tail == ["last\n"]
        assert len(head) > 2

    def test_a_single_line_over_the_cap_keeps_its_head_cut_at_a_character(self) -> None:
        line = "é" * 3000
        made = excerpt(line, 100, chars)
        assert made is not None
        cut, said = made.split("\n")
        assert cut
        assert line.startswith(cut)
        assert len(cut) < len(line)
        assert said.startswith("[cutctx: 1 line left out")
        assert chars(made) <= 100
        assert chars(made + "é") > 100 or len(cut) == len(line) - 1

    def test_a_huge_first_line_is_cut_and_the_tail_still_kept(self) -> None:
        log = "y" * 5000 + "\n" + numbered(5)
        made = excerpt(log, 100, chars)
        assert made is not None
        first, rest = made.split("\n", 1)
        assert first
        assert set(first) == {"y"}
        said, tail = rest.split("\n", 1)
        assert ELISION.fullmatch(said)
        assert log.endswith(tail)
        assert tail.startswith("line ")
        found = ELISION.fullmatch(said)
        assert found is not None
        assert int(found.group(1)) == 6 - len(lines_of(tail))  # the cut line counts as left out

    def test_a_last_line_without_a_line_break_stays_without_one(self) -> None:
        log = numbered(60) + "the end"
        made = excerpt(log, 60, chars)
        assert made is not None
        assert made.endswith("\nthe end")

    def test_carriage_returns_and_non_ascii_are_kept_verbatim(self) -> None:
        log = "".join(f"ligne {n} é中\r\n" for n in range(80))
        made = excerpt(log, 80, chars)
        assert made is not None
        head, _, tail = split(made)
        assert all(line.endswith("\r\n") for line in head + tail)
        assert log.startswith("".join(head))
        assert log.endswith("".join(tail))

    def test_the_framing_is_counted_within_the_cap(self) -> None:
        log = numbered(200)
        for framing in (0, 10, 40):
            made = excerpt(log, 80, chars, framing)
            assert made is not None
            assert framing + chars(made) <= 80
        assert len(excerpt(log, 80, chars, 40) or "") < len(excerpt(log, 80, chars) or "")

    def test_any_price_function_is_honoured(self) -> None:
        def words(text: str) -> int:  # a tokenizer's shape: a framing of 3 plus a word each
            return 3 + len(text.split())

        log = "".join(f"alpha beta gamma {n}\n" for n in range(300))
        made = excerpt(log, 60, words)
        assert made is not None
        assert words(made) <= 60
        found = ELISION.search(made)
        assert found is not None
        head, _, tail = split(made)
        assert int(found.group(2)) == words(log) - words("".join(head) + "".join(tail))

    def test_with_a_recall_tool_it_says_how_to_read_the_rest(self) -> None:
        log = numbered(100)
        made = excerpt(log, 100, chars, recall_tool="cutctx_recall")
        assert made is not None
        head, said, _ = split(made)
        found = ELISION.fullmatch(said)
        assert found is not None
        assert found.group(4) == "cutctx_recall"
        assert int(found.group(5)) == len(head) + 1
        assert "cutctx_recall" not in (excerpt(log, 100, chars) or "")

    @pytest.mark.parametrize("tool", ["", "  ", "two\nlines", 3])
    def test_a_recall_tool_that_is_not_a_name_on_one_line_is_refused(self, tool: object) -> None:
        with pytest.raises(ValidationError) as caught:
            excerpt(numbered(10), 5, chars, recall_tool=tool)  # type: ignore[arg-type]
        assert caught.value.details["field"] == "excerpt.recall_tool"

    def test_a_text_that_fits_whole_has_no_excerpt(self) -> None:
        assert excerpt(numbered(3), 100, chars) is None
        assert excerpt(numbered(3), 10, chars, framing=-100) is None

    def test_no_excerpt_when_not_even_the_elision_line_fits(self) -> None:
        assert excerpt(numbered(100), 20, chars) is None
        assert excerpt(numbered(100), 200, chars, framing=190) is None

    def test_the_empty_text_has_no_excerpt(self) -> None:
        assert excerpt("", 0, lambda _: 5) is None

    def test_is_deterministic(self) -> None:
        log = numbered(500)
        assert excerpt(log, 90, chars) == excerpt(log, 90, chars)

    @pytest.mark.parametrize("indent", [2, None], ids=["indented", "one-line"])
    @pytest.mark.parametrize("cap", [2_000, 8_000, 20_000])
    def test_a_quick_excerpt_prices_each_candidate_once_and_few(
        self, indent: int | None, cap: int
    ) -> None:
        """A window's excerpt: besides the original, what is priced is the original read in
        pieces up to the excerpt's size and one or two whole candidates, under 3.5 times the
        excerpt, whatever its shape (a JSON result on one line is cut at one of 1024 places)."""
        rng = random.Random(7)
        rows = [
            {"id": n, "name": f"w{rng.randrange(10**6)}", "ok": n % 3 == 0} for n in range(3000)
        ]
        text = json.dumps(rows, indent=indent)
        priced: list[int] = []

        def counted(piece: str) -> int:
            priced.append(len(piece))
            return TextEstimator().estimate_tokens(piece)

        made = priced_excerpt(text, cap, counted, quick=True)
        assert made is not None
        assert made[1] <= cap
        assert priced.count(len(text)) == 1
        assert sum(priced) - len(text) <= 3.5 * len(made[0])

    def test_a_quick_excerpt_cuts_a_long_line_at_one_of_1024_places_within_1_percent(
        self,
    ) -> None:
        line = "é" * 30_000
        made = priced_excerpt(line, 2_000, chars, quick=True)
        assert made is not None
        cut, said = made[0].split("\n")
        assert line.startswith(cut)
        assert len(cut) % (30_000 // 1024) == 0
        assert said.startswith("[cutctx: 1 line left out")
        assert 2_000 - 2_000 // 128 <= made[1] == chars(made[0]) <= 2_000

    def test_prices_texts_near_the_excerpts_size_however_long_the_original(self) -> None:
        """The search gallops from the ends: besides the original itself, no text priced is
        much longer than the excerpt, and the number priced grows with its logarithm."""
        log = numbered(100_000)
        priced: list[int] = []

        def counted(text: str) -> int:
            priced.append(len(text))
            return chars(text)

        made = excerpt(log, 500, counted)
        assert made is not None
        assert priced[0] == len(log)
        assert max(priced[1:]) <= 3 * len(made)
        assert len(priced) < 120


class TestParseExcerpt:
    def test_reads_back_what_excerpt_kept(self) -> None:
        log = numbered(100)
        made = excerpt(log, 100, chars, recall_tool="recall")
        assert made is not None
        read = parse_excerpt(log, made)
        assert read is not None
        head, said, tail = split(made)
        assert (read.head, read.cut, read.tail) == (len(head), 0, len(tail))
        assert read.left_lines == 100 - len(head) - len(tail)
        assert (read.digest, read.recall_tool, read.start_line) == (
            sha256_of(log),
            "recall",
            len(head) + 1,
        )
        assert str(read.left_tokens) in said

    def test_reads_back_a_cut_head(self) -> None:
        line = "z" * 3000
        made = excerpt(line, 100, chars)
        assert made is not None
        read = parse_excerpt(line, made)
        assert read is not None
        assert (read.head, read.tail, read.left_lines) == (0, 0, 1)
        assert read.cut == len(made.split("\n")[0])

    def test_an_original_line_that_looks_like_an_elision_line_is_read_as_a_kept_line(
        self,
    ) -> None:
        decoy = elision_line(3, 4, "a" * 64) + "\n"
        log = decoy + numbered(100)
        made = excerpt(log, 100, chars)
        assert made is not None
        assert made.startswith(decoy)
        read = parse_excerpt(log, made)
        assert read is not None
        assert read.head >= 1
        assert read.digest == sha256_of(log)

    @pytest.mark.parametrize(
        "edit",
        [
            lambda made: made.replace("line 1\n", "line one\n", 1),
            lambda made: made.replace("line 100\n", "line C\n"),
            lambda made: made.replace("lines left out", "lines gone"),
            lambda made: re.sub(r"\[cutctx: \d+", "[cutctx: 5", made),
            lambda made: re.sub(r"start_line=\d+", "start_line=99", made),
            lambda made: made.replace("line 2\n", "", 1),
            lambda made: made.replace("]\n", "]\n\n"),
            lambda made: made[: made.index("]") + 1] + "\n",
            lambda made: made.split("\n", 1)[1],
            lambda made: "line 0\n" + made,
            lambda made: made + "line 101\n",
        ],
        ids=[
            "edited head",
            "edited tail",
            "wrong wording",
            "wrong line count",
            "wrong start line",
            "a head line skipped",
            "a blank line added",
            "a line break without a tail",
            "head shifted",
            "a line before the head",
            "a line after the tail",
        ],
    )
    def test_anything_but_a_true_excerpt_is_refused(self, edit: object) -> None:
        log = numbered(100)
        made = excerpt(log, 100, chars, recall_tool="recall")
        assert made is not None
        assert callable(edit)
        assert parse_excerpt(log, edit(made)) is None

    def test_text_without_an_elision_line_or_leaving_nothing_out_is_refused(self) -> None:
        log = numbered(5)
        assert parse_excerpt(log, log) is None
        assert parse_excerpt(log, "line 1\n") is None
        whole = "".join(lines_of(log)[:2]) + elision_line(0, 0, "0" * 64) + "\n"
        assert parse_excerpt(log, whole + "".join(lines_of(log)[2:])) is None

    def test_a_cut_must_be_a_strict_head_of_the_first_line_only(self) -> None:
        log = "abcdef\n" + numbered(3)
        said = elision_line(4, 9, "0" * 64)
        assert parse_excerpt(log, "abc\n" + said) is not None
        assert parse_excerpt(log, "abcdef\n" + said) is None  # a whole line, not a cut
        assert parse_excerpt(log, "abx\n" + said) is None
        assert parse_excerpt(log, "abcdef\nli\n" + elision_line(3, 9, "0" * 64)) is None
        # A true cut head, but a tail that is not the original's last lines.
        assert parse_excerpt(log, "abc\n" + elision_line(3, 9, "0" * 64) + "\nline 9\n") is None


class TestShownExcerpt:
    """The excerpt of a result read as several parts, with the parts not shown left out."""

    def test_parts_of_several_lines_keep_their_kept_lines_in_order(self) -> None:
        # A text block, an image read as its label line, a text block.
        parts = [numbered(3, end="\n").removesuffix("\n"), "[image]", numbered(200)]
        made = excerpt("\n".join(parts), 100, chars)
        assert made is not None
        assert made.startswith("line 1\nline 2\nline 3\n[image]\nline 1\n")
        sent = shown_excerpt(parts, [True, False, True], made)
        assert sent == made.replace("[image]\n", "", 1)

    def test_a_part_left_out_at_either_end_takes_its_line_break_with_it(self) -> None:
        text = numbered(200).removesuffix("\n")
        for parts, shown in (
            ([text, "[image]"], [True, False]),
            (["[image]", text], [False, True]),
        ):
            made = excerpt("\n".join(parts), 100, chars)
            assert made is not None
            sent = shown_excerpt(parts, shown, made)
            head, said, tail = split(sent)
            assert "".join(head) == "".join(lines_of(text)[: len(head)])
            assert "".join(tail) == "".join(lines_of(text)[len(lines_of(text)) - len(tail) :])
            assert said == split(made)[1]

    def test_a_cut_head_of_a_part_left_out_is_left_out(self) -> None:
        parts = ["<" + "x" * 3000 + ">", "end"]
        made = excerpt("\n".join(parts), 100, chars)
        assert made is not None
        assert parse_excerpt("\n".join(parts), made).cut > 0  # type: ignore[union-attr]
        sent = shown_excerpt(parts, [False, True], made)
        assert not sent.startswith("<")
        assert sent.endswith("]\nend")

    def test_when_every_part_is_shown_it_is_the_excerpt(self) -> None:
        parts = [numbered(50).removesuffix("\n"), numbered(50)]
        made = excerpt("\n".join(parts), 100, chars)
        assert made is not None
        assert shown_excerpt(parts, [True, True], made) == made

    def test_a_text_that_is_no_excerpt_of_the_parts_is_refused(self) -> None:
        with pytest.raises(ValueError, match="no excerpt of the parts"):
            shown_excerpt(["a", "b"], [True, False], "a\nb")


class TestPage:
    def test_a_page_that_holds_the_rest_has_no_hint(self) -> None:
        log = numbered(10)
        assert page(log, 1, 1000, chars) == log
        assert page(log, 4, 1000, chars) == "".join(lines_of(log)[3:])

    def test_a_page_ends_with_one_hint_line_when_lines_remain(self) -> None:
        log = numbered(100)
        made = page(log, 11, 40, chars)
        body, hint = made.rsplit("\n", 1)
        last = 10 + body.count("\n") + 1
        assert (
            hint == f"[cutctx_recall: lines 11-{last} of 100; continue with start_line={last + 1}]"
        )
        assert body + "\n" == "".join(lines_of(log)[10:last])
        assert chars(made) <= 40

    def test_a_page_always_holds_one_whole_line_even_over_the_limit(self) -> None:
        log = "x" * 400 + "\n" + "short\n"
        made = page(log, 1, 5, chars)
        assert made == "x" * 400 + "\n[cutctx_recall: lines 1-1 of 2; continue with start_line=2]"
        assert page(log, 2, 1, chars) == "short\n"

    def test_the_last_line_keeps_its_missing_line_break(self) -> None:
        assert page("a\nb", 2, 10, chars) == "b"

    @pytest.mark.parametrize(
        ("start", "limit", "said"),
        [
            (0, 10, "start_line must be an integer of at least 1, got 0"),
            (-2, 10, "start_line must be an integer of at least 1, got -2"),
            ("3", 10, "start_line must be an integer of at least 1, got '3'"),
            (1.0, 10, "start_line must be an integer of at least 1, got 1.0"),
            (True, 10, "start_line must be an integer of at least 1, got True"),
            (None, 10, "start_line must be an integer of at least 1, got None"),
            (4, 10, "start_line 4 is past the end: the text has 3 lines"),
            (1, 0, "max_tokens must be an integer of at least 1, got 0"),
            (1, "many", "max_tokens must be an integer of at least 1, got 'many'"),
        ],
    )
    def test_a_bad_argument_gives_back_a_one_line_explanation(
        self, start: object, limit: object, said: str
    ) -> None:
        assert page("a\nb\nc\n", start, limit, chars) == f"[cutctx_recall: {said}]"

    def test_an_explanation_is_one_short_line_whatever_the_argument(self) -> None:
        made = page("a\n", "x\n" * 100, 10, chars)
        assert "\n" not in made
        assert len(made) < 120

    def test_the_empty_text_has_no_line_to_page(self) -> None:
        assert page("", 1, 10, chars) == (
            "[cutctx_recall: start_line 1 is past the end: the text has 0 lines]"
        )
        assert page("x", 2, 10, chars).endswith("the text has 1 line]")

    def test_pages_price_the_hint_with_the_characters_default(self) -> None:
        log = numbered(1000)
        estimator = CharRatioEstimator()
        made = page(log, 1, 300, estimator.estimate_tokens)
        assert estimator.estimate_tokens(made) <= 300
        # One more line would not have fitted with its hint.
        count = made.count("\n")
        longer = "".join(lines_of(log)[: count + 1]) + (
            f"[cutctx_recall: lines 1-{count + 1} of 1000; continue with start_line={count + 2}]"
        )
        assert estimator.estimate_tokens(longer) > 300
