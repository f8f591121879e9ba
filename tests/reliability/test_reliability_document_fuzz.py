"""Valid documents with one field at a boundary value, signed, against the real server on both
databases (testbed/document_fuzz.py): every answer below 500, and a normal upload after
each still gets its verdict. `python -m benchmarks.reliability.fuzz_documents` is the long
version."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings

from testbed.document_fuzz import (
    Case,
    Tally,
    Uploader,
    cases,
    known_cases,
    seed_baseline,
)
from testbed.gate_helpers import LiveServer, create_token

EXAMPLES = 60  # per database, plus the known cases: ~130 cases in all, ~30 s


@pytest.fixture
def uploader(live_server: LiveServer) -> Iterator[Uploader]:
    token = create_token(live_server.database_url, branches=("main",))
    client = Uploader(live_server.url, token.secret)
    seed_baseline(client)
    try:
        yield client
    finally:
        client.close()


@pytest.mark.timeout(300)
def test_boundary_documents_never_get_a_5xx_and_the_gate_keeps_answering(
    uploader: Uploader, live_server: LiveServer
) -> None:
    tally = Tally()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(cases())
    def one(case: Case) -> None:
        uploader.check(case, tally)

    for known in known_cases():  # the cases that answered 500 before
        one = example(known)(one)

    one()
    assert tally.cases >= EXAMPLES // 2, tally.line()
    assert not tally.server_errors, "\n".join(tally.server_errors[:10])
    assert not tally.lost_verdicts, "\n".join(tally.lost_verdicts[:10])
    assert "Traceback" not in live_server.log.read_text(), live_server.log.read_text()[-3000:]
    # The cases reach storage, not only the validator: some were stored (201).
    assert tally.statuses[201] > 0 and tally.statuses[422] > 0, tally.line()
