"""The scheduler's plan (EDF, chunk by chunk) and a new segment's start delay from it: exact
values worked out by hand from the demand bound (a chunk of 0.25 s every 0.5 media s per director)."""

from __future__ import annotations

from collections.abc import Callable

from sessiond.admission.edf_plan import (
    Periodic,
    PlanChunk,
    SegmentAsk,
    joins_batch,
    late_chunks,
    segment_chunks,
    start_delay,
)


def _serial(b: int) -> float:
    return 0.25 * b  # no batching gain: one chunk after another


def _director(owner: str, first: float, chunks: int = 10, slack: float = 0.1) -> list[PlanChunk]:
    return [PlanChunk(owner, 0.0, first + 0.5 * k, slack) for k in range(chunks)]


ASK = SegmentAsk(now=0.0, segment_s=5.0, chunk_media_s=0.5, jitter_s=0.1)


def test_segment_chunks_are_due_as_they_play_after_the_delay_and_lead_in() -> None:
    ask = SegmentAsk(now=2.0, segment_s=1.2, chunk_media_s=0.5, lead_in_s=0.5, jitter_s=0.1, lead_s=2.5)
    chunks = segment_chunks("c", ask, 1.0)
    assert ask.chunks == 4 and ask.due_at_start == 2  # 3 chunks of its own (the last one cut), one of lead-in
    assert [(c.release, c.deadline, c.ready_by) for c in chunks] == [
        (2.0, 3.0, 2.9), (2.0, 3.0, 2.9), (2.0, 3.5, 3.4), (2.0, 4.0, 3.9)]
    assert segment_chunks("c", ask, 4.0)[-1].release == 7.0 - 2.5  # begun at most lead_s before it plays


def test_a_first_chunk_short_of_frames_pulls_the_later_chunks_sooner_by_what_it_lacks() -> None:
    # Wan's causal decoder: a stream's first chunk decodes to 9 frames, the others to 12 (16 fps:
    # 0.75 media s a chunk, 0.1875 s lacking). 2 media s need 3 chunks (9 + 12 + 12 frames >= 32),
    # the second playing 0.5625 s after the start, the third 1.3125 s
    ask = SegmentAsk(now=0.0, segment_s=2.0, chunk_media_s=0.75, lead_in_s=0.1875)
    assert ask.chunks == 3 and ask.due_at_start == 1
    assert [c.deadline for c in segment_chunks("c", ask, 1.0)] == [1.0, 1.5625, 2.3125]
    assert SegmentAsk(now=0.0, segment_s=2.0, chunk_media_s=0.75).chunks == 3  # 2 / 0.75 = 2.67
    assert SegmentAsk(now=0.0, segment_s=2.2, chunk_media_s=0.75, lead_in_s=0.1875).chunks == 4


def test_edf_interleaves_chunk_by_chunk_and_batches_only_where_it_pays() -> None:
    a, b = _director("a", 1.0, 2), _director("b", 1.2, 2)
    assert late_chunks([*a, *b], 0.0, _serial) == []
    # four chunks in 0.25 s each: b's second chunk (ready by 1.6) done at 1.0; with a 0.6 s step
    # nothing is late before the fourth (a0 0.6, b0 1.2 > 1.1: late)
    slow = late_chunks([*a, *b], 0.0, lambda n: 0.6 * n)
    assert [(c.owner, c.deadline) for c in slow] == [("b", 1.2), ("a", 1.5), ("b", 1.7)]
    # batching two at 0.7 s (cheaper than 0.6 + 0.6): pairs a0+b0 at 0.7, a1+b1 at 1.4
    assert late_chunks([*a, *b], 0.0, lambda n: 0.6 if n == 1 else 0.7, max_batch=2) == []


def test_a_third_director_starts_when_the_demand_bound_allows_not_at_an_equal_share() -> None:
    # two directors already owe 10 chunks each (due from 1.0 and 1.2 s); a third asks for 5 s at 0.
    # An equal share (1/3 each: 0.67x real time) would say d = 0.5 + 5 x 0.5 + 0.1 = 3.1 s, but
    # the others' chunks come first by deadline: its chunk k (k >= 2) is ready after 21 + k chunks
    # of 0.25 s and plays at d - 0.1 + 0.5 k, so d >= 5.35 - 0.25 k, tightest at k = 2: 4.85 s
    committed = [*_director("a", 1.0), *_director("b", 1.2)]
    delay = start_delay("c", ASK, committed, start=0.0, step_s=_serial, max_batch=1, max_delay_s=60.0)
    assert delay is not None and 4.85 <= delay <= 4.855
    assert late_chunks([*committed, *segment_chunks("c", ASK, delay)], 0.0, _serial) == []
    assert late_chunks([*committed, *segment_chunks("c", ASK, 3.1)], 0.0, _serial) != []


