"""Poll a running daemon's ``/v1/capacity`` once a second into a JSON-lines file.

    python3 scripts/capacity_poll.py LOG OUT.jsonl

LOG is the log ``sessiond replay-compare`` writes (its line "``... ready after N s at
http://HOST:PORT``" names each daemon it starts); every poll appends the capacity document with
``t`` (the daemon's clock) and ``url``. It follows a new daemon when the log names one and runs until
killed. Only the standard library: the GPU host has no web client beside the carried wheels.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

_READY = re.compile(r"ready after [0-9.]+ s at (http://[0-9.:\[\]a-z]+)")


def _latest_url(log: Path) -> str | None:
    try:
        found = _READY.findall(log.read_text(errors="replace"))
    except OSError:
        return None
    return found[-1] if found else None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: capacity_poll.py LOG OUT.jsonl", file=sys.stderr)
        return 2
    log, out = Path(argv[0]), Path(argv[1])
    with out.open("a") as sink:
        while True:
            url = _latest_url(log)
            if url is not None:
                try:
                    with urllib.request.urlopen(url + "/v1/capacity", timeout=2.0) as response:
                        document = json.load(response)
                    document["url"] = url
                    document.setdefault("t", time.time())
                    sink.write(json.dumps(document) + "\n")
                    sink.flush()
                except (OSError, urllib.error.URLError, ValueError) as error:
                    sink.write(json.dumps({"url": url, "t": time.time(), "error": str(error)}) + "\n")
                    sink.flush()
            time.sleep(1.0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
