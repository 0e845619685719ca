"""Load-test tooling, apart from the daemon it measures: replay a trace against a running daemon
and report what each user saw (`replay`), compare admission policies on one trace
(`replay.compare`), and synthesize, describe and export traces (`trace_tools`).

It drives the daemon through the public protocol (protocols.client) and reads the trace format
that the daemon's recorder writes (sessiond.traces). It may import sessiond; nothing in
sessiond's runtime imports it (only the `sessiond` command line dispatches into it)."""