def test_alone_it_starts_once_the_engine_is_free_and_has_made_its_first_chunk() -> None:
    delay = start_delay("c", ASK, [], start=0.4, step_s=_serial, max_batch=1, max_delay_s=60.0)
    assert delay == 0.4 + 0.25 + 0.1
    lead = SegmentAsk(now=0.0, segment_s=5.0, chunk_media_s=0.5, lead_in_s=0.5, jitter_s=0.1)
    assert start_delay("c", lead, [], start=0.0, step_s=_serial, max_batch=1, max_delay_s=60.0) == 0.6


def test_chunks_late_without_the_newcomer_do_not_hold_it_back_and_none_is_made_late() -> None:
    # a owes 6 chunks ready by 0.1, 0.6, ... 2.6; the engine is free at 1.0: they finish at 1.25,
    # 1.5, ... 2.5, so the first five are lost already and only the last is on time
    committed = _director("a", 0.2, 6, slack=0.1)
    late = late_chunks(committed, 1.0, _serial)
    assert [c.deadline for c in late] == [0.2, 0.7, 1.2, 1.7, 2.2]
    delay = start_delay("c", ASK, committed, start=1.0, step_s=_serial, max_batch=1, max_delay_s=60.0)
    # c's first chunk may not go before a's last (due 2.7: it would be late), so it is made after
    # it, done at 2.75, and plays 0.1 later: d = 2.85 (the lost ones are made first all the same:
    # their deadlines are earlier)
    assert delay is not None and 2.85 <= delay <= 2.855


def test_a_world_session_keeps_real_time_and_a_plan_that_cannot_keep_it_says_none() -> None:
    world = Periodic("w", 0.5, 0.5, 0.5)  # a chunk due every 0.5 s, begun at most 0.5 s ahead
    # with 0.25 s chunks the world takes half the engine: the director gets the other half
    delay = start_delay("c", ASK, [], start=0.0, step_s=_serial, max_batch=1, max_delay_s=60.0, periodic=[world])
    assert delay is not None and 0.35 <= delay <= 0.355
    # 0.45 s chunks: the world takes 0.9 of the engine, leaving 0.05 s in every 0.5 s: the
    # segment's 10 chunks (4.5 s) would need some 45 s, not within the 6 s allowed
    slow = start_delay("c", ASK, [], start=0.0, step_s=lambda n: 0.45 * n, max_batch=1, max_delay_s=6.0,
                       periodic=[world])
    assert slow is None


def test_a_director_behind_by_one_chunk_does_not_push_the_next_one_out_by_ten_seconds() -> None:
    """Seen on the H100 and in the paced rehearsal (directors-busy-4): b's plan was made as the
    engine began a's segment, a's first chunk already a little late. Batching that lost chunk with
    b's made a's next chunks late too, so every start of b short of a's whole segment (10 s) was
    refused. A lost chunk now goes alone (as the scheduler serves it); b waits under a second."""
    steps = [0.222, 0.413, 0.615, 0.816]  # the H100's profile on tiny's 0.5 s chunks, stretched

    def step_s(b: int) -> float:
        return steps[b - 1]

    owed = [PlanChunk("a", d - 10.0, d, 0.1) for d in (0.21, 0.71, 1.21, 1.71, 2.21, 2.71, 3.21, 3.71, 4.21, 4.71)]
    assert [c.deadline for c in late_chunks(owed, 0.0, step_s, 4)] == [0.21]  # lost whatever b does
    ask = SegmentAsk(now=0.0, segment_s=5.0, chunk_media_s=0.5, jitter_s=0.1, lead_s=10.0)
    delay = start_delay("b", ask, owed, start=0.0, step_s=step_s, max_batch=4, max_delay_s=60.0)
    assert delay is not None and 0.76 <= delay <= 0.775
    late = late_chunks([*owed, *segment_chunks("b", ask, delay)], 0.0, step_s, 4)
    assert [(c.owner, c.deadline) for c in late] == [("a", 0.21)]


