"""Client processes of a benchmark get ready, then start together (loadtest._barrier)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from loadtest._barrier import release

CHILD = ("import sys; from loadtest._barrier import wait_for_go; wait_for_go(); "
         "print('went ' + sys.argv[1], flush=True)")


def _spawn(code: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def test_children_wait_until_all_are_ready_then_go_together() -> None:
    children = [_spawn(CHILD, str(i)) for i in range(3)]
    asyncio.run(release(children))
    outs = [c.communicate(timeout=60)[0].decode().splitlines() for c in children]
    assert outs == [["went 0"], ["went 1"], ["went 2"]]  # `ready` was read by release; the report is last
    assert [c.returncode for c in children] == [0, 0, 0]


def test_a_child_that_fails_before_ready_is_named() -> None:
    bad = _spawn("import sys; print('Traceback: no module', flush=True); sys.exit(3)")
    good = _spawn(CHILD, "g")
    with pytest.raises(RuntimeError, match=r"did not get ready \(said 'Traceback: no module'"):
        asyncio.run(release([bad, good]))
    assert good.stdin is not None and good.stdout is not None
    good.stdin.close()  # stdin closed: the waiting child goes too
    assert good.stdout.read().decode().splitlines() == ["went g"]
    assert good.wait(60) == 0
    assert bad.communicate(timeout=60)[0] == b""  # nothing after the line release read
    assert bad.returncode == 3
    good.stdout.close()
