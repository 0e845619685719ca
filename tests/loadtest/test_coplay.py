"""loadtest.coplay's per-player bookkeeping: an action's latency is counted once, at the first frame
whose action_seq (the player's own) reaches it; frames whose action_seq is not the player's own entry
of `players` are counted as mismatched."""

from __future__ import annotations

from loadtest.coplay import PlayerRun
from protocols.messages import Frame


def _frame(idx: int, action_seq: int, players: tuple[int, ...] | None) -> Frame:
    return Frame(pts=idx, idx=idx, w=1, h=1, fmt="rgb24", data=b"\0\0\0", segment=0, action_seq=action_seq,
                 players=players)


def test_each_action_is_timed_once_at_the_first_frame_that_applied_it() -> None:
    run = PlayerRun(player=1)
    for seq, at in ((0, 10.0), (1, 10.1), (2, 10.2)):
        run.sent[seq] = at
        run.pending.append(seq)
    run.on_frame(_frame(0, -1, (4, -1)), 10.15, counting=True)
    run.on_frame(_frame(1, 1, (4, 1)), 10.3, counting=True)  # applies seqs 0 and 1
    run.on_frame(_frame(2, 1, (4, 1)), 10.35, counting=True)
    run.on_frame(_frame(3, 2, (4, 3)), 10.5, counting=True)  # not its own entry: counted as mismatched
    assert [round(v, 1) for v in run.a2p_ms] == [300.0, 200.0, 300.0]
    assert (run.frames, run.first_idx, run.last_idx, run.mismatched, run.pending) == (4, 0, 3, 1, [])
    summary = run.summary(seconds=2.0)
    assert (summary["a2p_p50_ms"], summary["a2p_samples"], summary["frames_per_s"]) == (300.0, 3, 2.0)


def test_warm_up_frames_and_actions_are_not_counted() -> None:
    run = PlayerRun(player=0)
    run.sent[0] = 1.0
    run.pending.append(0)
    run.on_frame(_frame(0, 0, None), 1.2, counting=False)
    assert (run.a2p_ms, run.frames, run.sent, run.pending) == ([], 0, {}, [])
