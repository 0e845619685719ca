"""Load traces (docs/traces.md v1) as the daemon owns them: the format (parse, validate, write) and the
recorder. Generating, describing and replaying traces is the loadtest package's."""

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
