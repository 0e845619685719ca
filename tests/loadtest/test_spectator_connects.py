"""`python -m loadtest.spectator_connects`: the daemon's own cost of spectator connects, measured
through a real served daemon (tiny model) from one client process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from loadtest.spectator_connects import thread_cpu_s


def test_it_measures_one_by_one_and_burst_connects_of_a_served_session() -> None:
    done = subprocess.run([sys.executable, "-m", "loadtest.spectator_connects", "--model", "tiny", "--spectators", "6",
                           "--warm-s", "0.5", "--idle-s", "0.5"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["model"], report["spectators"]) == ("tiny", 6)
    assert report["provenance"]["command"] == ("python -m loadtest.spectator_connects --model tiny --spectators 6 "
                                               "--warm-s 0.5 --idle-s 0.5")
    assert report["one_by_one"]["welcome_ms_median"] > 0 and report["one_by_one"]["wall_s"] > 0
    burst = report["burst"]
    assert 0 < burst["welcome_ms_max"] <= burst["first_frame_ms_max"] <= burst["all_first_frames_s"] * 1e3 + 1
    assert burst["loop_cpu_s"] >= 0 and report["loop_cores_owner_only"] >= 0


def test_a_burst_of_no_spectators_is_refused_in_words() -> None:
    done = subprocess.run([sys.executable, "-m", "loadtest.spectator_connects", "--spectators", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--spectators takes a whole number >= 1, got 0" in done.stderr


def test_thread_cpu_reads_this_process_main_thread() -> None:
    before = thread_cpu_s(os.getpid())
    sum(i * i for i in range(2_000_000))  # about 0.1 s of this thread's CPU
    assert thread_cpu_s(os.getpid()) > before
