"""Decoder placement (engine.placement): a decoder on a second CPU "device" (its own worker thread)
or on its own stream (in line on a CPU) gives the same frames as in line, also when its decode
runs in the same step as another session's denoise; refused placements name what is wrong."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from engine.api import FrameAction, Phase, StepItem, StepPlan
from engine.engine import Engine
from engine.errors import ConfigError
from engine.placement import DecoderPlacement
from tests.engine._helpers import make_engine, run_chunks

SECOND_CPU = DecoderPlacement("device", "cpu:1", threads=1)


def _staggered(engine: Engine, chunks: int) -> dict[str, list[np.ndarray]]:
    """Two sessions stepped together, B one phase behind A, so that A's decode shares a step with
    B's denoise; every chunk's frames per session."""
    frames: dict[str, list[np.ndarray]] = {"a": [], "b": []}
    for sid, seed in (("a", 1), ("b", 2)):
        assert engine.open_session(sid, seed=seed, prompt="a red cube")
    engine.begin_chunk("a", [FrameAction(keys=("w",))])
    begun_b = False
    mixed = 0
    while len(frames["a"]) < chunks or len(frames["b"]) < chunks:
        items = []
        for sid in ("a", "b"):
            if sid == "b" and not begun_b:
                engine.begin_chunk("b", [FrameAction(keys=("d",))])
                begun_b = True
                continue  # b starts one step late
            phase = engine.next_phase(sid)
            if phase is None and len(frames[sid]) < chunks:
                engine.begin_chunk(sid, [FrameAction(keys=("w",) if sid == "a" else ("d",))])
                phase = engine.next_phase(sid)
            if phase is not None:
                items.append(StepItem(sid, phase))
        phases = {i.phase for i in items}
        mixed += Phase.DECODE in phases and Phase.DENOISE in phases
        result = engine.step(StepPlan(tuple(items)))
        for item in result.results:
            assert item.error is None, item.error
            if item.chunk is not None:
                frames[item.session_id].append(item.chunk.frames)
    assert mixed > 0  # the decode did share steps with the other session's denoise
    return frames


def test_a_decoder_on_a_second_cpu_device_gives_the_frames_of_the_inline_decoder() -> None:
    inline = _staggered(make_engine(), 3)
    placed_engine = make_engine(decoder_placement=SECOND_CPU)
    assert placed_engine.lane.asynchronous
    placed = _staggered(placed_engine, 3)
    for sid in ("a", "b"):
        assert len(placed[sid]) == len(inline[sid]) == 3
        for got, want in zip(placed[sid], inline[sid], strict=True):
            np.testing.assert_array_equal(got, want)


def test_the_second_device_decodes_on_its_own_thread() -> None:
    engine = make_engine(decoder_placement=SECOND_CPU)
    seen: set[str] = set()
    decode = engine.parts.decoder.decode

    def spy(*args: object, **kwargs: object) -> object:
        seen.add(threading.current_thread().name)
        return decode(*args, **kwargs)  # type: ignore[arg-type]

    engine.parts.decoder.decode = spy  # type: ignore[method-assign]
    assert engine.open_session("s", seed=0, prompt="x")
    run_chunks(engine, "s", 2)
    assert len(seen) == 1
    assert next(iter(seen)).startswith("engine-decoder-cpu:1")


def test_offload_and_restore_keep_the_decoder_cache_where_the_decoder_is() -> None:
    engine = make_engine(decoder_placement=SECOND_CPU)
    ref = make_engine()
    for e in (engine, ref):
        assert e.open_session("s", seed=4, prompt="x")
        run_chunks(e, "s", 1)
        e.offload("s")
        assert e.restore("s")
    np.testing.assert_array_equal(run_chunks(engine, "s", 1)[0].frames, run_chunks(ref, "s", 1)[0].frames)


def test_own_stream_on_a_cpu_runs_in_line() -> None:
    engine = make_engine(decoder_placement=DecoderPlacement("stream"))
    assert not engine.lane.asynchronous
    assert engine.placement.describe(engine.device) == "in line (a CPU has no streams)"


@pytest.mark.parametrize(("placement", "message"), [
    (lambda: DecoderPlacement("elsewhere"), "decoder placement 'elsewhere' is not one of ['inline', 'stream', 'device']"),
    (lambda: DecoderPlacement("device"), "a decoder device is given with placement 'device' and only then"),
    (lambda: DecoderPlacement("device", "cpu:1", threads=0), "decoder threads must be >= 1, got 0"),
])
def test_bad_placements_are_refused(placement: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        placement()  # type: ignore[operator]
    assert str(info.value).endswith(message)


def test_a_gpu_that_is_not_there_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        make_engine(decoder_placement=DecoderPlacement("device", "cuda:7"))
    assert "decoder device 'cuda:7' but this machine has" in str(info.value)


def _steps_per_chunk(engine: Engine) -> list[list[str]]:
    """The phases of each engine step of one session's first two chunks, with the keys of the
    seconds each step reports."""
    assert engine.open_session("s", seed=0, prompt="x")
    steps = []
    for _ in range(2):
        engine.begin_chunk("s", [FrameAction()])
        while (phase := engine.next_phase("s")) is not None:
            result = engine.step(StepPlan((StepItem("s", phase),)))
            assert result.results[0].error is None
            steps.append([phase.value, *sorted(result.seconds)])
    return steps


def test_a_placed_decode_runs_its_chunks_cache_pass_beside_it() -> None:
    inline, placed = _steps_per_chunk(make_engine()), _steps_per_chunk(make_engine(decoder_placement=SECOND_CPU))
    denoise = ["denoise", "denoise"]
    steps = make_engine().parts.schedule.steps
    assert inline == ([denoise] * steps + [["decode", "decode"], ["cache", "cache"]]) * 2
    assert placed == ([denoise] * steps + [["decode", "cache", "decode"]]) * 2


def test_a_split_first_chunk_on_a_second_device_gives_the_inline_frames() -> None:
    from engine.config import tiny_config
    from engine.decoders.wan_vae import WanVAEConfig

    config = tiny_config().with_overrides(name="tiny+wan-vae-split-placed", decoder_kind="wan_vae",
                                          first_decode_split=1, extra={"wan_vae": WanVAEConfig.tiny()})
    frames: list[list[np.ndarray]] = []
    for placement in (None, SECOND_CPU):
        engine = Engine.create(model=config, device="cpu", decoder_placement=placement)
        assert engine.open_session("s", seed=3, prompt="a harbour")
        pieces = []
        for _ in range(3):
            engine.begin_chunk("s", [FrameAction()])
            while (phase := engine.next_phase("s")) is not None:
                item = engine.step(StepPlan((StepItem("s", phase),))).results[0]
                assert item.error is None, item.error
                if item.chunk is not None:
                    pieces.append(item.chunk.frames)
        frames.append(pieces)
    assert [f.shape[0] for f in frames[1]] == [f.shape[0] for f in frames[0]] == [1, 4, 8, 8]  # 1 + 4, then 8
    for got, want in zip(frames[1], frames[0], strict=True):
        np.testing.assert_array_equal(got, want)
