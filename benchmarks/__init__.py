"""Measurements in suites, run from the repository root as `python -m benchmarks.<suite>.<name>`
(so they import the helpers they share with the tests as `testbed.<module>`, with no path
edits)."""
