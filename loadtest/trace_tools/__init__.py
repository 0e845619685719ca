"""Trace tools: synthesized traces (generator, the committed standard set), what a trace says
about its users (duty cycle per mode), and the `trace-gen` / `trace-export` commands. The format
itself (parse, validate, write) is the daemon's: sessiond.traces."""
