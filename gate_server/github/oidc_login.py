"""An OIDC token in place of a CI token: verified, bound to a registered repository, spent once.

The token acts with the scope of the repository's newest unrevoked CI token (its baseline
branches), so `rnx token revoke` also turns OIDC off for that repository. A workflow running
pull-request code (ref refs/pull/...) or any branch outside those patterns may upload and
read, but never make or accept a baseline.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from gate_server.clock import utcnow
from gate_server.db import Database, audit, oidc_tokens, repositories, tokens
from gate_server.db.repositories import Repository
from gate_server.db.tokens import CI, TokenRecord
from gate_server.errors import Forbidden, Unauthenticated
from gate_server.github.oidc import OidcClaims, OidcError, OidcVerifier
from rnx.branches import branch_matches

_UNAUTHORIZED = {"WWW-Authenticate": "Bearer"}


def oidc_principal(database: Database, verifier: OidcVerifier, token: str) -> TokenRecord:
    """The CI scope an OIDC token acts with (its repository's newest CI token's, minus the
    baseline branches when the workflow runs pull-request code); the use is audited."""
    try:
        claims = verifier.verify(token)
    except OidcError as e:
        raise Unauthenticated(str(e), code="bad_oidc_token") from None
    with database.write() as conn:
        repo = _registered(conn, claims)
        ci_tokens = tokens.active_ci(conn, repo.id)
        if not ci_tokens:
            raise Forbidden(
                f"{repo.name} has no unrevoked CI token; an OIDC token acts with its scope, "
                "so create one with `rnx token create`",
                code="no_ci_token",
            )
        scope = ci_tokens[-1]
        if not oidc_tokens.spend(conn, claims.jti, repo.id, claims.expires_at):
            raise Unauthenticated(
                "this OIDC token (jti) was used before; request a fresh token for each request",
                code="replayed_oidc_token",
            )
        trusted = (
            claims.branch is not None
            and not claims.event_name.startswith("pull_request")
            and branch_matches(scope.branches, claims.branch)
        )
        audit.record(
            conn,
            actor=f"oidc:{claims.repository}",
            token_id=scope.id,
            action="oidc.authenticate",
            subject=f"repository:{repo.name}",
            details={
                "jti": claims.jti,
                "ref": claims.ref,
                "sha": claims.sha,
                "event": claims.event_name,
                "github_actor": claims.actor,
                "baseline_scope": trusted,
            },
        )
    now = utcnow()
    return TokenRecord(
        id=scope.id,
        kind=CI,
        workspace_id=repo.workspace_id,
        workspace=repo.workspace,
        repository_id=repo.id,
        repository=repo.name,
        branches=list(scope.branches) if trusted else [],
        prefix="oidc",
        token_hash="",
        created_at=now,
        revoked_at=None,
        last_used_at=now,
        github_actor=claims.actor or None,
    )


def _registered(conn: Connection, claims: OidcClaims) -> Repository:
    """The registered repository the token's claims name, by GitHub's id."""
    repo = repositories.by_github_id(conn, claims.repository_id)
    if repo is None and repositories.bind_github_id(conn, claims.repository_id, claims.repository):
        # GitHub signed both the name and the id: the first token (or verified webhook
        # delivery) ties the id to the registered repository of that name, once.
        repo = repositories.by_github_id(conn, claims.repository_id)
    if repo is None:
        raise Forbidden(
            f"{claims.repository} (GitHub id {claims.repository_id}) is not registered "
            "here, or that name is registered with another GitHub id: create its CI token "
            "(`rnx token create --repo OWNER/NAME`) first (docs/accept.md)",
            code="repository_not_registered",
        )
    if repo.name.lower() != claims.repository.lower():
        raise Forbidden(
            f"the OIDC token is for {claims.repository}, but GitHub id "
            f"{claims.repository_id} is registered as {repo.name}; a repository webhook "
            "(event 'repository', renamed) updates the name",
            code="repository_mismatch",
        )
    return repo
