"""Benchmarks on the real local stack: ``python -m tools.bench`` (see __main__.py),
and the two soaks, commands of their own (``python -m tools.bench.soak``,
``python -m tools.bench.fault_soak``).

One module per benchmark, each importing common.py (scale.py also uses the fleet,
compare and latency benchmarks' parts); the entry point imports them, the soaks
aside; report.py writes the summary and the plots.  Each saves its JSON in
bench-results/ (common.save)."""
