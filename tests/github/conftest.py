"""The GitHub tests' fixture: the OIDC issuer of the accept workflow's token."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testbed.oidc_issuer import OidcIssuer


@pytest.fixture(scope="module")
def issuer() -> Iterator[OidcIssuer]:
    """An OIDC issuer on loopback whose job token is the one GitHub issues for alice's comment."""
    server = OidcIssuer()
    server.job_claims = {
        "event_name": "issue_comment",
        "ref": "refs/heads/master",
        "actor": "alice",  # who commented: GitHub issues the workflow's token for them
    }
    yield server
    server.close()
