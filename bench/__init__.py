"""Reproducible benchmarks (``python -m bench.all``); each module is also a command of its own."""
