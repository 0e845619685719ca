"""The engine benchmark (`python -m enginetools.bench`): argument parsing, workloads, timing,
FLOP counts, reports and plots, one module each; `decoder` and `overlap` are benchmarks of their own."""
