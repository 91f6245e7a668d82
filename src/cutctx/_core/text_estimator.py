"""``TextEstimator``: a model-free estimate of a BPE tokenizer's count, from the text's structure.

A BPE tokenizer (cl100k_base, o200k_base) first splits text into pieces — a word with its leading
space, up to three digits, a run of punctuation, a run of whitespace — and then encodes each piece
as one or more tokens: a common English word is one token, a rare Han character three, a base64
run one token for every character or so. ``TextEstimator`` counts the pieces of each class with
compiled regular expressions (one C-speed pass a class, no Python loop over the text) and prices
every class by a rule of its own: so many tokens a piece plus so many a character.

The rules, the constants below, were fitted against cl100k_base on a varied corpus and raised
by a tenth, so that the estimate lands a little *above* the real count on every class of text (under
is the dangerous side: a request over the window); docs/design.md has the accuracy table and
``benchmarks/estimator.py`` reproduces it. A change of any rule bumps ``TextEstimator.version``,
and the rules of every earlier version stay (``_estimate_1``), so a record or a saved window
state that names one is recounted by the rules that made it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final, NamedTuple

from baseaicore import ValidationError

from cutctx._core.priced import priced_once

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["TextEstimator"]

# Han, kana and Hangul characters that cl100k_base holds as one token each; the rest of those
# scripts costs two or three tokens a character.
_CJK_ONE = (
    "一万三上下不与专业东两个中串为主么义之也书了事二于五些交产享京人亿今介从他付代以们件价任份企优会传但位体何余作你使例供価保信修倍值停像元先入全公共关其具内円册再"
    "写出击分列则初利别到制前力功加务动動包化北区十午华单南即历原去县参及友反发取变口只可台右号司合同名后向否含听启告员周命和品哈商問器四回因国图土在地场址型城基報場"
    "填增声处备复外多大天失头女好如始子字存学安宋完定实审客家容密对导将小少尔就局展山岁州工左已市布常平年并广序库应店度建开异式引张当录形影径待後得微心必志态思性总息"
    "您情意感成我或户所手打找技投报拉持指按换据排接推提播支收改放政效数整文料断新方族无日时明易星是時景更最月有服期木未本机权束条来板构析果查标样核格案检模次款止正此"
    "步歳段每比民気水求江汽没治法注活流海消清游源火点無然片版物特率环现球理生用由电男画界番登的监目直相省看県真知码确示社票私种科秒称移程稍税稿空立站章端笑符第等签简"
    "算管箱米类系素索约级线组经结给络统编网置美老考者而联能自至色节英藏行表装西要見见规视角解言計記話読计认议记论设证评试话询该详语误说请读调象责败账货购费资起超路身"
    "车转软载辑输达过运近还这进连述退送选通速造連道邮部都配释里重量金钟钮链销错键长開間関门闭问间队阳陆限院除雅集雷需非面音页项预频题额首验高黑あいうえおかがきくけこ"
    "ごさざしじすせそただちっつてでとどなにのはばまみめもやよらりるれろわをんアィイウェエオカキクグコサシジスズセタダチッテデトドナニバパビピフブプペポマムメャュョラ"
    "リルレロン・ー"
)
_HANGUL_ONE = (
    "가간값개거게결경고공과구그글기나내는능니다당대도동되된드든들디라래러력로록료류른를름리만메면명목문미버번보복부분비사산상색생서성세션소수스습시식신아야어에여열오"
    "와요용우운원위으은을음의이인일임입자작장재적전정제져조주지진째체출치크태터턴트튼하한할함해호화환회"
)

# Hex and base64 runs, priced as a whole and taken out of the text before the passes below.
_RUNS = re.compile(
    r"([0-9a-fA-F](?<![0-9a-fA-F]{2})[0-9a-fA-F]{15,})(?![G-Zg-z+])"  # digests, ids, keys
    r"|([A-Za-z0-9+](?<![A-Za-z0-9+]{2})[A-Za-z0-9+]{23,}={0,2})"  # "/" would take in paths
)
_SCRIPTS = (  # only for a text that is not ASCII
    re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+"),  # Han, kana
    re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]+"),  # Hangul
    re.compile(r"[\u0400-\u04ff]+"),  # Cyrillic
    re.compile(r"[\u0600-\u06ff\u0750-\u077f]+"),  # Arabic
    re.compile(r"[\u0900-\u0dff]+"),  # Devanagari and the other Indic scripts
    re.compile(r"[\u200d\u2600-\u27bf\ufe0f\U0001f000-\U0001faff]+"),  # emoji
    re.compile(r"[^\W_A-Za-z0-9]+"),  # letters of any other script, accented ones
)
# A run needs 16 letters, digits or "+" in a row: ``_ALNUM`` turns each into "x" in the text's
# UTF-8 bytes (every byte of another character is 0x80 or above), so one substring search says
# whether the run pass is needed at all — in most prose and code it is not.
_ALNUM = bytes.maketrans(
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+", b"x" * 63
)
_SIXTEEN = b"x" * 16
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CJK_COMMON = re.compile(f"[{_CJK_ONE}]")
_HANGUL = re.compile(r"[\uac00-\ud7af]")
_HANGUL_COMMON = re.compile(f"[{_HANGUL_ONE}]")
# Each word becomes "a" and each digit piece "0": the later passes read a shorter text.
_WORDS = re.compile(r"[A-Za-z]+")
_DIGITS = re.compile(r"[0-9]{1,3}")  # three at most a piece, as the tokenizer takes them
_SPACED_DIGITS = re.compile(r" (?=0)")  # a space before digits is a piece of its own
_PUNCTUATION = re.compile(r"[^\s\w]+")
_TAKEN_IN = re.compile(r"[^\s\w](?<=[\w\n].)(?=a)")  # a mark its word takes in: 's .x (x
_INDENTED = re.compile(r"\n[ \t]+")

# (tokens a piece, tokens a character): hex and base64 runs; the scripts, in _SCRIPTS's order.
_HEX_RULE, _BASE64_RULE = (0.9, 0.61), (2.6, 0.79)
_SCRIPT_RULES = (
    (0.0, 0.92),
    (0.0, 0.6),
    (1.12, 0.384),
    (1.44, 0.62),
    (0.75, 1.18),
    (1.43, 2.81),
    (0.88, 0.77),
)
_RARE_CJK, _RARE_HANGUL = 1.5, 2.4  # added for each character outside the one-token sets
_WORD_RULE, _DIGIT_RULE = (1.045, 0.012), (1.1, 0.067)
_SPACED_DIGIT, _PUNCTUATION_RULE, _TAKEN_IN_MARK = 1.48, (0.877, 0.074), 0.4
_LINE_BREAK, _INDENTED_RULE = 0.55, (0.48, 0.022)
_GAP_RULE, _RETURN = 1.0, 1.0


# Version 2 adds, before the passes above: runs of one character (a separator line, a mask of
# x's, a progress bar), priced by how many of that character cl100k_base merges into one token;
# and, after the script passes, every other character outside ASCII (box drawing, arrows, block
# and braille characters, math symbols), priced by the tokens cl100k_base spends on it alone.
# Runs of a mark (and the few symbols cl100k_base merges) are looked for in every text; runs of a
# letter or digit only in a text with 16 in a row (the probe below), where they are long enough
# to matter: a shorter one is priced as a word.
_REPEATED = re.compile(  # "\1\1\1\1\1+" written out: the regex engine tries it faster
    r"([!-/:-@\[-`{-~\t\n\u2500\u2501\u2550\u2588\u2013\u2014\u2026\u00b7\u2605])\1\1\1\1\1+"
)
_REPEATED_ALNUM = re.compile(r"([A-Za-z0-9])\1\1\1\1\1+")
_PER_RUN_CHAR = {  # tokens a character of a long run of it: 1 / (characters a token)
    **dict.fromkeys("#%*-./_=", 1 / 64),
    **dict.fromkeys("+~\n\t", 1 / 32),
    **dict.fromkeys(";\u2014", 1 / 16),
    **dict.fromkeys("afoxAFX!,:<>\u2500\u2026", 1 / 8),
    **dict.fromkeys("bcdeyBCELMY$()?@\\^|\u2588", 1 / 4),
    **dict.fromkeys("0123456789", 1 / 3),
}
_RUN_FIRST, _RUN_FIRST_DIGIT = 1.0, 0.0  # a run's first token; digits pack three a token
_RUN_OTHER = 1 / 2  # other letters and marks: two of them a token
_RUN_RAISE = 1.1
# Characters of no script and not ASCII, after the script passes: two tokens each, one for those
# cl100k_base holds as one token, three for those in blocks whose UTF-8 lead bytes it lacks.
_SYMBOL = re.compile(r"[^\x00-\x7f\w\s]")
_SYMBOL_ONE = re.compile(
    "[\xa1-\xa9\xab\xac\xae\xaf\xb0\xb1\xb4\xb6\xb7\xbb\xbf\xd7\u2010\u2011\u2013-\u2015"
    "\u2018\u2019\u201a\u201c-\u201e\u2020\u2022\u2026\u2030\u2032\u2033\u203a\u203b\u20ac\u2122"
    "\u2190-\u2193\u2212\u2500-\u2502\u2550\u2551\u2557\u255d\u2588\u2591\u25a0\u25ba\u25cf"
    "\u2605\u2606\u2640\u2665\u266a\u2714\u27e9\u3001\u3002\u300a-\u3011\u301c\uff01\uff08"
    "\uff09\uff0c-\uff0f\uff1a\uff1b\uff1e\uff1f\uff3e\uff5e\uff65\uffe5]"
)
_SYMBOL_THREE = re.compile(
    "[\u21c0-\u21ff\u2280-\u243f\u2480-\u24ff\u2680-\u26ff\u2801-\u2bff\u2e00-\u2fff"
    "\u3190-\u33ff\u4dc0-\u4dff\ua480-\ua4ff\U00010000-\U0010ffff]"
)
_SYMBOL_HALF = re.compile("[\u2500\u2501\u2550]")  # a line's piece: two of them one token
_SYMBOL_RULE = 1.1  # a token of the symbols' count
# Pairs the count above misprices: " ├" and " ├──" (a tree's branch after its space) are one
# token each, " ║" (a double rule after its space) three.
_BRANCH, _LONG_BRANCH, _DOUBLE_RULE = " \u251c", " \u251c\u2500\u2500", " \u2551"
_SCRIPTS_2 = (
    *_SCRIPTS[:5],
    re.compile(r"[\u0370-\u03ff\u0590-\u05ff\u1f00-\u1fff\ufb1d-\ufb4f]+"),  # Greek, Hebrew
    re.compile(r"[\u200d\ufe0f\U0001f000-\U0001faff]+"),  # emoji; the symbols of U+2600-27BF below
    re.compile(r"[\u1d00-\u1dbf\u2070-\u209f]+"),  # small letters and digits: x\u1d62, 2\u207f
    _SCRIPTS[6],
)
_SCRIPT_RULES_2 = (
    *_SCRIPT_RULES[:5],
    (1.15, 1.0),
    _SCRIPT_RULES[5],
    (0.0, 2.6),
    _SCRIPT_RULES[6],
)
_SPACES = re.compile(r"  +")  # two spaces or more: a piece of their own, when they align columns


class _Name:
    """``TextEstimator.name``: on the class, the current rules' name; on an estimator, its own."""

    def __get__(self, instance: TextEstimator | None, owner: type[TextEstimator]) -> str:
        return f"text/{owner.version if instance is None else instance.version}"


