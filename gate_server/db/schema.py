"""Every table of the server's database, as the newest migration leaves it (SQLite or PostgreSQL).

gate_server/db/migrations.py creates and changes these tables version by version; a change here
needs a migration there (and a frozen copy of the old definition for the versions before it).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)

from gate_server.workloads import MAX_WORKLOAD_BYTES

metadata = MetaData()

# An auto-incrementing 64-bit id (SQLite's rowid is already 64 bits, and only INTEGER is its alias).
_BIG_ID = BigInteger().with_variant(Integer, "sqlite")
MAX_BRANCH_CHARS = 255  # the runs' branch columns

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
    Column("kind", String(10), nullable=False),  # "ci" | "viewer" | "agent"
    Column("workspace_id", Integer, ForeignKey("workspaces.id"), nullable=False),
    Column("repository_id", Integer, ForeignKey("repositories.id"), nullable=True),
    Column("branches", Text, nullable=False),  # JSON list of baseline-branch patterns
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("prefix", String(16), nullable=False),  # shown in listings; not enough to use
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Column("last_used_at", DateTime(timezone=True), nullable=True),
    # Who holds it, shown wherever the token is the actor (migration 9); None: unnamed.
    Column("name", String(64), nullable=True),
    # A viewer token that may also act: acknowledge change points, accept runs (migration 9).
    Column("can_act", Boolean, nullable=False, server_default=false()),
    # A viewer token the dashboard made when this GitHub user signed in (migration 12); its
    # secret was never kept, so only a session can use it. None: a token someone created.
    Column("github_login", String(39), nullable=True),
)

# What an agent token (tokens.kind "agent") adds: the agent's name, the user it acts for,
# its scopes and when it expires. A table of its own so the tokens table keeps one shape for
# every kind; one row per agent token.
agent_tokens = Table(
    "agent_tokens",
    metadata,
    Column("token_id", Integer, ForeignKey("tokens.id"), primary_key=True),
    Column("name", String(100), nullable=False),
    Column("for_user", String(100), nullable=False),
    Column("scopes", Text, nullable=False),  # JSON list: read, benchmark, upload, accept
    Column("expires_at", DateTime(timezone=True), nullable=False),
    # The code owner who granted the accept scope (None when the token has no accept scope).
    Column("accept_granted_by", String(100), nullable=True),
)

runs = Table(
    "runs",
    metadata,
    Column("id", _BIG_ID, primary_key=True),
    Column("run_id", String(36), nullable=False, unique=True),
    Column("workspace_id", Integer, ForeignKey("workspaces.id"), nullable=False),
    Column("repository_id", Integer, ForeignKey("repositories.id"), nullable=False),
    Column("token_id", Integer, ForeignKey("tokens.id"), nullable=True),
    Column("sha", String(64), nullable=False),
    Column("branch", String(MAX_BRANCH_CHARS), nullable=False),
    Column("base_branch", String(MAX_BRANCH_CHARS), nullable=True),
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
    Column("baseline_branch", String(MAX_BRANCH_CHARS), nullable=True),
    Column("baseline_at", DateTime(timezone=True), nullable=True),
    Column("accepted_at", DateTime(timezone=True), nullable=True),
    Column("accepted_by", String(200), nullable=True),
    Column("accept_reason", Text, nullable=True),
    Column("accepted_via", String(32), nullable=True),
    # The workload's path in the repository, normalised (gate_server/workloads.py): baselines
    # are kept per workload. Added by migration 5, which filled it from the stored documents
    # (SQLite adds a NOT NULL column only with a default; the server always writes one).
    Column("workload", String(MAX_WORKLOAD_BYTES), nullable=False, server_default=""),
    # The baseline lookup reads only this index, however many runs are stored.
    Index(
        "ix_runs_baseline",
        "repository_id",
        "baseline_branch",
        "environment_key",
        "workload",
        "baseline_at",
        "id",
    ),
    Index("ix_runs_repository_received", "repository_id", "received_at"),
)

audit_log = Table(
    "audit_log",
    metadata,
    Column("id", _BIG_ID, primary_key=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("actor", String(200), nullable=False),
    Column("token_id", Integer, nullable=True),
    Column("action", String(64), nullable=False),
    Column("subject", String(200), nullable=False),
    Column("details", Text, nullable=False),
)

# The server's own secret keys, by name, made by the first process that needs one so that
# every process uses the same: "receipt" (a PEM private key that signs receipts) and
# "dashboard-session" (the hex HMAC key of the dashboard's cookies).
server_keys = Table(
    "server_keys",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("secret", Text, nullable=False),  # until migration 4: private_key_pem
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# One row per branch rename followed (GitHub-confirmed or recorded by an admin), oldest first.
# Rows are never changed or deleted: resolving a name replays them in order
# (gate_server/domain/branches.py), which keeps cycles (a->b->a) and chains (a->b->c) right, and
# keeps every name a run was uploaded under explainable.
branch_renames = Table(
    "branch_renames",
    metadata,
    Column("id", _BIG_ID, primary_key=True),
    Column("repository_id", Integer, ForeignKey(repositories.c.id), nullable=False),
    Column("from_branch", String(MAX_BRANCH_CHARS), nullable=False),
    Column("to_branch", String(MAX_BRANCH_CHARS), nullable=False),
    Column("renamed_at", DateTime(timezone=True), nullable=False),
    Column("actor", String(200), nullable=False),
    Column("via", String(32), nullable=False),
    Index("ix_branch_renames_repository", "repository_id", "id"),
)

# A profile's Chrome trace kept with its run (harness.keep-traces; gate_server/domain/traces.py):
# the gzip bytes as uploaded, under the file name the run's document gives the trace.
run_traces = Table(
    "run_traces",
    metadata,
    Column("run_id", String(36), ForeignKey("runs.run_id"), primary_key=True),
    Column("name", String(300), primary_key=True),  # rnx.schema.TraceName
    Column("body", LargeBinary, nullable=False),
    Column("body_sha256", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# A step change in a baseline branch's history of one configuration
# (gate_server/domain/change_points.py), stored once: the unique key is the series and the first run
# after the change.
change_points = Table(
    "change_points",
    metadata,
    Column("id", _BIG_ID, primary_key=True),
    Column("repository_id", Integer, ForeignKey(repositories.c.id), nullable=False),
    Column("branch", String(MAX_BRANCH_CHARS), nullable=False),
    Column("environment_key", String(128), nullable=False),
    Column("workload", String(MAX_WORKLOAD_BYTES), nullable=False),
    Column("configuration", String(100), nullable=False),  # runtime/dtype/bsN
    Column("before_run_id", String(36), nullable=False),  # the last run before the change
    Column("before_sha", String(64), nullable=False),
    Column("after_run_id", String(36), nullable=False),  # the first run after it
    Column("after_sha", String(64), nullable=False),
    Column("ratio", Float, nullable=False),  # later/earlier typical time, 90% interval
    Column("low", Float, nullable=False),
    Column("high", Float, nullable=False),
    Column("p_value", Float, nullable=False),
    # Found in a short history by stats.detect's early test (too few runs for the rank test).
    Column("early", Boolean, nullable=False, server_default=false()),
    # A drift (stats.ChangePoint.end): the first run at its newest level; NULL for a step.
    Column("end_run_id", String(36), nullable=True),
    Column("end_sha", String(64), nullable=True),
    Column("detected_at", DateTime(timezone=True), nullable=False),
    Column("status", String(16), nullable=False),  # open | acknowledged | resolved
    Column("note", Text, nullable=True),  # the acknowledgement's
    Column("acknowledged_at", DateTime(timezone=True), nullable=True),
    Column("acknowledged_by", String(200), nullable=True),
    Column("resolved_at", DateTime(timezone=True), nullable=True),
    # The earlier change point this one takes back (both are then resolved).
    Column("undoes_id", BigInteger, nullable=True),
    UniqueConstraint(
        "repository_id",
        "branch",
        "environment_key",
        "workload",
        "configuration",
        "after_run_id",
        name="uq_change_points_series_after",
    ),
    Index("ix_change_points_repository_status", "repository_id", "status", "id"),
)

# A change point's bisection (gate_server/domain/bisection/): the range's commits (JSON, oldest
# first), where it stands, and what it found. One per change point.
bisections = Table(
    "bisections",
    metadata,
    Column("id", _BIG_ID, primary_key=True),
    Column("change_point_id", BigInteger, nullable=False, unique=True),
    Column("repository_id", Integer, ForeignKey(repositories.c.id), nullable=False),
    Column("commits", Text, nullable=False),  # JSON [{"sha", "author", "message"}], oldest first
    Column("state", String(16), nullable=False),  # running | found | stopped | cancelled
    Column("culprit_sha", String(64), nullable=True),
    Column("culprit_pr", Integer, nullable=True),
    Column("culprit_author", String(200), nullable=True),
    Column("low_sha", String(64), nullable=True),  # the narrowed range (low, high]
    Column("high_sha", String(64), nullable=True),
    Column("reason", Text, nullable=True),  # why it stopped without a culprit
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("ended_at", DateTime(timezone=True), nullable=True),
    Index("ix_bisections_repository_state", "repository_id", "state"),
)

# One measurement of a bisection: a dispatch of the benchmark workflow at one commit (its
# `attempt`-th), the run it uploaded, and what that run was found closer to. The unique
# (bisection, index, attempt) row is written before the dispatch, so a commit is never
# dispatched twice for the same attempt.
bisection_steps = Table(
    "bisection_steps",
    metadata,
    Column("id", _BIG_ID, primary_key=True),
    Column("bisection_id", BigInteger, ForeignKey(bisections.c.id), nullable=False),
    Column("commit_index", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("sha", String(64), nullable=False),
    Column("state", String(16), nullable=False),  # dispatching | dispatched | measured
    Column("run_id", String(36), nullable=True),
    Column("side", String(16), nullable=True),  # before | after | undecided | skipped | no_change
    Column("evidence", Text, nullable=True),  # JSON: ratio and interval against both ends
    Column("dispatched_at", DateTime(timezone=True), nullable=True),
    Column("measured_at", DateTime(timezone=True), nullable=True),
    UniqueConstraint("bisection_id", "commit_index", "attempt", name="uq_bisection_steps_attempt"),
)

# Auto-sync (gate_server/domain/autosync/): a workload linked on a branch with `rnx link`; every new
# commit of that branch that touches it (or what it imports) is benchmarked. kernalin.yml's
# `auto-sync:` links are read from the pushed commit instead and never stored. A removed link
# keeps its row (removed_at) so the audit trail and a later re-link stay readable.
autosync_links = Table(
    "autosync_links",
    metadata,
    Column("id", _BIG_ID, primary_key=True),
    Column("repository_id", Integer, ForeignKey(repositories.c.id), nullable=False),
    Column("branch", String(MAX_BRANCH_CHARS), nullable=False),
    Column("workload", String(MAX_WORKLOAD_BYTES), nullable=False),
    Column("created_by", String(200), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("removed_at", DateTime(timezone=True), nullable=True),
    Index("ix_autosync_links_branch", "repository_id", "branch"),
)

# One row per commit auto-sync decided to benchmark: written (state queued) before anything is
# dispatched, and unique per repository and commit, so a commit is dispatched at most once
# however often its push is delivered or its job runs.
autosync_commits = Table(
    "autosync_commits",
    metadata,
    Column("id", _BIG_ID, primary_key=True),
    Column("repository_id", Integer, ForeignKey(repositories.c.id), nullable=False),
    Column("sha", String(64), nullable=False),
    Column("branch", String(MAX_BRANCH_CHARS), nullable=False),
    Column("workloads", Text, nullable=False),  # JSON list of the linked paths it touched
    Column("reason", String(16), nullable=False),  # touched | every-n
    # queued | dispatching | dispatched | skipped (a run came without us) | refused (by GitHub)
    Column("state", String(16), nullable=False),
    Column("due_at", DateTime(timezone=True), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("dispatched_at", DateTime(timezone=True), nullable=True),
    Column("note", String(300), nullable=True),
    # JSON: the commits after it in its push. Its run arrives after theirs (the push's own run
    # of its head, say), and is placed before them in the history (place_in_history).
    Column("later", Text, nullable=False, server_default="[]"),
    UniqueConstraint("repository_id", "sha", name="uq_autosync_commits_sha"),
    Index("ix_autosync_commits_state", "repository_id", "state", "due_at"),
)

# Each baseline run's one number per configuration for change-point detection
# (stats.run_location of its samples), computed once by the first detection that reads the run.
# A run with no usable configuration has one row with configuration "" (so it is not read again).
run_locations = Table(
    "run_locations",
    metadata,
    Column("run_id", String(36), primary_key=True),
    Column("configuration", String(100), primary_key=True),
    Column("location", Float, nullable=False),
)

# The durable outbox (gate_server/jobs/worker.py): work to do after an answer, written in the same
# transaction as what caused it, done by whichever server process holds its lease.
outbox = Table(
    "outbox",
    metadata,
    Column("id", _BIG_ID, primary_key=True),
    Column("delivery_id", String(36), nullable=False, unique=True),  # for receivers to dedupe
    Column("kind", String(64), nullable=False),  # picks the handler (gate_server/jobs/handlers.py)
    Column("payload", Text, nullable=False),  # JSON
    Column("state", String(10), nullable=False),  # pending | done | failed
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("available_at", DateTime(timezone=True), nullable=False),  # not tried before this
    Column("attempts", Integer, nullable=False),
    Column("lease_owner", String(100), nullable=True),
    Column("lease_until", DateTime(timezone=True), nullable=True),
    Column("done_at", DateTime(timezone=True), nullable=True),
    Column("last_error", Text, nullable=True),
    Index("ix_outbox_due", "state", "available_at", "id"),
)

# An environment's hourly price in a workspace (`rnx environment price ENV 3.50`), for the cost
# per million items on the dashboard's /hardware page. Keyed by the environment key runs carry.
environment_prices = Table(
    "environment_prices",
    metadata,
    Column("workspace_id", Integer, ForeignKey("workspaces.id"), primary_key=True),
    Column("environment_key", String(128), primary_key=True),
    Column("price_per_hour", Float, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

# ---- the GitHub integration's tables

github_deliveries = Table(
    "github_deliveries",
    metadata,
    Column("delivery_id", String(100), primary_key=True),
    Column("event", String(64), nullable=False),
    Column("action", String(64), nullable=True),
    Column("received_at", DateTime(timezone=True), nullable=False),
    # The answer given the first time; a redelivery gets exactly this again.
    Column("status", Integer, nullable=True),
    Column("answer", Text, nullable=True),
    Index("ix_github_deliveries_received", "received_at"),
)

oidc_token_uses = Table(
    "oidc_token_uses",
    metadata,
    Column("jti", String(200), primary_key=True),
    Column("repository_id", Integer, nullable=False),
    Column("used_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)

# ---- alerts (gate_server/domain/alerts/): where a workspace's events go

# A channel: where messages are sent. `secret` holds what must never be shown (a webhook URL,
# an SMTP password, a webhook's signing key) as JSON; only gate_server/domain/alerts/ reads it, and
# `shown` is what listings print instead. `config` holds what may be shown (SMTP host, the
# addresses). The failure columns count consecutive failed sends (a success resets them).
notify_channels = Table(
    "notify_channels",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("workspace_id", Integer, ForeignKey("workspaces.id"), nullable=False),
    Column("name", String(100), nullable=False),
    Column("kind", String(16), nullable=False),  # slack | teams | email | webhook
    Column("config", Text, nullable=False),
    Column("secret", Text, nullable=False),
    Column("shown", String(300), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("removed_at", DateTime(timezone=True), nullable=True),
    Column("failures", Integer, nullable=False, server_default="0"),
    Column("failing_since", DateTime(timezone=True), nullable=True),
    Column("last_error", String(500), nullable=True),
    Column("last_delivered_at", DateTime(timezone=True), nullable=True),
    UniqueConstraint("workspace_id", "name", name="uq_notify_channels_workspace_name"),
)

# A rule: which events of a workspace (or of one of its repositories) go to which channel.
notify_rules = Table(
    "notify_rules",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("workspace_id", Integer, ForeignKey("workspaces.id"), nullable=False),
    Column("repository_id", Integer, ForeignKey("repositories.id"), nullable=True),
    Column("channel_id", Integer, ForeignKey("notify_channels.id"), nullable=False),
    Column("events", Text, nullable=False),  # JSON list of event names
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("removed_at", DateTime(timezone=True), nullable=True),
    Index("ix_notify_rules_workspace", "workspace_id"),
)

# One row per (event, channel): the delivery id a receiver deduplicates by, made once however
# often the event is fanned out (a restart can fan it out again), and its state.
notify_deliveries = Table(
    "notify_deliveries",
    metadata,
    Column("delivery_id", String(36), primary_key=True),
    Column("event_id", String(100), nullable=False),
    Column("event", String(32), nullable=False),
    Column("channel_id", Integer, ForeignKey("notify_channels.id"), nullable=False),
    Column("payload", Text, nullable=False),  # the event's facts, JSON
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("delivered_at", DateTime(timezone=True), nullable=True),
    Column("last_error", String(500), nullable=True),
    Index("ix_notify_deliveries_event", "event_id"),
)
