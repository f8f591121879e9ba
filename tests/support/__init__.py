"""What tests and benchmarks share: result factories, the gate server on loopback, the GitHub
fake, misbehaving servers, an OIDC issuer, the act harness and the API fuzzer.

Imported as `tests.support.<module>` from the repository root: pytest puts the root on the
path (tests/ is a package), and benchmarks run as `python -m benchmarks.<name>` from there.
"""