@dataclass(frozen=True)
class TextEstimator:
    """Estimates a BPE tokenizer's count (cl100k_base) from the text's structure; no model.

    The text's pieces are counted as a tokenizer splits it — words, digit runs, punctuation,
    line breaks, runs of one script (Han and kana, Hangul, Cyrillic, Arabic, Indic, Hebrew,
    Greek), emoji, hex and base64 runs, runs of one repeated character, symbols such as box
    drawing and braille — and each class is priced by a rule of its own. Pure Python,
    deterministic, about as fast as tiktoken's ``encode``. Per text of 200 tokens or more it
    lands within 0.9 to 1.3 times cl100k_base on every class of text docs/design.md lists, about
    1.1 times on most; pass a real tokenizer (``estimator="cl100k_base"``) where the count must
    be exact.

    ``name`` (``"text/2"``) is recorded on every plan whose figures it produced; ``version``
    (part of the name) changes whenever a rule does. ``TextEstimator(version="1")`` counts by
    the rules of version 1, for a record or a saved window state that names ``"text/1"``.

    >>> TextEstimator().estimate_tokens("The quick brown fox jumps over the lazy dog.")
    11

    Raises:
        ValidationError: for a ``version`` that is not one of ``TextEstimator.versions``.

    .. versionadded:: 0.1.1
    .. versionchanged:: 0.1.1
       Version 2 of the rules (runs of one character, symbols, Hebrew and Greek); ``version``
       is a field, and ``"1"`` keeps the earlier rules.
    """

    version: str = "2"
    name: ClassVar[_Name] = _Name()
    versions: ClassVar[tuple[str, ...]] = ("1", "2")

    def __post_init__(self) -> None:
        if self.version not in self.versions:
            raise ValidationError(
                f"TextEstimator.version must be one of {', '.join(self.versions)}, "
                f"got {self.version!r}",
                details={"field": "TextEstimator.version"},
            )

    def estimate_tokens(self, text: str) -> int:
        """Return the estimated token count of ``text`` (0 for the empty text)."""
        return priced_once(self, text, _estimate_1 if self.version == "1" else _estimate_2)


