"""All of the server's SQL: tables, versioned migrations and the queries (SQLite or PostgreSQL)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError

from rnx.errors import UserError

metadata = MetaData()

migrations = Table(
    "rnx_schema_migrations",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("name", String(200), nullable=False),
    Column("applied_at", DateTime(timezone=True), nullable=False),
)

workspaces = Table(
    "workspaces",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(100), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

repositories = Table(
    "repositories",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("workspace_id", Integer, ForeignKey("workspaces.id"), nullable=False),
    Column("name", String(201), nullable=False),  # OWNER/NAME as GitHub spells it
    # GitHub's numeric id survives renames; OIDC and GitHub App installs key repositories by it.
    Column("github_repository_id", BigInteger, nullable=True, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("workspace_id", "name", name="uq_repositories_workspace_name"),
)

tokens = Table(
    "tokens",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("kind", String(10), nullable=False),  # "ci" | "viewer"
    Column("workspace_id", Integer, ForeignKey("workspaces.id"), nullable=False),
    Column("repository_id", Integer, ForeignKey("repositories.id"), nullable=True),
    Column("branches", Text, nullable=False),  # JSON list of baseline-branch patterns
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("prefix", String(16), nullable=False),  # shown in listings; not enough to use
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Column("last_used_at", DateTime(timezone=True), nullable=True),
)

runs = Table(
    "runs",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("run_id", String(36), nullable=False, unique=True),
    Column("workspace_id", Integer, ForeignKey("workspaces.id"), nullable=False),
    Column("repository_id", Integer, ForeignKey("repositories.id"), nullable=False),
    Column("token_id", Integer, ForeignKey("tokens.id"), nullable=True),
    Column("sha", String(64), nullable=False),
    Column("branch", String(255), nullable=False),
    Column("base_branch", String(255), nullable=True),
    Column("event", String(64), nullable=False),
    Column("pr_number", Integer, nullable=True),
    Column("environment_key", String(128), nullable=False),
    Column("tier", String(5), nullable=False),
    Column("answer", Text, nullable=False),  # the JSON answer of the upload, replayed verbatim
    Column("document", LargeBinary, nullable=False),  # the uploaded bytes, exactly
    Column("body_sha256", String(64), nullable=False),
    Column("signature", String(80), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),  # from the document
    Column("received_at", DateTime(timezone=True), nullable=False),
    # Set when the run is a baseline: for which branch, since when (orders the history).
    Column("baseline_branch", String(255), nullable=True),
    Column("baseline_at", DateTime(timezone=True), nullable=True),
    Column("accepted_at", DateTime(timezone=True), nullable=True),
    Column("accepted_by", String(200), nullable=True),
    Column("accept_reason", Text, nullable=True),
    Column("accepted_via", String(32), nullable=True),
    # The baseline lookup reads only this index, however many runs are stored.
    Index(
        "ix_runs_baseline",
        "repository_id",
        "baseline_branch",
        "environment_key",
        "baseline_at",
        "id",
    ),
    Index("ix_runs_repository_received", "repository_id", "received_at"),
)

audit_log = Table(
    "audit_log",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("actor", String(200), nullable=False),
    Column("token_id", Integer, nullable=True),
    Column("action", String(64), nullable=False),
    Column("subject", String(200), nullable=False),
    Column("details", Text, nullable=False),
)

server_keys = Table(
    "server_keys",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("private_key_pem", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# Tables added after version 1 live in their own MetaData, so version 1's create_all keeps
# creating exactly the version-1 schema and each later table is created by its migration.
renames_metadata = MetaData()

# One row per branch rename followed (GitHub-confirmed or recorded by an admin), oldest first.
# Rows are never changed or deleted: resolving a name replays them in order (follow_renames),
# which is what keeps cycles (a->b->a) and chains (a->b->c) right, and keeps every name a
# run was uploaded under explainable.
branch_renames = Table(
    "branch_renames",
    renames_metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("repository_id", Integer, ForeignKey(repositories.c.id), nullable=False),
    Column("from_branch", String(255), nullable=False),
    Column("to_branch", String(255), nullable=False),
    Column("renamed_at", DateTime(timezone=True), nullable=False),
    Column("actor", String(200), nullable=False),
    Column("via", String(32), nullable=False),
    Index("ix_branch_renames_repository", "repository_id", "id"),
)


def _v1_initial(conn: Connection) -> None:
    # Version 1 is the tables above. When a table changes, add version 2 with the ALTERs and
    # freeze this one by copying today's table definitions into it.
    metadata.create_all(conn, checkfirst=True)


def _v2_github(conn: Connection) -> None:
    # The GitHub integration's own tables (webhook deliveries, spent OIDC token ids).
    from gate_server.github.store import create_tables

    create_tables(conn)


def _v3_branch_renames(conn: Connection) -> None:
    renames_metadata.create_all(conn, checkfirst=True)


# (version, name, apply): applied in order, each once, inside one transaction.
MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (1, "workspaces, repositories, tokens, runs, audit log, server keys", _v1_initial),
    (2, "github webhook deliveries, spent OIDC token ids", _v2_github),
    (3, "branch renames", _v3_branch_renames),
]
LATEST_VERSION = MIGRATIONS[-1][0]
_PG_MIGRATION_LOCK = 727_274_001  # any constant: serialises migrations across processes
# First key of the (int, int) advisory locks that order a repository's branch renames against
# its uploads and accepts; the second key is the repository id.
_PG_BRANCH_LOCK = 727_274_002
MAX_BRANCH_CHARS = 255  # the runs' branch columns


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _aware(value: datetime | None) -> datetime | None:
    # SQLite hands datetimes back without a zone; everything stored is UTC.
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


@dataclass(frozen=True)
class TokenRecord:
    id: int
    kind: str
    workspace_id: int
    workspace: str
    repository_id: int | None
    repository: str | None
    branches: list[str]
    prefix: str
    token_hash: str
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None


@dataclass(frozen=True)
class RunRecord:
    id: int
    run_id: str
    workspace_id: int
    repository_id: int
    repository: str
    token_id: int | None
    sha: str
    branch: str
    base_branch: str | None
    event: str
    pr_number: int | None
    environment_key: str
    tier: str
    answer: dict[str, Any]
    body_sha256: str
    signature: str
    created_at: datetime
    received_at: datetime
    baseline_branch: str | None
    baseline_at: datetime | None
    accepted_at: datetime | None
    accepted_by: str | None
    accept_reason: str | None
    accepted_via: str | None


@dataclass(frozen=True)
class BranchRename:
    id: int
    from_branch: str
    to_branch: str
    renamed_at: datetime
    actor: str
    via: str


@dataclass(frozen=True)
class BranchRenameResult:
    repository: str
    old: str
    new: str
    changed: bool  # False: this rename was followed before (a redelivery, a repeated command)
    runs_moved: int  # baseline runs that count for `new` now
    tokens_widened: list[int]  # CI tokens whose branches named `old` and now also name `new`


def check_branch_name(value: str, what: str) -> str:
    """A branch name as git allows it, as far as the server cares: the columns hold 255
    characters, and whitespace or control characters would only hide a typo."""
    if not isinstance(value, str) or not value:
        raise UserError(f"{what} is empty; name a branch, e.g. main")
    if len(value) > MAX_BRANCH_CHARS:
        raise UserError(f"{what} has {len(value)} characters; at most {MAX_BRANCH_CHARS}")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise UserError(f"{what} {value!r} has whitespace or control characters; git refuses those")
    return value


def follow_renames(renames: Sequence[BranchRename], name: str) -> tuple[str, list[BranchRename]]:
    """The name that a branch uploaded as `name` has now, and the renames that led there.

    `renames` is a repository's log, oldest first. The first step is the newest rename that
    mentions `name`: when it renamed another branch *to* `name`, `name` is a live branch's
    name and stays. Each later step is the first rename of the name reached that came after
    the step before (a later rename of that name is of a branch that took the name since).
    Ids grow with every step, so a cycle (a->b, then b->a) ends, at the live name."""
    newest = None
    for r in renames:
        if name in (r.from_branch, r.to_branch):
            newest = r
    if newest is None or newest.from_branch != name:
        return name, []
    path = [newest]
    while True:
        step = path[-1]
        later = next(
            (r for r in renames if r.id > step.id and r.from_branch == step.to_branch), None
        )
        if later is None:
            return step.to_branch, path
        path.append(later)


def former_names(renames: Sequence[BranchRename], name: str) -> list[str]:
    """The names that now lead to the branch called `name` (not `name` itself), oldest first."""
    seen = dict.fromkeys(n for r in renames for n in (r.from_branch, r.to_branch))
    return [n for n in seen if n != name and follow_renames(renames, n)[0] == name]


def load_branch_renames(conn: Connection, repository_id: int) -> list[BranchRename]:
    """A repository's rename log, oldest first (a handful of rows: one per rename ever)."""
    rows = conn.execute(
        select(branch_renames)
        .where(branch_renames.c.repository_id == repository_id)
        .order_by(branch_renames.c.id)
    )
    return [
        BranchRename(
            id=int(r.id),
            from_branch=str(r.from_branch),
            to_branch=str(r.to_branch),
            renamed_at=_aware(r.renamed_at) or utcnow(),
            actor=str(r.actor),
            via=str(r.via),
        )
        for r in rows
    ]


