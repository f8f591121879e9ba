"""A bounded schemathesis run in the suite: every operation in /openapi.json of the real server
on loopback, with no token, a CI token and a viewer token, valid and invalid data, a few cases
each. No 5xx and nothing outside the documented statuses, content types and schemas.
`python -m benchmarks.reliability.fuzz_api` is the long version (and prints the counts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed import fuzz


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_every_documented_operation_survives_schemathesis(
    database_url: str, tmp_path: Path
) -> None:
    totals = fuzz.run(database_url, tmp_path, examples=3, quiet=True)
    assert totals.cases >= 100, totals.cases  # every operation, token and mode got cases
    assert not totals.failures, "\n".join(totals.failures[:10])
    assert totals.tracebacks == 0