def _estimate_1(text: str) -> int:
    """Return the estimate of ``text`` by the rules of version 1 (kept as they were)."""
    total = 0.0
    probe = text.encode("utf-8", "surrogatepass").translate(_ALNUM)
    runs = _RUNS.findall(text) if _SIXTEEN in probe else None
    text, total = _runs_and_scripts(text, total, runs, _SCRIPTS, _SCRIPT_RULES)
    return max(0, math.ceil(_ascii(text, total)))


def _runs_and_scripts(
    text: str,
    total: float,
    runs: list[tuple[str, str]] | None,
    scripts: tuple[re.Pattern[str], ...],
    rules: tuple[tuple[float, float], ...],
) -> tuple[str, float]:
    """Return ``text`` without its priced pieces, and ``total`` with their prices added.

    The pieces: the hex and base64 ``runs`` found in it, its rare CJK and Hangul characters, and
    the runs of each of ``scripts`` (each priced by its rule in ``rules``). Both versions' rules
    share this part; version 2 then prices symbols.
    """
    if runs:
        hexes, base64s = zip(*runs, strict=True)
        total += _price(_HEX_RULE, hexes) + _price(_BASE64_RULE, base64s)
        text = _RUNS.sub(" ", text)
    if not text.isascii():
        rare = _CJK.subn("", text)[1] - _CJK_COMMON.subn("", text)[1]
        rare_hangul = _HANGUL.subn("", text)[1] - _HANGUL_COMMON.subn("", text)[1]
        total += _RARE_CJK * rare + _RARE_HANGUL * rare_hangul
        for pattern, (per_piece, per_char) in zip(scripts, rules, strict=True):
            rest, pieces = pattern.subn(" ", text)
            total += per_piece * pieces + per_char * (len(text) - len(rest) + pieces)
            text = rest
    return text, total