def branch_names(conn: Connection, repository_id: int, branch: str) -> list[str]:
    """The branch's name now, then every name it had: what its history is recorded under."""
    renames = load_branch_renames(conn, repository_id)
    current = follow_renames(renames, branch)[0]
    return [current, *former_names(renames, current)]


class Storage:
    """One database: SQLite (a file, WAL) or PostgreSQL, chosen by the URL."""

    def __init__(self, url: str, *, pool_size: int = 10):
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise UserError(
                f"{url!r} is not a database URL; use sqlite:///path/to/file.db or "
                "postgresql+psycopg://user@host:5432/dbname"
            ) from None
        self.url = url
        self.dialect = parsed.get_backend_name()
        if self.dialect == "sqlite":
            self.engine = _sqlite_engine(url, parsed.database)
        elif self.dialect == "postgresql":
            self.engine = create_engine(
                url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True
            )
        else:
            raise UserError(f"unsupported database {self.dialect!r}: use SQLite or PostgreSQL")

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction; on SQLite it takes the write lock up front (BEGIN IMMEDIATE) so
        two writers queue on busy_timeout instead of one failing with 'database is locked'."""
        with self.engine.connect() as conn:
            conn.execution_options(rnx_write=True)
            with conn.begin():
                yield conn

    # ---- schema

    def migrate(self) -> int:
        """Bring the schema to LATEST_VERSION; safe when several processes start at once."""
        with self.write() as conn:
            if self.dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
            migrations.create(conn, checkfirst=True)
            done = set(conn.execute(select(migrations.c.version)).scalars())
            newer = [v for v in done if v > LATEST_VERSION]
            if newer:
                raise UserError(
                    f"the database has schema version {max(newer)}, newer than this server "
                    f"knows ({LATEST_VERSION}); upgrade rnx-benchmark before serving it"
                )
            for version, name, apply in MIGRATIONS:
                if version not in done:
                    apply(conn)
                    conn.execute(
                        insert(migrations).values(version=version, name=name, applied_at=utcnow())
                    )
        return LATEST_VERSION

    def schema_version(self) -> int:
        with self.read() as conn:
            return int(conn.execute(select(func.max(migrations.c.version))).scalar_one() or 0)

    def ping(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(select(func.count()).select_from(migrations)).scalar_one()

    # ---- workspaces, repositories, tokens

    def ensure_workspace(self, conn: Connection, name: str) -> int:
        found = conn.execute(select(workspaces.c.id).where(workspaces.c.name == name)).scalar()
        if found is not None:
            return int(found)
        return int(
            conn.execute(
                insert(workspaces).values(name=name, created_at=utcnow()).returning(workspaces.c.id)
            ).scalar_one()
        )

    def ensure_repository(self, conn: Connection, workspace_id: int, name: str) -> int:
        found = conn.execute(
            select(repositories.c.id).where(
                repositories.c.workspace_id == workspace_id,
                func.lower(repositories.c.name) == name.lower(),
            )
        ).scalar()
        if found is not None:
            return int(found)
        return int(
            conn.execute(
                insert(repositories)
                .values(workspace_id=workspace_id, name=name, created_at=utcnow())
                .returning(repositories.c.id)
            ).scalar_one()
        )

    def insert_token(
        self,
        conn: Connection,
        *,
        kind: str,
        workspace_id: int,
        repository_id: int | None,
        branches: Sequence[str],
        token_hash: str,
        prefix: str,
    ) -> int:
        return int(
            conn.execute(
                insert(tokens)
                .values(
                    kind=kind,
                    workspace_id=workspace_id,
                    repository_id=repository_id,
                    branches=json.dumps(list(branches)),
                    token_hash=token_hash,
                    prefix=prefix,
                    created_at=utcnow(),
                )
                .returning(tokens.c.id)
            ).scalar_one()
        )

    def _token_select(self) -> Any:
        return select(
            tokens, workspaces.c.name.label("workspace"), repositories.c.name.label("repository")
        ).select_from(
            tokens.join(workspaces, tokens.c.workspace_id == workspaces.c.id).outerjoin(
                repositories, tokens.c.repository_id == repositories.c.id
            )
        )

    def find_token(self, conn: Connection, token_hash: str) -> TokenRecord | None:
        row = conn.execute(self._token_select().where(tokens.c.token_hash == token_hash)).first()
        return None if row is None else _token(row._mapping)

    def get_token(self, conn: Connection, token_id: int) -> TokenRecord | None:
        row = conn.execute(self._token_select().where(tokens.c.id == token_id)).first()
        return None if row is None else _token(row._mapping)

    def list_tokens(self, conn: Connection) -> list[TokenRecord]:
        rows = conn.execute(self._token_select().order_by(tokens.c.id))
        return [_token(r._mapping) for r in rows]

    def revoke_token(self, conn: Connection, token_id: int, when: datetime) -> bool:
        result = conn.execute(
            update(tokens)
            .where(tokens.c.id == token_id, tokens.c.revoked_at.is_(None))
            .values(revoked_at=when)
        )
        return result.rowcount == 1

    def touch_token(self, conn: Connection, token_id: int, when: datetime) -> None:
        conn.execute(update(tokens).where(tokens.c.id == token_id).values(last_used_at=when))

    # ---- runs

    def _run_select(self, *columns: Any) -> Any:
        return select(*columns, repositories.c.name.label("repository")).select_from(
            runs.join(repositories, runs.c.repository_id == repositories.c.id)
        )

    def _run_columns(self) -> list[Any]:
        return [c for c in runs.c if c.name != "document"]

    def get_run(self, conn: Connection, run_id: str) -> RunRecord | None:
        row = conn.execute(
            self._run_select(*self._run_columns()).where(runs.c.run_id == run_id)
        ).first()
        return None if row is None else _run(row._mapping)

    def get_document(self, conn: Connection, run_id: str) -> bytes | None:
        found = conn.execute(select(runs.c.document).where(runs.c.run_id == run_id)).scalar()
        return None if found is None else bytes(found)

    def insert_run(self, conn: Connection, values: dict[str, Any]) -> bool:
        """Insert one run; False when its run_id is already stored (another upload won)."""
        try:
            with conn.begin_nested():
                conn.execute(insert(runs).values(**values))
        except IntegrityError:
            return False
        return True

    def _baselines_query(
        self, repository_id: int, branch: str, environment_key: str, limit: int
    ) -> Any:
        return (
            self._run_select(*self._run_columns(), runs.c.document)
            .where(
                runs.c.repository_id == repository_id,
                runs.c.baseline_branch == branch,
                runs.c.environment_key == environment_key,
            )
            .order_by(runs.c.baseline_at.desc(), runs.c.id.desc())
            .limit(limit)
        )

    def baselines(
        self, conn: Connection, repository_id: int, branch: str, environment_key: str, limit: int
    ) -> list[tuple[RunRecord, bytes]]:
        """The newest `limit` baseline runs for (repository, branch, environment), newest first."""
        rows = conn.execute(self._baselines_query(repository_id, branch, environment_key, limit))
        return [(_run(r._mapping), bytes(r._mapping["document"])) for r in rows]

    def explain_baselines(self, repository_id: int, branch: str, environment_key: str) -> str:
        """The database's query plan for the baseline lookup (tests and benchmarks check that
        it reads ix_runs_baseline)."""
        query = self._baselines_query(repository_id, branch, environment_key, 6)
        sql = str(query.compile(self.engine, compile_kwargs={"literal_binds": True}))
        with self.read() as conn:
            if self.dialect == "sqlite":
                rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql)
                return " | ".join(str(r[-1]) for r in rows)
            return " | ".join(str(r[0]) for r in conn.exec_driver_sql("EXPLAIN " + sql))

    def mark_baseline(
        self,
        conn: Connection,
        run_id: str,
        *,
        branch: str,
        when: datetime,
        accepted_by: str | None = None,
        reason: str | None = None,
        via: str | None = None,
    ) -> None:
        values: dict[str, Any] = {"baseline_branch": branch, "baseline_at": when}
        if accepted_by is not None:
            values.update(
                accepted_at=when, accepted_by=accepted_by, accept_reason=reason, accepted_via=via
            )
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(**values))

    # ---- branch renames

    def current_branch(self, conn: Connection, repository_id: int, branch: str) -> str:
        """What `branch` of this repository is called now (itself unless it was renamed)."""
        return follow_renames(load_branch_renames(conn, repository_id), branch)[0]

    def lock_branches(self, conn: Connection, repository_id: int, *, exclusive: bool) -> None:
        """Order this transaction against a rename of the repository's branches.

        A rename takes the lock exclusively; an upload or accept takes it shared just before
        it writes a baseline branch, so it cannot store a name that a rename committing at the
        same moment has just moved away. PostgreSQL only: SQLite's write transactions already
        run one at a time (BEGIN IMMEDIATE)."""
        if self.dialect == "postgresql":
            fn = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
            conn.execute(
                text(f"SELECT {fn}(CAST(:k AS integer), CAST(:r AS integer))"),
                {"k": _PG_BRANCH_LOCK, "r": repository_id},
            )

    def rename_branch(
        self, conn: Connection, repository_id: int, old: str, new: str, *, actor: str, via: str
    ) -> BranchRenameResult:
        """Follow a rename of branch `old` to `new`: its baseline history counts for `new`.

        Only the server's own lookup key moves (runs.baseline_branch). What was uploaded stays
        as it was: runs.branch and runs.base_branch keep the names the documents carry, so they
        agree with the stored bytes and the signed receipts, and the rename log keeps which
        name became which. Uploads that still name `old` (CI jobs already running) find the
        new name through that log. CI tokens whose branches list `old` also get `new`, so the
        renamed branch's pushes keep becoming baselines.

        Idempotent: when `old` already leads to `new` through the log, nothing changes (a
        webhook redelivery, one event per retargeted pull request, a repeated command)."""
        old = check_branch_name(old, "the old branch name")
        new = check_branch_name(new, "the new branch name")
        if old == new:
            raise UserError(f"the old and new branch names are the same ({old!r}); nothing to do")
        repository = conn.execute(
            select(repositories.c.name).where(repositories.c.id == repository_id)
        ).scalar()
        if repository is None:
            raise UserError(f"no repository with id {repository_id} is registered")
        self.lock_branches(conn, repository_id, exclusive=True)
        current, path = follow_renames(load_branch_renames(conn, repository_id), old)
        if current != old and new in {r.to_branch for r in path}:
            return BranchRenameResult(str(repository), old, new, False, 0, [])
        moved = conn.execute(
            update(runs)
            .where(runs.c.repository_id == repository_id, runs.c.baseline_branch == old)
            .values(baseline_branch=new)
        ).rowcount
        conn.execute(
            insert(branch_renames).values(
                repository_id=repository_id,
                from_branch=old,
                to_branch=new,
                renamed_at=utcnow(),
                actor=actor,
                via=via,
            )
        )
        widened = self._widen_tokens(conn, repository_id, old, new)
        self.audit(
            conn,
            actor=actor,
            action="branch.rename",
            subject=f"repository:{repository}",
            details={
                "from": old,
                "to": new,
                "via": via,
                "baseline_runs_moved": moved,
                "tokens_widened": widened,
            },
        )
        return BranchRenameResult(str(repository), old, new, True, int(moved), widened)

    def _widen_tokens(self, conn: Connection, repository_id: int, old: str, new: str) -> list[int]:
        # Only a pattern naming `old` exactly: a glob like release/* said nothing about `new`.
        rows = conn.execute(
            select(tokens.c.id, tokens.c.branches)
            .where(
                tokens.c.repository_id == repository_id,
                tokens.c.kind == "ci",
                tokens.c.revoked_at.is_(None),
            )
            .order_by(tokens.c.id)
        ).all()
        widened = []
        for row in rows:
            patterns = list(json.loads(row.branches))
            if old in patterns and new not in patterns:
                conn.execute(
                    update(tokens)
                    .where(tokens.c.id == row.id)
                    .values(branches=json.dumps([*patterns, new]))
                )
                widened.append(int(row.id))
        return widened

    def count_runs(self, conn: Connection) -> int:
        return int(conn.execute(select(func.count()).select_from(runs)).scalar_one())

    # ---- audit log

    def audit(
        self,
        conn: Connection,
        *,
        actor: str,
        action: str,
        subject: str,
        token_id: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        conn.execute(
            insert(audit_log).values(
                at=utcnow(),
                actor=actor,
                token_id=token_id,
                action=action,
                subject=subject,
                details=json.dumps(details or {}, sort_keys=True),
            )
        )

    def audit_entries(self, conn: Connection, subject: str | None = None) -> list[dict[str, Any]]:
        query = select(audit_log).order_by(audit_log.c.id)
        if subject is not None:
            query = query.where(audit_log.c.subject == subject)
        out = []
        for row in conn.execute(query):
            entry = dict(row._mapping)
            entry["at"] = _aware(entry["at"])
            entry["details"] = json.loads(entry["details"])
            out.append(entry)
        return out

    # ---- server keys

    def server_key(self, name: str, generate: Callable[[], str]) -> str:
        """The stored private key called `name`; the first process to ask creates it."""
        with self.read() as conn:
            found = conn.execute(
                select(server_keys.c.private_key_pem).where(server_keys.c.name == name)
            ).scalar()
        if found is not None:
            return str(found)
        with self.write() as conn:
            try:
                with conn.begin_nested():
                    conn.execute(
                        insert(server_keys).values(
                            name=name, private_key_pem=generate(), created_at=utcnow()
                        )
                    )
                    self.audit(conn, actor="server", action="server_key.create", subject=name)
            except IntegrityError:
                pass  # another process stored one first: use theirs
            return str(
                conn.execute(
                    select(server_keys.c.private_key_pem).where(server_keys.c.name == name)
                ).scalar_one()
            )


def _token(m: Any) -> TokenRecord:
    return TokenRecord(
        id=m["id"],
        kind=m["kind"],
        workspace_id=m["workspace_id"],
        workspace=m["workspace"],
        repository_id=m["repository_id"],
        repository=m["repository"],
        branches=json.loads(m["branches"]),
        prefix=m["prefix"],
        token_hash=m["token_hash"],
        created_at=_aware(m["created_at"]) or utcnow(),
        revoked_at=_aware(m["revoked_at"]),
        last_used_at=_aware(m["last_used_at"]),
    )


def _run(m: Any) -> RunRecord:
    return RunRecord(
        id=m["id"],
        run_id=m["run_id"],
        workspace_id=m["workspace_id"],
        repository_id=m["repository_id"],
        repository=m["repository"],
        token_id=m["token_id"],
        sha=m["sha"],
        branch=m["branch"],
        base_branch=m["base_branch"],
        event=m["event"],
        pr_number=m["pr_number"],
        environment_key=m["environment_key"],
        tier=m["tier"],
        answer=json.loads(m["answer"]),
        body_sha256=m["body_sha256"],
        signature=m["signature"],
        created_at=_aware(m["created_at"]) or utcnow(),
        received_at=_aware(m["received_at"]) or utcnow(),
        baseline_branch=m["baseline_branch"],
        baseline_at=_aware(m["baseline_at"]),
        accepted_at=_aware(m["accepted_at"]),
        accepted_by=m["accepted_by"],
        accept_reason=m["accept_reason"],
        accepted_via=m["accepted_via"],
    )


def _sqlite_engine(url: str, database: str | None) -> Engine:
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's begin event below emit BEGIN itself (pysqlite's own is deferred only).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout=30000")
        _switch_to_wal(cur)
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("rnx_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _switch_to_wal(cur: Any, *, wait_s: float = 30.0) -> None:
    """Put the file in WAL mode (an in-memory database stays as it is). The switch needs an
    exclusive lock, and SQLite answers 'database is locked' at once, without its busy handler,
    while another process's first start holds the file; so retry until the deadline."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
        time.sleep(0.05)