def test_a_far_chunk_joins_a_step_only_if_no_chunk_due_before_it_turns_late() -> None:
    # a step of one chunk 0.355 s, of two 0.664 s; the earliest is due by 0.97 either way
    def joins(candidate_by: float, next_by: float) -> bool:
        return joins_batch(0.0, 0.355, 0.664, 0.97, candidate_by, now_s=0.355, next_by=next_by)

    assert not joins(5.0, 0.97)  # the earliest's owner's next chunk: 0.71 alone, 1.019 behind the pair
    assert joins(5.0, 1.72)  # due later than the pair and one chunk take: on time either way
    assert joins(0.9, 0.97)  # the candidate itself is due first: it goes now, batching only helps
    assert joins(5.0, 0.5)  # lost either way (0.71 > 0.5): the pair does not make it lost
    assert joins_batch(0.0, 0.355, 0.664, 0.97, 5.0)  # without a next chunk known: the earliest alone decides


def test_a_newcomer_waits_for_the_chunks_due_before_its_own_not_for_the_whole_segment() -> None:
    """Seen on the H100 (family f40389019, directors-idle-16): b's `direct` came 0.3 s after a's,
    while a still owed its lead-in and first chunk, both due at 1.07 s. b's chunks, released at once
    (a director may be made 10 s ahead), joined a's first in a step of two, so a's second came 1.02 s
    in, late; every start of b was refused that way until b's chunks were no longer released at once
    (10 s: a director's chunk is begun at most 10 s before it plays), though a's segment ends in 5. A far chunk now waits where it would make a nearer one late: b
    starts in under 2 s, both on time."""
    steps = [0.355, 0.664, 0.987, 1.309]  # the H100's profile at the world geometry, stretched

    def step_s(b: int) -> float:
        return steps[b - 1]

    owed = [PlanChunk("a", d - 10.0, d, 0.1) for d in (1.07, 1.07, 1.82, 2.57, 3.32, 4.07, 4.82)]
    assert late_chunks(owed, 0.0, step_s, 4) == []
    ask = SegmentAsk(now=0.0, segment_s=5.0, chunk_media_s=0.75, lead_in_s=0.75, jitter_s=0.1, lead_s=10.0)
    delay = start_delay("b", ask, owed, start=0.0, step_s=step_s, max_batch=4, max_delay_s=10.0)
    assert delay is not None and 1.82 <= delay <= 1.84
    assert late_chunks([*owed, *segment_chunks("b", ask, delay)], 0.0, step_s, 4) == []
    assert [(c.owner, c.deadline) for c in late_chunks([*owed, *segment_chunks("b", ask, 1.5)], 0.0, step_s, 4)] \
        == [("b", 1.5)]


def test_a_director_starting_beside_a_world_player_who_just_attached_starts_within_the_objective() -> None:
    """Seen on the H100 (family f40389019, burst-mixed-8): a world player attached and a director's
    first `direct` came 27 ms later; the plan advised 2.30 s (objective 1.5). It planned a whole chunk
    of lead-in where Wan's first chunk lacks 3 of 12 frames, and the world's chunks due every 0.75 s
    from the attach, where its viewer's clock follows its first chunk's arrival. Now: w0 alone
    (lost already: due at the attach) done 0.387; w1 (due 1.137) with d0 in a step of two, done
    1.101; d1 with w2 (due 1.887), done 1.815, which d1 meets when it plays at d + 0.5625 - 0.1:
    d = 1.3525; every later pair takes 0.714 s of 0.75."""
    steps = [0.387, 0.714, 1.055, 1.395]  # the H100's profile at the world geometry, stretched (9b3abb3)

    def step_s(b: int) -> float:
        return steps[b - 1]

    world = Periodic("w", 0.0, 0.75, 1.5, restart_s=step_s(1))
    ask = SegmentAsk(now=0.0, segment_s=5.0, chunk_media_s=0.75, lead_in_s=3 / 16, jitter_s=0.1, lead_s=10.0)
    delay = start_delay("d", ask, [], start=0.0, step_s=step_s, max_batch=4, max_delay_s=10.0, periodic=[world])
    assert delay is not None and 1.3525 <= delay <= 1.3575
    chunks = [*world.until(delay + 6.0), *segment_chunks("d", ask, delay)]
    assert [(c.owner, c.deadline) for c in late_chunks(chunks, 0.0, step_s, 4)] == [("w", 0.0)]
    # as planned before: a whole chunk of lead-in, the world's chunks due from its attach
    whole = SegmentAsk(now=0.0, segment_s=5.0, chunk_media_s=0.75, lead_in_s=0.75, jitter_s=0.1, lead_s=10.0)
    before = start_delay("d", whole, [], start=0.0, step_s=step_s, max_batch=4, max_delay_s=10.0,
                         periodic=[Periodic("w", 0.0, 0.75, 1.5)])
    assert before is not None and 2.30 <= before <= 2.31