_LONG: Final = 32_768
"""Characters over which version 2 counts a text in pieces (``_pieces``)."""
_PIECE_SIZE: Final = 16_384
"""About how long each piece of a long text is."""


def _estimate_2(text: str) -> int:
    """Return the estimate of ``text`` by the rules of version 2.

    A text over ``_LONG`` characters is counted in pieces (``_pieces``) and the pieces' figures
    added before rounding up: the same estimate, while no one regular-expression call holds the
    interpreter over the whole text (a thread counting a long text lets the others run).
    """
    if len(text) <= _LONG:
        marked = _Marked.of(text)
        return max(0, math.ceil(marked.total_of(alnum=marked.alnum)))
    pieces = [_Marked.of(piece) for piece in _pieces(text, _PIECE_SIZE)]
    alnum = any(piece.alnum for piece in pieces)  # a 16-run never spans a cut (a line break)
    total = math.fsum(piece.total_of(alnum=alnum) for piece in pieces)
    return max(0, math.ceil(round(total, 6)))


def _pieces(text: str, size: int) -> Iterator[str]:
    r"""Yield ``text`` cut into pieces of about ``size`` characters that version 2 counts apart.

    A cut is made just before a line break that does not follow a line break, a carriage return
    or the end of a run of six or more of one character: no pattern of version 2, nor a
    look-around, nor a count of two characters (``"\n\n"``, ``"\r\n"``, a run's ``"\r"``
    before a line break) spans it. A piece with no such place after ``size`` characters goes on.
    """
    start, length = 0, len(text)
    while length - start > size:
        cut = text.find("\n", start + size)
        while cut != -1 and (text[cut - 1] in "\n\r" or text[cut - 6 : cut] == text[cut - 1] * 6):
            cut = text.find("\n", cut + 1)
        if cut == -1:
            break
        yield text[start:cut]
        start = cut
    yield text[start:]


