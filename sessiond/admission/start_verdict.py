"""The same verdict on every start of the same machine.

A start's profile measures what this start measures: on the 2-core box one World session's cost
moved 0.54-0.60 engine s per media s between quiet starts (CPU time, the same code), and where the
Director count sits at its edge (two fit when c(2) <= ~0.50) that flipped the verdict in 2 of 10
starts. More samples within a start do not help: a start's own quartiles are 2% apart, the
start-to-start spread is systematic (the process, its memory, its core).

So each start also reads its machine's history (`StartHistory`, a JSON-lines file per user, one
record per start, keyed by a fingerprint of the machine, the software and the settings that decide
the verdict) and:
1. states the uncertainty: the relative start-to-start spread of the cost rate over the recorded
   starts and this one, at the batch size that varies most (at least `MIN_SPREAD`, at most
   `MAX_SPREAD`);
2. centres the profile on the machine's median (once three starts are on record: each profiled
   batch's rate moved to the median of that batch over the starts on record) and asks what the policy would
   serve with the profile read at both ends of the uncertainty around it (x (1 - spread) and
   x (1 + spread)); where both give the same sessions per mode, the verdict is certain and the
   profile is planned at the centre;
3. where they differ the verdict is at its edge: it takes the cautious reading (the profile read
   at its upper end), which, read around the machine's median, is the same from start to start;
   without a history (`--start-history off`) it plans as measured and only states the edge.
   Admission then plans with the profile at the scale that gives that verdict, so what the start
   says and what it admits agree. (It used to keep the last start's verdict when that was any of
   the readings: on a 2-core AMD box whose engine ran 0.84-1.27 s per media s across starts an
   hour apart, that kept a Director planned at the machine's median, and the director admitted
   played with stalls and late starts when the box slowed for a few minutes: 1 and then 2 sessions
   outside objective on a family of eleven traces.)
The record of this start is appended (the last `KEEP` per fingerprint are kept). A missing,
unreadable or corrupt history only costs the centring and the measured spread: the start never
fails for it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["KEEP", "MAX_SPREAD", "MIN_SPREAD", "StartHistory", "StartRecord", "Verdict", "default_history_path",
           "fingerprint", "settle_verdict"]

logger = logging.getLogger(__name__)

KEEP = 10  # records kept per fingerprint
MIN_SPREAD = 0.05  # the uncertainty assumed with few starts on record (measured: +-5% on the 2-core box)
MAX_SPREAD = 0.25  # beyond this the machine is too noisy for any history to decide
_MIN_STARTS_FOR_SPREAD = 3  # starts on record (with this one) before their spread is taken as measured


@dataclass(frozen=True)
class StartRecord:
    fingerprint: str
    at: float  # unix seconds
    world_cost_b1: float  # this start's measured World cost rate at batch 1 (profile as measured)
    serves: dict[str, int]  # the verdict this start settled on
    scale: float  # the factor on the machine's median it planned with (1 + spread: the cautious reading)
    costs: dict[str, float] = field(default_factory=dict)  # batch -> measured cost rate (engine s per media s)


@dataclass(frozen=True)
class Verdict:
    """What `settle_verdict` decided, for the log, the summary and /v1/capacity."""

    serves: dict[str, int]
    scale: float  # the factor on `center` planned with
    certain: bool
    spread: float  # relative start-to-start spread used
    starts: int  # starts on record with this one
    readings: dict[str, list[int]] = field(default_factory=dict)  # mode -> [at upper cost, as measured, at lower]
    kept_from_last: bool = False
    history: str | None = None  # the file (None: no history)
    center: dict[str, float] = field(default_factory=dict)  # batch -> the scale to the machine's median

    def to_json(self) -> dict[str, Any]:
        return {"serves": dict(self.serves), "profile_scale": self.scale, "certain": self.certain,
                "spread": round(self.spread, 4), "starts_on_record": self.starts,
                "readings": {m: list(r) for m, r in self.readings.items()}, "kept_from_last": self.kept_from_last,
                "center": {b: round(c, 4) for b, c in self.center.items()},
                "history": self.history}

    def phrase(self) -> str:
        """A clause for the start's statement."""
        if self.certain:
            return f"the same within the +-{self.spread:.0%} this machine's starts vary"
        ranges = ", ".join(f"{m} {min(r)}-{max(r)}" for m, r in self.readings.items() if min(r) != max(r))
        how = ("as measured (no start history)" if self.history is None
               else "the cautious reading, as the last start's" if self.kept_from_last else "the cautious reading")
        return f"at its edge within the +-{self.spread:.0%} this machine's starts vary ({ranges}): {how}"


