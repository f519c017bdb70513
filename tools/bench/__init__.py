"""Benchmarks on the real local stack (``python -m tools.bench``: see __main__.py).

One module per benchmark, each importing only common.py (and the stack); the
entry point imports them; report.py writes the summary and the plots."""
