"""What tests and benchmarks share, kept out of both: result factories, the gate server on
loopback, the GitHub fake, misbehaving servers, real receivers, an OIDC issuer, the act harness,
the API fuzzer and old database schemas. Not shipped (pyproject.toml packages only the product).

Imported as `testbed.<module>` from the repository root: pytest puts the root on the path, and
benchmarks run as `python -m benchmarks.<suite>.<name>` from there.
"""