# ---- dashboard reads
# Read-only queries for the dashboard's pages (gate_server/dashboard). Each one is bounded by
# a LIMIT and walks an index, so pages stay fast however long a repository's history grows.


@dataclass(frozen=True)
class DashboardRun:
    """A run as the dashboard lists it: no document, no answer, no signature."""

    run_id: str
    repository: str
    sha: str
    branch: str
    base_branch: str | None
    event: str
    pr_number: int | None
    environment_key: str
    tier: str
    created_at: datetime
    received_at: datetime
    baseline_branch: str | None
    accepted_at: datetime | None
    accepted_by: str | None
    accept_reason: str | None


_DASHBOARD_RUN_COLUMNS = (
    runs.c.run_id,
    runs.c.sha,
    runs.c.branch,
    runs.c.base_branch,
    runs.c.event,
    runs.c.pr_number,
    runs.c.environment_key,
    runs.c.tier,
    runs.c.created_at,
    runs.c.received_at,
    runs.c.baseline_branch,
    runs.c.accepted_at,
    runs.c.accepted_by,
    runs.c.accept_reason,
)


def _dashboard_run(m: Any) -> DashboardRun:
    return DashboardRun(
        run_id=m["run_id"],
        repository=m["repository"],
        sha=m["sha"],
        branch=m["branch"],
        base_branch=m["base_branch"],
        event=m["event"],
        pr_number=m["pr_number"],
        environment_key=m["environment_key"],
        tier=m["tier"],
        created_at=_aware(m["created_at"]) or utcnow(),
        received_at=_aware(m["received_at"]) or utcnow(),
        baseline_branch=m["baseline_branch"],
        accepted_at=_aware(m["accepted_at"]),
        accepted_by=m["accepted_by"],
        accept_reason=m["accept_reason"],
    )