def default_history_path() -> Path:
    """Where a user's starts are kept: $XDG_CACHE_HOME/sessiond/starts.jsonl (~/.cache by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sessiond" / "starts.jsonl"


def fingerprint(settings: Mapping[str, Any]) -> str:
    """A short digest of the machine (CPU model, cores, Python, platform) and `settings` (model,
    device, threads, objectives, software versions): starts with equal fingerprints share a history."""
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        cpu = platform.processor()
    machine = {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "system": platform.platform()}
    blob = json.dumps({"machine": machine, "settings": dict(settings)}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class StartHistory:
    """The starts of this user's daemons, one JSON line each (see the module doc)."""

    def __init__(self, path: Path, keep: int = KEEP) -> None:
        self.path = path
        self.keep = keep

    def load(self, fp: str) -> list[StartRecord]:
        """This fingerprint's records, oldest first; lines that do not parse are skipped."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                raw = json.loads(line)
                record = StartRecord(fingerprint=str(raw["fingerprint"]), at=float(raw["at"]),
                                     world_cost_b1=float(raw["world_cost_b1"]),
                                     serves={str(k): int(v) for k, v in dict(raw["serves"]).items()},
                                     scale=float(raw["scale"]),
                                     costs={str(k): float(v) for k, v in dict(raw.get("costs") or {}).items()})
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            if record.fingerprint == fp:
                out.append(record)
        return out

    def append(self, record: StartRecord) -> None:
        """Add `record`, keeping the last `keep` of its fingerprint (others' records untouched);
        written to a temporary file and renamed, so a crash mid-write leaves the old file."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError:
            lines = []
        mine: list[str] = []
        others: list[str] = []
        for line in lines:
            try:
                (mine if json.loads(line).get("fingerprint") == record.fingerprint else others).append(line)
            except (ValueError, AttributeError):
                continue  # a corrupt line is dropped
        mine = [*mine, json.dumps(asdict(record), sort_keys=True)][-self.keep:]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text("".join(f"{line}\n" for line in [*others, *mine]), encoding="utf-8")
        tmp.replace(self.path)


def _relative_spread(starts: list[dict[str, float]]) -> float:
    """The interquartile range over the median of each batch's cost rate across `starts` (each a
    batch -> cost rate map), the largest over the batches every start measured: the verdict hangs on the
    batch at its edge (on the 2-core box c(2) decides the Director count), and one batch's rate
    can move between starts more than another's."""
    if len(starts) < _MIN_STARTS_FOR_SPREAD:
        return MIN_SPREAD
    shared = set.intersection(*(set(s) for s in starts))
    worst = 0.0
    for batch in shared:
        rates = sorted(s[batch] for s in starts)
        mid = statistics.median(rates)
        # the interquartile range: one disturbed start (a neighbour on the cores for its whole profile)
        # moves it little, where it would stretch the full range for the next ten starts
        q1, q3 = _quantile(rates, 0.25), _quantile(rates, 0.75)
        worst = max(worst, (q3 - q1) / mid if mid > 0 else MAX_SPREAD)
    return min(MAX_SPREAD, max(MIN_SPREAD, worst))


def _center(starts: list[dict[str, float]], mine: dict[str, float]) -> dict[str, float]:
    """Per batch this start measured, the scale that moves its rate to the median of the starts on
    record that measured that batch (1 until three have)."""
    out = {}
    for batch, own in mine.items():
        rates = [s[batch] for s in starts if batch in s]
        enough = len(rates) >= _MIN_STARTS_FOR_SPREAD and own > 0
        out[batch] = min(2.0, max(0.5, statistics.median(rates) / own)) if enough else 1.0
    return out


def _quantile(ordered: list[float], q: float) -> float:
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def settle_verdict(costs: Mapping[int, float], serves_at: Callable[[Mapping[int, float]], dict[str, int]],
                   set_scale: Callable[[Mapping[int, float]], None], history: StartHistory | None, fp: str,
                   now: Callable[[], float] = time.time) -> Verdict:
    """Decide this start's verdict (module doc). `costs`: this start's measured cost rate per
    profiled batch (batch 1 among them); `serves_at(scales)`: sessions per mode the policy serves
    with each batch's profile at `scales[batch]` x as measured; `set_scale(scales)`: plan so."""
    mine = {str(b): float(c) for b, c in costs.items()}
    world_cost_b1 = mine.get("1", next(iter(mine.values())))
    past: list[StartRecord] = []
    if history is not None:
        try:
            past = history.load(fp)
        except Exception:  # the history is a convenience: nothing in it may stop a start
            logger.warning("start history %s unreadable: deciding as if it were empty", history.path, exc_info=True)
    starts = [r.costs or {"1": r.world_cost_b1} for r in past] + [mine]
    spread = _relative_spread(starts)
    center = _center(starts, mine)

    def at(factor: float) -> dict[int, float]:
        return {int(b): min(2.0, max(0.5, c * factor)) for b, c in center.items()}

    factors = (1.0 + spread, 1.0, 1.0 - spread)  # cautious, the machine's median, hopeful
    readings = [serves_at(at(f)) for f in factors]
    modes = sorted(readings[1])
    table = {m: [r.get(m, 0) for r in readings] for m in modes}
    certain = readings[0] == readings[2]
    kept = False
    if certain or history is None:  # no history: as measured, its uncertainty still stated
        factor = 1.0
    else:
        # at its edge the cautious reading, whatever the last start said: around the machine's
        # median it is the same from start to start, and a hopeful one admits into stalls when
        # the machine runs slower for a while (module doc)
        factor = factors[0]
        kept = bool(past) and readings[0] == past[-1].serves
    set_scale(at(factor))
    verdict = serves_at(at(factor))
    result = Verdict(serves=verdict, scale=factor, certain=certain, spread=spread, starts=len(past) + 1,
                     readings=table, kept_from_last=kept, history=None if history is None else str(history.path),
                     center=center)
    if history is not None:
        try:
            history.append(StartRecord(fp, now(), world_cost_b1, dict(verdict), factor, mine))
        except OSError:
            logger.warning("start history %s not writable: this start is not recorded", history.path, exc_info=True)
    return result