def _late(world: Periodic, ask: SegmentAsk, delay: float, step_s: Callable[[int], float]) -> list[tuple[str, float]]:
    chunks = [*world.until(delay + ask.segment_s + 1.0), *segment_chunks("d", ask, delay)]
    return [(c.owner, round(c.deadline, 3)) for c in late_chunks(chunks, 0.0, step_s, 2)]


def test_beside_a_world_player_at_the_edge_the_start_is_the_first_narrow_window_and_its_middle() -> None:
    """A world player's chunk every 0.25 s takes 0.14 s alone; a director's beside it fits only in a
    step of two (0.2 s, not 0.28 s), begun once the world's chunk is released, so only starts in a
    narrow phase of the world's period keep both: here 1.100-1.133 s, then windows of 3 ms once a
    period, and none at 60 s. A bisection over the delay found none (the direction waited the 60 s
    maximum); the search by phase finds the first window and starts in its middle."""
    steps = {1: 0.14, 2: 0.2}

    def step_s(b: int) -> float:
        return steps[b]

    world = Periodic("w", 0.1, 0.25, 0.25)  # due from 0.1 s, begun at most a chunk ahead
    ask = SegmentAsk(now=0.0, segment_s=2.0, chunk_media_s=0.25, jitter_s=0.05, lead_s=1.0)
    lost = [("w", 0.1)]  # the world's first chunk, due before it can be made: late whatever comes
    assert _late(world, ask, 60.0, step_s) != lost  # the maximum keeps no one: bisection has nothing
    assert _late(world, ask, 1.095, step_s) != lost and _late(world, ask, 1.135, step_s) != lost
    delay = start_delay("d", ask, [], start=0.0, step_s=step_s, max_batch=2, max_delay_s=60.0, periodic=[world])
    assert delay is not None and 1.11 <= delay <= 1.12  # the window 1.100-1.133, at its middle
    assert _late(world, ask, delay, step_s) == lost


def test_a_start_soon_is_found_though_the_seconds_after_it_keep_no_one() -> None:
    """Built from the plan's log line of a `direct` in the rehearsal at the engine issue's 0.25 (tiny
    paced, family 1446554712, burst-mixed-8; advised 11.04 s): beside two directors owing 9 and 10
    chunks of 0.5 s and a world player, at a world phase the log does not give (at the one it had,
    the rehearsal again with this search advised the same 11.04 s). Here starts at 1.64-1.79 s keep
    everyone; from there to 11.04 s none does (the segment's chunks, all released at once while it
    plays within 10 s, are made early, in steps that leave a's chunks from 2.14 s on late). A
    bisection over the delay and one over whole periods per phase both land past the gap; the first
    seconds are now looked at in order."""
    steps = [0.135, 0.255, 0.38, 0.505]  # the daemon's planned steps (the log line of that `direct`)

    def step_s(b: int) -> float:
        return steps[b - 1]

    owed = [PlanChunk("a", d - 10.0, d, 0.1) for d in (0.64, 1.14, 1.64, 2.14, 2.64, 3.14, 3.64, 4.14, 4.64)]
    owed += [PlanChunk("b", d - 10.0, d, 0.1) for d in (0.45, 0.95, 1.45, 1.95, 2.45, 2.95, 3.45, 3.95, 4.45, 4.95)]
    world = Periodic("w", 0.1, 0.5, 1.0)  # the world player's phase and lead are not in the log: one of them
    ask = SegmentAsk(now=0.0, segment_s=5.0, chunk_media_s=0.5, lead_in_s=0.19, jitter_s=0.1, lead_s=10.0)

    def late(delay: float) -> list[tuple[str, float]]:
        chunks = [*owed, *world.until(delay + 6.0), *segment_chunks("d", ask, delay)]
        return [(c.owner, round(c.deadline, 2)) for c in late_chunks(chunks, 0.0, step_s, 4)]

    lost = [("w", 0.1)]  # the world's first chunk, due before it can be made: late whatever comes
    assert late(1.7) == lost and late(11.1) == lost
    assert all(late(d) != lost for d in (1.85, 3.0, 6.0, 9.0, 10.5))
    delay = start_delay("d", ask, owed, start=0.0, step_s=step_s, max_batch=4, max_delay_s=60.0, periodic=[world])
    assert delay is not None and 1.64 <= delay <= 1.65
    assert late(delay) == lost
