"""The media stack is made ready at start-up, and a build without a part says which."""

from __future__ import annotations

import sys

import pytest

from transports.warm import warm_media_stack


def test_warming_opens_an_encoder_loads_webrtc_and_runs_one_loopback_handshake() -> None:
    warmth = warm_media_stack(64, 48, 16)
    assert sorted(warmth.seconds) == ["fmp4", "webrtc", "webrtc_handshake"] and warmth.missing == {}
    assert all(s >= 0.0 for s in warmth.seconds.values())
    assert "aiortc" in sys.modules and "av" in sys.modules
    assert warmth.describe().startswith("fmp4 ") and ", webrtc " in warmth.describe()


def test_a_build_without_aiortc_warms_the_rest_and_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiortc.rtcdtlstransport", None)  # import of it raises ImportError
    warmth = warm_media_stack(64, 48, 16)
    assert list(warmth.seconds) == ["fmp4"]
    assert list(warmth.missing) == ["webrtc"]
    assert warmth.missing["webrtc"] == ("ModuleNotFoundError: import of aiortc.rtcdtlstransport halted; "
                                        "None in sys.modules")
    assert warmth.describe().endswith("; webrtc unavailable (" + warmth.missing["webrtc"] + ")")


def test_an_encoder_that_will_not_open_is_named_not_raised() -> None:
    warmth = warm_media_stack(63, 47, 16)  # odd sizes: H.264 4:2:0 cannot take them
    assert "fmp4" in warmth.missing


def test_the_warm_up_handshake_stays_on_loopback() -> None:
    import asyncio

    from transports.warm import _loopback_handshake

    assert asyncio.run(_loopback_handshake()) == {"127.0.0.1"}
