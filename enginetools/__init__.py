"""Tools around the engine core: benchmarks (`bench/`), profiling, checkpoint conversion and the
GPU host's self-check. Each runs as `python -m enginetools.<name>`; the core never imports them."""