def _dashboard_select(*extra: Any) -> Any:
    return select(
        *_DASHBOARD_RUN_COLUMNS, *extra, repositories.c.name.label("repository")
    ).select_from(runs.join(repositories, runs.c.repository_id == repositories.c.id))


def dashboard_repositories(conn: Connection, workspace_id: int) -> list[dict[str, Any]]:
    """The workspace's repositories with their run counts and last upload, latest first.

    Per repository, so both figures come from ix_runs_repository_received alone (a count over
    an index range, a max at its end) instead of a scan of every run in the workspace.
    """
    repos = conn.execute(
        select(repositories.c.id, repositories.c.name).where(
            repositories.c.workspace_id == workspace_id
        )
    ).all()
    out = []
    for repo in repos:
        count, last = conn.execute(
            select(func.count(), func.max(runs.c.received_at)).where(
                runs.c.repository_id == repo.id
            )
        ).one()
        out.append(
            {
                "id": repo.id,
                "name": repo.name,
                "run_count": int(count),
                "last_received_at": _aware(last),
            }
        )
    never = datetime.min.replace(tzinfo=timezone.utc)
    out.sort(key=lambda r: (r["last_received_at"] or never, r["name"]), reverse=True)
    return out


def dashboard_repository(conn: Connection, workspace_id: int, name: str) -> int | None:
    """The id of repository OWNER/NAME in this workspace (case as GitHub: insensitive)."""
    found = conn.execute(
        select(repositories.c.id).where(
            repositories.c.workspace_id == workspace_id,
            func.lower(repositories.c.name) == name.lower(),
        )
    ).scalar()
    return None if found is None else int(found)


