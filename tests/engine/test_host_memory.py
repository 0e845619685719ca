"""A CPU engine keeps freed host memory in the process, so a chunk's repeated few-megabyte tensors
are not page-faulted in afresh on every reuse (engine/_host_memory.py)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from engine._host_memory import OPT_OUT_ENV, keep_freed_host_memory
from tests.engine._helpers import make_engine

# 20 times, after 10 to warm up: a 48 MiB tensor written through, then freed. Above glibc's largest
# dynamic mmap threshold (32 MiB), so by default every one is a fresh mapping, faulted in page by page
# (12,288 pages each). Kept, the first few still fault (the heap settling: 7 on this box), then none.
_CHURN = """
import json, resource, sys, torch
from engine._host_memory import keep_freed_host_memory
outcome = keep_freed_host_memory() if sys.argv[1] == "keep" else "not asked"
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    t = torch.ones(12 << 20)
    del t
before = faults()
for _ in range(20):
    t = torch.ones(12 << 20)
    del t
print(json.dumps({"outcome": outcome, "faults": faults() - before}))
"""


def _churn(mode: str, **env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items()
             if k not in (OPT_OUT_ENV, "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")}
    done = subprocess.run([sys.executable, "-c", _CHURN, mode], env={**clean, **env}, capture_output=True,
                          text=True, timeout=120, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_freed_blocks_are_reused_without_page_faults() -> None:
    kept = _churn("keep")
    default = _churn("default")
    assert kept["outcome"] == "applied"
    assert default["outcome"] == "not asked"
    # by default each of the 20 tensors is faulted in: 20 x 12,288 pages
    assert int(default["faults"]) >= 20 * 12_288 * 9 // 10  # type: ignore[call-overload]
    # kept: the heap already holds the pages, nothing is faulted in again
    assert int(kept["faults"]) < 12_288  # type: ignore[call-overload]


def test_the_operator_opts_out_or_tunes_malloc_themselves() -> None:
    assert _churn("keep", **{OPT_OUT_ENV: "0"})["outcome"] == f"not applied: {OPT_OUT_ENV}=0"
    tuned = _churn("keep", MALLOC_TRIM_THRESHOLD_="1048576")
    assert tuned["outcome"] == "not applied: the operator set MALLOC_TRIM_THRESHOLD_"


def test_an_opted_out_process_is_told_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OPT_OUT_ENV, "0")
    assert keep_freed_host_memory() == f"not applied: {OPT_OUT_ENV}=0"


def test_a_cpu_engine_applies_it_and_logs_the_outcome(caplog: pytest.LogCaptureFixture,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (OPT_OUT_ENV, "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    with caplog.at_level(logging.INFO, logger="engine._setup"):
        make_engine()
    expected = "applied" if sys.platform.startswith("linux") else f"not applied: {sys.platform} is not Linux with glibc"
    assert [r.getMessage() for r in caplog.records if "host allocator" in r.getMessage()] == [
        f"host allocator keeps freed memory: {expected}"]
