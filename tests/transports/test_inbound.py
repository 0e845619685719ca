"""The one inbound policy of every transport: request rate and abuse, on a fake clock."""

from __future__ import annotations

import msgpack
import pytest

from protocols.codec import encode
from protocols.messages import Action, Direct, Hello, Interrupt, Ping, Received
from transports.inbound import InboundGuard, InboundLimits, InboundReader, Verdict


class _Clock:
    t = 50.0

    def __call__(self) -> float:
        return self.t


def test_requests_over_the_per_second_limit_are_refused_until_the_second_passes() -> None:
    clock = _Clock()
    guard = InboundGuard(InboundLimits(max_requests_per_s=2, abuse_errors_per_10s=50), now=clock)
    assert [guard.over_rate(Interrupt(id=i)) for i in range(3)] == [False, False, True]
    clock.t += 1.0
    assert guard.over_rate(Interrupt(id=9)) is False


def test_actions_and_acks_are_never_refused_here() -> None:
    guard = InboundGuard(InboundLimits(max_requests_per_s=1, abuse_errors_per_10s=50), now=_Clock())
    assert not any(guard.over_rate(m) for m in [Action(seq=i, ts=0.0, keys=()) for i in range(100)])
    assert not any(guard.over_rate(Received(idx=i)) for i in range(100))


def test_errors_beyond_the_limit_within_ten_seconds_make_the_connection_abusive() -> None:
    clock = _Clock()
    guard = InboundGuard(InboundLimits(max_requests_per_s=50, abuse_errors_per_10s=3), now=clock)
    assert [guard.error() for _ in range(3)] == [False, False, False]
    clock.t += 10.5  # the first three fell out of the window
    assert [guard.error() for _ in range(4)] == [False, False, False, True]


@pytest.mark.parametrize(("rate", "abuse", "named"), [(0, 5, "max_requests_per_s"), (5, 0, "abuse_errors_per_10s")])
def test_a_limit_below_one_names_the_option(rate: int, abuse: int, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        InboundLimits(max_requests_per_s=rate, abuse_errors_per_10s=abuse)


def _reader(hello_required: bool, errors: list[str], **limits: int) -> InboundReader:
    return InboundReader(InboundLimits(**limits), hello_required=hello_required, on_error=errors.append, now=_Clock())


def test_the_reader_takes_the_first_hello_and_hands_later_ones_to_the_session() -> None:
    errors: list[str] = []
    reader = _reader(True, errors)
    assert reader.read(encode(Hello(v=1))) == Verdict(hello=Hello(v=1))
    assert reader.read(encode(Hello(v=1))) == Verdict(message=Hello(v=1))  # the session answers conflict
    assert errors == []


def test_a_websocket_needs_hello_first_and_webrtc_does_not() -> None:
    errors: list[str] = []
    verdict = _reader(True, errors).read(encode(Interrupt(id=3)))
    assert verdict.error is not None and (verdict.error.code, verdict.error.fatal) == ("invalid_field", False)
    assert _reader(False, errors).read(encode(Interrupt(id=3))) == Verdict(message=Interrupt(id=3))
    assert errors == ["invalid_field"]


def test_an_unsupported_hello_is_fatal_and_counted() -> None:
    errors: list[str] = []
    verdict = _reader(False, errors).read(msgpack.packb({"t": "hello", "v": 2}))
    assert verdict.error is not None and (verdict.error.code, verdict.error.fatal) == ("unsupported_version", True)
    assert errors == ["unsupported_version"]


def test_the_reader_applies_the_prompt_and_size_limits_and_names_the_request() -> None:
    errors: list[str] = []
    reader = _reader(False, errors, max_prompt_chars=10, max_message_bytes=300)
    long_prompt = reader.read(encode(Direct(id=8, prompt="x" * 11))).error
    too_big = reader.read(encode(Ping(id=9, ts=0.0)) + b"\0" * 300).error
    assert long_prompt is not None and (long_prompt.code, long_prompt.re) == ("invalid_field", 8)
    assert too_big is not None and too_big.code == "too_large"
    assert errors == ["invalid_field", "too_large"]


def test_only_actions_travel_on_the_actions_channel() -> None:
    errors: list[str] = []
    reader = _reader(False, errors)
    assert reader.read(encode(Action(seq=1, ts=0.0, keys=())), actions_only=True).message == Action(seq=1, ts=0.0,
                                                                                                    keys=())
    refused = reader.read(encode(Ping(id=1, ts=0.0)), actions_only=True).error
    assert refused is not None and refused.code == "unknown_type"


def test_the_error_over_the_abuse_limit_is_a_fatal_rate_limited_counted_with_its_cause() -> None:
    errors: list[str] = []
    reader = _reader(False, errors, abuse_errors_per_10s=2)
    verdicts = [reader.read(b"\xc1") for _ in range(3)]
    assert [(v.error.code, v.error.fatal) for v in verdicts if v.error is not None] == [
        ("bad_message", False), ("bad_message", False), ("rate_limited", True)]
    assert errors == ["bad_message", "bad_message", "bad_message", "rate_limited"]