def dashboard_latest_per_branch(
    conn: Connection, repository_id: int, *, limit: int = 8, scan: int = 200
) -> list[DashboardRun]:
    """The newest run for each (branch, environment) among the repository's newest `scan`
    runs, most recently active first. A bounded walk down ix_runs_repository_received: a
    branch silent for `scan` uploads is not news for an overview."""
    renames = load_branch_renames(conn, repository_id)
    rows = conn.execute(
        _dashboard_select()
        .where(runs.c.repository_id == repository_id)
        .order_by(runs.c.received_at.desc(), runs.c.id.desc())
        .limit(scan)
    )
    latest: dict[tuple[str, str], DashboardRun] = {}
    for r in rows:
        run = _dashboard_run(r._mapping)
        # A renamed branch is one branch: its newest run, whichever name that run carried.
        branch = follow_renames(renames, run.branch)[0]
        latest.setdefault((branch, run.environment_key), run)
        if len(latest) >= limit:
            break
    return list(latest.values())


def dashboard_recent_runs(
    conn: Connection,
    repository_ids: Sequence[int],
    *,
    tier: str | None = None,
    accepted: bool = False,
    limit: int = 10,
    scan: int = 2000,
) -> list[DashboardRun]:
    """The newest runs of these repositories, optionally only one tier or only accepted ones
    (newest accept first), found among each repository's newest `scan` runs: a bounded walk
    down ix_runs_repository_received, since BLOCKs and accepts are too rare to find by
    walking the whole table."""
    found: list[DashboardRun] = []
    for repository_id in repository_ids:
        newest = (
            select(runs.c.id)
            .where(runs.c.repository_id == repository_id)
            .order_by(runs.c.received_at.desc(), runs.c.id.desc())
            .limit(scan)
            .subquery()
        )
        query = _dashboard_select().where(runs.c.id.in_(select(newest.c.id)))
        if tier is not None:
            query = query.where(runs.c.tier == tier)
        if accepted:
            query = query.where(runs.c.accepted_at.is_not(None))
        order = runs.c.accepted_at.desc() if accepted else runs.c.received_at.desc()
        rows = conn.execute(query.order_by(order, runs.c.id.desc()).limit(limit))
        found.extend(_dashboard_run(r._mapping) for r in rows)
    found.sort(key=lambda r: (r.accepted_at if accepted else None) or r.received_at, reverse=True)
    return found[:limit]


