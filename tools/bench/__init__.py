"""Benchmarks on the real local stack (``python -m tools.bench``: see __main__.py).

One module per benchmark, each importing common.py and never another benchmark;
the entry point imports them; report.py writes the summary and the plots."""
