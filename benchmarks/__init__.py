"""Measurements, run from the repository root as `python -m benchmarks.<name>` (so they import
the shared helpers as `tests.support.<module>`, with no path edits)."""