def dashboard_baseline_branches(
    conn: Connection, repository_id: int, *, scan: int = 300
) -> list[str]:
    """Branches with baselines among the repository's newest `scan` runs, most recent first
    (a bounded walk down ix_runs_repository_received, not a DISTINCT over every run)."""
    rows = conn.execute(
        select(runs.c.baseline_branch)
        .where(runs.c.repository_id == repository_id)
        .order_by(runs.c.received_at.desc(), runs.c.id.desc())
        .limit(scan)
    )
    return list(dict.fromkeys(str(b) for b in rows.scalars() if b is not None))


def _history_filter(repository_id: int, names: Sequence[str]) -> Any:
    # The branch's own pushes (BLOCKed ones too, shown as such) under any name it had, and its
    # baselines (a rename moved those to its current name, names[0]).
    return (runs.c.repository_id == repository_id) & (
        (runs.c.branch.in_(list(names)) & runs.c.pr_number.is_(None))
        | (runs.c.baseline_branch == names[0])
    )


def dashboard_history(
    conn: Connection,
    repository_id: int,
    branch: str,
    *,
    environment: str | None = None,
    offset: int = 0,
    limit: int = 120,
) -> list[tuple[DashboardRun, dict[str, Any]]]:
    """A window of a baseline branch's runs, newest first, each with its stored answer.

    Documents are fetched separately (dashboard_documents) and only for runs the dashboard
    has not summarized yet: a stored run never changes.
    """
    names = branch_names(conn, repository_id, branch)
    query = _dashboard_select(runs.c.answer).where(_history_filter(repository_id, names))
    if environment is not None:
        query = query.where(runs.c.environment_key == environment)
    rows = conn.execute(
        query.order_by(runs.c.received_at.desc(), runs.c.id.desc()).offset(offset).limit(limit)
    )
    return [(_dashboard_run(r._mapping), json.loads(r.answer)) for r in rows]


