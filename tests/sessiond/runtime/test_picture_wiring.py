"""The daemon gives a session the served model's picture check only where the model has one and
the operator did not turn it off (`--no-picture-check`)."""

from __future__ import annotations

import asyncio

import numpy as np

from sessiond.config import ServeConfig
from sessiond.runtime.daemon import Daemon
from sessiond.runtime.engine_factory import picture_check
from sessiond.store.memory import MemoryStore


def test_only_the_demo_family_has_a_check() -> None:
    assert picture_check("tiny") is None and picture_check("wan-1.3b-world-preview") is None
    check = picture_check("demo")
    assert check is not None and check(np.zeros((128, 128, 3), np.uint8)).avatar is False


def test_the_daemon_runs_the_check_off_the_loop_and_the_flag_turns_it_off() -> None:
    async def envs() -> tuple[object, object, object]:
        on = Daemon(ServeConfig(model="demo"), store=MemoryStore())
        off = Daemon(ServeConfig(model="demo", picture_check=False), store=MemoryStore())
        tiny = Daemon(ServeConfig(model="tiny"), store=MemoryStore())
        check = on._picture_checker()  # what new_env hands every session once the engine is loaded
        assert check is not None
        sample = await check(np.zeros((128, 128, 3), np.uint8))
        return sample, off._picture_checker(), tiny._picture_checker()

    sample, off, tiny = asyncio.run(envs())
    assert (sample.avatar, off, tiny) == (False, None, None)  # type: ignore[attr-defined]
