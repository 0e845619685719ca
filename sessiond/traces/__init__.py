"""Load traces (TRACES.md v1): format, generator, statistics, recorder."""

from sessiond.traces.errors import TraceError
from sessiond.traces.format import (
           Trace,
           TraceEvent,
           TraceHeader,
           dump_trace,
           load_trace,
           parse_trace,
           write_trace,
)

__all__ = ["Trace", "TraceError", "TraceEvent", "TraceHeader", "dump_trace", "load_trace", "parse_trace",
           "write_trace"]
