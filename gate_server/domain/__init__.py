"""The domain: uploads and re-gating, baselines, accepts, change points, bisection, alerts,
tokens and who may act. Raises domain errors (gate_server/errors.py), never an HTTP status."""
