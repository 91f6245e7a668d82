"""``Format``: everything one provider's message shape means to cutctx, behind one type.

A format reads messages into turns (``scan``), prices them as they are sent, knows the
provider's sequencing rules (alternation, openers, what merges, what travels together) and its
own pins, and renders a view back into messages of its shape (``render``), each with its price.
The window, ``compact_messages``, the records and the command line take a ``Format`` (or the name
of a built-in one) and never ask which format they have. See ``docs/formats/custom.md`` for
writing one for your own message type.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, NamedTuple

from cutctx._core.values import Transcript, TranscriptTurn
from cutctx.formats._common import (
    Binding,
    Part,
    Pricer,
    counting,
    system_text,
    system_turn,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactedTranscript
    from cutctx.formats._reader import Reader

__all__ = ["Format", "Presentation", "Rendered", "WindowHooks", "hooks_of", "presentation_of"]


class Rendered[M](NamedTuple):
    """The messages ``Format.render`` made of a view, and each one's price as sent.

    ``costs[i]`` is the estimate of ``messages[i]``: the sum of the view's turns it carries
    (plus anything the format added, such as a filler message). ``joined`` lists the source
    messages (by history index) that the format merged into the message before them.

    .. versionadded:: 0.1.1
    """

    messages: list[M]
    costs: list[int]
    joined: frozenset[int] = frozenset()


class Format[M](ABC):
    """One provider's (or framework's) message format.

    Subclasses implement ``name``, ``reader`` and ``render``; the rest has defaults that fit a
    format whose messages are priced one by one with no request-level extras. The built-in ones
    are ``cutctx.formats.OPENAI_CHAT``, ``OPENAI_RESPONSES`` and ``ANTHROPIC``; everything that
    takes a format also takes its name.

    .. versionadded:: 0.1.1
    """

    __slots__ = ()

    @property
    @abstractmethod
    def name(self) -> str:
        """The format's stable name (recorded on records and in a window's state)."""

    def reader(
        self,
        *,
        estimator: TokenEstimator | None = None,
        priority: Callable[[int, dict[str, Any]], int] | None = None,
        pin: Callable[[int, dict[str, Any]], bool] | None = None,
    ) -> Reader[M]:
        """Return a fresh ``Reader`` of one history in this format, pricing with ``estimator``.

        ``priority(index, message)`` and ``pin(index, message)``, called with history indices,
        mark the turns as a message's ``priority``/``sticky`` keys do. Every format implements
        this.

        .. versionadded:: 0.1.1
        """
        raise NotImplementedError(f"{type(self).__name__} must implement reader()")

    @abstractmethod
    def render(self, view: Transcript | CompactedTranscript, binding: Binding[M]) -> Rendered[M]:
        """Return the messages of ``view`` (a view of ``binding``'s transcript), priced.

        Raises:
            ValidationError: for a binding of another format or a view it cannot have produced.
        """

    def tool_definition(
        self, name: str, description: str, parameters: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Return a function tool's definition as this provider's requests declare one.

        ``parameters`` is its JSON schema. The default is OpenAI Chat's shape, ``{"type":
        "function", "function": {"name", "description", "parameters"}}``.
        """
        return {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": dict(parameters)},
        }

    def pricer(self, estimator: TokenEstimator | None) -> Pricer:
        """Return the pricer of this format's pieces with ``estimator``."""
        return Pricer.of(self.name, estimator)

    def head(self, system: object, *, estimator: TokenEstimator) -> tuple[TranscriptTurn, ...]:
        """Return the pinned turns that stand for request-level ``system=`` (never rendered)."""
        pricer = self.pricer(estimator)
        read = system_text(self.name, system, pricer)
        return () if read is None else (system_turn(read[0], read[1] + pricer.role("system")),)

    def price_summary(self, text: str, *, estimator: TokenEstimator) -> int:
        """Return what a summary with ``text`` costs as this format renders it."""
        return self.pricer(estimator).summary(text)

    def request_overhead(self, estimator: TokenEstimator) -> int:
        """Return the tokens a request costs beyond its messages (none by default)."""
        del estimator
        return 0

    def to_transcript(
        self,
        messages: Sequence[M],
        *,
        estimator: TokenEstimator | None = None,
        system: object = None,
        priority: Callable[[int, dict[str, Any]], int] | None = None,
        pin: Callable[[int, dict[str, Any]], bool] | None = None,
    ) -> tuple[Transcript, Binding[M]]:
        """Return the transcript of ``messages`` (and ``system``) and the binding back.

        Its ``request_tokens`` is ``request_overhead``: a plan over it leaves room for that.
        """
        pricer = self.pricer(estimator)
        head = self.head(system, estimator=pricer.estimator)
        reader = self.reader(estimator=pricer.estimator, priority=priority, pin=pin)
        read = reader.read(messages, final=True)
        parts = {turn.turn_id: Part(turn, None, None, maskable=False, siblings=1) for turn in head}
        parts.update(read.parts)
        binding = Binding(self.name, read.sent, system, parts, pricer.estimator, read.originals)
        overhead = self.request_overhead(pricer.estimator)
        return Transcript((*head, *read.turns), request_tokens=overhead), binding

    def from_transcript(
        self, view: Transcript | CompactedTranscript, binding: Binding[M]
    ) -> list[M]:
        """Return the messages of ``view``: ``render`` without the prices."""
        return self.render(view, binding).messages

    def count_tokens(
        self,
        messages: Sequence[M],
        *,
        estimator: TokenEstimator | None = None,
        system: object = None,
    ) -> int:
        """Return what ``messages`` (and ``system``) cost as one request."""
        estimator = counting(estimator)
        pricer = self.pricer(estimator)
        transcript, _ = self.to_transcript(messages, estimator=pricer.estimator, system=system)
        return transcript.token_estimate()  # request_tokens: the request's overhead

    def __repr__(self) -> str:
        return f"<cutctx format {self.name!r}>"


class WindowHooks[M]:
    """What a ``ContextWindow`` asks of a format beyond ``Format``: optional, with defaults.

    A format whose class also derives from ``WindowHooks`` gives the window its own answers;
    any other ``Format`` gets these defaults (every message settled, no cache marker, the
    message itself as its data). The built-in formats derive from it.

    .. versionadded:: 0.1.1
    """

    __slots__ = ()

    def settled(self, message: M) -> bool:
        """Whether ``message``, last in a history, keeps its turns when more messages come."""
        del message
        return True

    def fingerprint_data(self, message: M) -> object:
        """Return ``message`` as the plain data a window's fingerprint reads.

        The default is the message itself (dicts, lists, strings and numbers, or an SDK object
        with ``model_dump``); a format whose message objects hold more (timestamps, ids made per
        process) returns what is sent instead.
        """
        return message

    def without_cache_markers(self, message: M) -> M:
        """Return ``message`` without the caller's prompt-cache markers (itself if it has none).

        A window compares, prices and holds a history without them, so a marker the caller
        moves each turn is not a changed history, and sends the caller's own message (its
        markers included) wherever it keeps that message whole. The default: no markers.

        .. versionadded:: 0.1.1
        """
        return message

    def with_cache_markers(self, request: list[M], marked: Sequence[tuple[M, M]]) -> list[M]:
        """Return ``request`` with the caller's markers on the parts the window rewrote.

        ``marked`` pairs each message the caller marked, as the window held it, with the
        caller's own; the messages the request sends whole are the caller's already. The
        default: ``request`` as it is.

        .. versionadded:: 0.1.1
        """
        del marked
        return request

    def mark_cache(self, request: list[M], stable: int, system: object) -> list[M]:
        """Return ``request`` with the provider's cache marker after its ``stable`` prefix.

        Formats without explicit cache markers return ``request`` as it is.
        """
        del stable, system
        return request


class Presentation:
    """How the command line shows a format's requests: optional, with defaults.

    A format whose class also derives from ``Presentation`` tells ``cutctx stats`` and the
    request files where request-level system text goes and what an assistant message holds;
    any other ``Format`` gets these defaults (system text in the list, no pieces).

    .. versionadded:: 0.1.1
    """

    __slots__ = ()

    @property
    def system_field(self) -> str | None:
        """The request body's field for request-level ``system=`` (``None``: in the list)."""
        return None

    def pieces(
        self, message: Mapping[str, Any], *, estimator: TokenEstimator, tokens: int
    ) -> tuple[list[tuple[str, int]], int]:
        """Return an assistant message's tool calls (name, tokens) and its reasoning tokens.

        ``tokens`` is the message's price; each piece is priced as the format prices it, so the
        rest is its text. The default sees no pieces.
        """
        del message, estimator, tokens
        return [], 0


_HOOKS: WindowHooks[Any] = WindowHooks()
_PRESENTATION = Presentation()


def hooks_of[M](fmt: Format[M]) -> WindowHooks[M]:
    """Return ``fmt``'s window hooks: its own if its class derives from ``WindowHooks``."""
    return fmt if isinstance(fmt, WindowHooks) else _HOOKS


def presentation_of(fmt: Format[Any]) -> Presentation:
    """Return ``fmt``'s command-line presentation: its own if it derives from ``Presentation``."""
    return fmt if isinstance(fmt, Presentation) else _PRESENTATION
