"""Building a connection's media packer: the fMP4 one (an H.264 encoder open) off the event loop."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from protocols.errors import ErrorCode, ProtocolError
from sessiond.api.routes_ws import make_packer
from transports.fmp4 import Fmp4Packer
from transports.raw import RawPacker


class _RecordingExecutor(ThreadPoolExecutor):
    """A real executor that remembers what it was given to run."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="packer-test")
        self.ran: list[Any] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.ran.append(fn)
        return super().submit(fn, *args, **kwargs)


async def test_the_fmp4_packer_is_built_in_the_executor() -> None:
    executor = _RecordingExecutor()
    try:
        packer = await make_packer("fmp4", 64, 32, 16, executor)
    finally:
        executor.shutdown()
    assert isinstance(packer, Fmp4Packer) and packer.codec.startswith("avc1.")
    assert executor.ran == [Fmp4Packer]


async def test_a_raw_packer_needs_no_executor() -> None:
    executor = _RecordingExecutor()
    try:
        packer = await make_packer("raw", 64, 32, 16, executor)
    finally:
        executor.shutdown()
    assert isinstance(packer, RawPacker) and executor.ran == []


async def test_an_unknown_media_is_an_invalid_field_naming_media() -> None:
    with pytest.raises(ProtocolError) as caught:
        await make_packer("webm", 64, 32, 16, None)
    assert (caught.value.code, caught.value.field) == (ErrorCode.INVALID_FIELD, "media")