class _Runs:
    """Prices the runs of one character a pass replaces (each by a carriage return), summed."""

    __slots__ = ("total",)

    def __init__(self, total: float = 0.0) -> None:
        self.total = total

    def __call__(self, match: re.Match[str]) -> str:
        char = match.group(1)
        length = match.end() - match.start()
        per_char = _PER_RUN_CHAR.get(char, _RUN_OTHER)
        first = _RUN_FIRST_DIGIT if char.isdigit() else _RUN_FIRST
        self.total += first + per_char * length * _RUN_RAISE
        return "\r"  # splits the pieces around it, and no later pass prices it


class _Marked(NamedTuple):
    """A text after version 2's first passes (runs of marks, returns, column gaps)."""

    text: str
    total: float  # the returns' and the gaps' figure
    runs: float  # the runs' figure so far
    alnum: bool  # whether it holds 16 letters or digits in a row

    @classmethod
    def of(cls, text: str) -> _Marked:
        runs = _Runs()
        returns = text.count("\r")  # a piece of its own, but for "\r\n" (one, with its break)
        text = _REPEATED.sub(runs, text)
        total = _RETURN * (returns - text.count("\r\n"))
        if "  " in text:
            indents = text.count("\n  ") + text.count("\r  ") + text.startswith("  ")  # not gaps
            total += _GAP_RULE * (len(_SPACES.findall(text)) - indents)
        probe = text.encode("utf-8", "surrogatepass").translate(_ALNUM)
        return cls(text, total, runs.total, _SIXTEEN in probe)

    def total_of(self, *, alnum: bool) -> float:
        """Return the figure before rounding.

        ``alnum``: whether the whole text holds 16 letters or digits in a row (runs of one
        letter or digit are looked for only then).
        """
        text, total, found = self.text, self.total, _Runs(self.runs)
        runs = None
        if alnum:
            text = _REPEATED_ALNUM.sub(found, text)
            runs = _RUNS.findall(text)
        total += found.total
        text, total = _runs_and_scripts(text, total, runs, _SCRIPTS_2, _SCRIPT_RULES_2)
        if not text.isascii():  # (what the script passes left ASCII holds no symbol either)
            rest, symbols = _SYMBOL.subn("\r", text)
            if symbols:
                found_symbols = "".join(_SYMBOL.findall(text))  # the passes below read them alone
                ones = _SYMBOL_ONE.subn("", found_symbols)[1]
                threes = _SYMBOL_THREE.subn("", found_symbols)[1]
                halves = _SYMBOL_HALF.subn("", found_symbols)[1] / 2
                pairs = text.count(_DOUBLE_RULE) - text.count(_BRANCH) - text.count(_LONG_BRANCH)
                total += _SYMBOL_RULE * (2 * symbols - ones + threes - halves + pairs)
                text = rest
        return _ascii(text, total)


def _ascii(text: str, total: float) -> float:
    """Return ``total`` plus the price of the ASCII pieces the passes before left in ``text``."""
    rest, pieces = _WORDS.subn("a", text)
    total += _WORD_RULE[0] * pieces + _WORD_RULE[1] * (len(text) - len(rest) + pieces)
    text = rest
    rest, pieces = _DIGITS.subn("0", text)
    total += _DIGIT_RULE[0] * pieces + _DIGIT_RULE[1] * (len(text) - len(rest) + pieces)
    text = rest
    total += _SPACED_DIGIT * _SPACED_DIGITS.subn("", text)[1]
    rest, pieces = _PUNCTUATION.subn("", text)
    total += _PUNCTUATION_RULE[0] * pieces + _PUNCTUATION_RULE[1] * (len(text) - len(rest))
    total += (_TAKEN_IN_MARK - _PUNCTUATION_RULE[0]) * _TAKEN_IN.subn("", text)[1]
    total += _LINE_BREAK * (text.count("\n") - text.count("\n\n"))
    rest, pieces = _INDENTED.subn("", text)
    total += _INDENTED_RULE[0] * pieces + _INDENTED_RULE[1] * (len(text) - len(rest))
    return total


def _price(rule: tuple[float, float], runs: tuple[str, ...]) -> float:
    """Return the price of ``runs`` (empty strings are no run) by ``rule``."""
    joined = "".join(runs)
    if not joined:
        return 0.0
    return rule[0] * (len(runs) - runs.count("")) + rule[1] * len(joined)