def dashboard_answers(conn: Connection, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The stored answers (tier, reasons, comparisons) of a few runs, by run id."""
    if not run_ids:
        return {}
    rows = conn.execute(select(runs.c.run_id, runs.c.answer).where(runs.c.run_id.in_(run_ids)))
    return {str(r.run_id): json.loads(r.answer) for r in rows}


def dashboard_recent_environments(
    conn: Connection, repository_id: int, branch: str, *, scan: int = 300
) -> list[str]:
    """The environments of a branch's newest `scan` history runs, most recent first: a
    bounded walk, so a repository with a million runs costs what one with a thousand does."""
    rows = conn.execute(
        select(runs.c.environment_key)
        .where(_history_filter(repository_id, branch_names(conn, repository_id, branch)))
        .order_by(runs.c.received_at.desc(), runs.c.id.desc())
        .limit(scan)
    )
    return list(dict.fromkeys(str(e) for e in rows.scalars()))


def dashboard_documents(conn: Connection, run_ids: list[str]) -> dict[str, bytes]:
    """The stored documents of a few runs (a run's baselines), by run id."""
    if not run_ids:
        return {}
    rows = conn.execute(select(runs.c.run_id, runs.c.document).where(runs.c.run_id.in_(run_ids)))
    return {str(r.run_id): bytes(r.document) for r in rows}


def dashboard_audit(
    conn: Connection, workspace_id: int, *, offset: int = 0, limit: int = 100
) -> list[dict[str, Any]]:
    """The workspace's audit entries, newest first: those made with one of its tokens, or
    about one of its runs or tokens (CLI and webhook entries carry no token)."""
    by_token = audit_log.c.token_id.in_(
        select(tokens.c.id).where(tokens.c.workspace_id == workspace_id)
    )
    # EXISTS on the unique run_id index: the newest entries are checked first, and the LIMIT
    # stops the walk, however many runs the workspace holds.
    about_run = audit_log.c.subject.like("run:%") & (
        select(runs.c.id)
        .where(
            runs.c.run_id == func.substr(audit_log.c.subject, 5),
            runs.c.workspace_id == workspace_id,
        )
        .exists()
    )
    about_token = audit_log.c.subject.like("token:%") & (
        select(tokens.c.id)
        .where(
            ("token:" + tokens.c.id.cast(String)) == audit_log.c.subject,
            tokens.c.workspace_id == workspace_id,
        )
        .exists()
    )
    query = (
        select(audit_log)
        .where(by_token | about_run | about_token)
        .order_by(audit_log.c.id.desc())
        .offset(offset)
        .limit(limit)
    )
    out = []
    for row in conn.execute(query):
        entry = dict(row._mapping)
        entry["at"] = _aware(entry["at"])
        entry["details"] = json.loads(entry["details"])
        out.append(entry)
    return out
