"""`python -m enginetools.bench.overlap --model wan-1.3b`: does a decode on a second CUDA stream overlap
with DiT passes on the first?

A probe for the scheduler's design, not a workload: one session is rolled `--context` chunks
forward through the public API, then, at that context, five DiT passes (a chunk's four denoise
steps and its cache pass, K/V not written) and a steady decode of the chunk's latents for
`--batch` sessions are timed three ways: DiT alone, decode alone, and both launched together
(decode on a side stream first, then the DiT on the default stream). Prints and writes the
medians and the share of the decode that the overlap hid:
hidden = (dit + decode - together) / decode.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from engine._timing import median_seconds
from engine.api import FrameAction, StepItem, StepPlan
from engine.engine import Engine
from engine.session import ChunkRecord

__all__ = ["main", "measure_overlap"]

_PASSES = 5  # four denoise steps and the cache pass of one chunk


def _advance(engine: Engine, sid: str, chunks: int) -> None:
    for _ in range(chunks):
        engine.begin_chunk(sid, [FrameAction(keys=("w",))])
        while (phase := engine.next_phase(sid)) is not None:
            result = engine.step(StepPlan((StepItem(sid, phase),)))
            if any(r.error for r in result.results):
                raise RuntimeError(f"probe rollout failed: {[r.error for r in result.results]}")
            for r in result.results:
                if r.chunk is not None:
                    engine.mark_delivered(sid, r.chunk_index)


@torch.no_grad()
def measure_overlap(engine: Engine, batch: int, context: int, repeats: int) -> dict[str, float]:
    """Seconds (medians) for DiT passes alone, a steady decode alone, and both at once."""
    device, runner = engine.device, engine.runner
    engine.open_session("probe", seed=0, prompt="probe")
    _advance(engine, "probe", context + 1)
    state = engine.session("probe")
    record = state.records[max(state.records)]
    slabs = [state.handle.context_slabs(state.handle.written)] * batch
    latents = record.latents[None].expand(batch, -1, -1, -1, -1).contiguous()
    contexts = engine.embed_prompt("probe")[None].expand(batch, -1, -1)
    records = [ChunkRecord(state.handle.written, record.latents, record.actions, "probe")] * batch
    caches = [state.decoder_cache] * batch
    side = torch.cuda.Stream(device)

    def dit() -> None:
        for _ in range(_PASSES):
            runner.forward(latents, [500.0] * batch, records, contexts, slabs, None)

    def decode() -> None:
        engine.parts.decoder.decode(latents, caches)

    def together() -> None:
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            engine.parts.decoder.decode(latents, caches)
        dit()

    out = {
        "dit_s": median_seconds(dit, device, repeats),
        "decode_s": median_seconds(decode, device, repeats),
        "together_s": median_seconds(together, device, repeats),
    }
    engine.close_session("probe")
    out["hidden_share_of_decode"] = (out["dit_s"] + out["decode_s"] - out["together_s"]) / out["decode_s"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m enginetools.bench.overlap", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="wan-1.3b")
    parser.add_argument("--batch", default="1,2", help="sessions per step, e.g. 1,2,4")
    parser.add_argument("--context", type=int, default=4, help="chunks of context before the probed chunk")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: the overlap probe needs CUDA (streams)", file=sys.stderr)
        return 2
    batches = [int(b) for b in args.batch.split(",")]
    # one session's KV is all the probe uses; warm-up only up to the largest probed batch
    engine = Engine.create(model=args.model, device="cuda", max_batch=max(batches))
    engine.warmup()
    results = {}
    for batch in batches:
        results[str(batch)] = r = measure_overlap(engine, batch, args.context, args.repeats)
        print(f"b={batch}: DiT {_ms(r['dit_s'])} decode {_ms(r['decode_s'])} together {_ms(r['together_s'])} "
              f"-> {100 * r['hidden_share_of_decode']:.0f}% of the decode hidden", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"model": args.model, "context": args.context, "results": results},
                                              indent=2) + "\n")
    return 0


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:.1f} ms"


if __name__ == "__main__":
    sys.exit(main())
