"""What each MCP tool does for an agent (gate_server/http/mcp.py speaks the protocol): reads
and writes of the agent's one repository, each answer a compact dict and a short text."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from gate_server.db import change_points, hardware, prices, runs
from gate_server.db.change_points import STATUSES
from gate_server.db.runs import BaselineKey, RunRecord
from gate_server.domain.accepts import accept_run, check_accept_scope
from gate_server.domain.agents import Agent
from gate_server.domain.auth import sign_upload
from gate_server.domain.baselines import baseline_for_ci
from gate_server.domain.change_points import change_point_view
from gate_server.domain.runs import check_run_id, run_view
from gate_server.domain.uploads import answered, ingest_run
from gate_server.errors import Forbidden, InvalidInput, NotFound, TooLarge, UpstreamFailed
from gate_server.github.workload_check import check_before_accept
from gate_server.services import Services
from gate_server.workloads import InvalidWorkloadPath, workload_identity
from rnx.hardware import MAX_ENVIRONMENTS, MIN_ENVIRONMENTS, NotComparable
from rnx.hardware import compare_hardware as hardware_comparison
from rnx.schema import parse_results
from rnx.verdict import evaluate
from rnx_github.accept_rules import decide_accept
from rnx_github.app_auth import GitHubApp
from rnx_github.client import GitHubError

MAX_TEXT = 1000  # characters of a branch, environment key, workload path or reason
MAX_HISTORY = 200  # runs of a configuration's history


@dataclass(frozen=True)
class Answer:
    data: dict[str, Any]
    text: str


def _text(name: str, value: str | None, *, required: bool = True) -> str:
    value = (value or "").strip()
    if required and not value:
        raise InvalidInput(f"give {name}", code="missing_argument")
    if len(value) > MAX_TEXT or "\x00" in value:
        raise InvalidInput(
            f"{name}: at most {MAX_TEXT} characters, no NUL", code="invalid_argument"
        )
    return value


def _workload(path: str) -> str:
    try:
        return workload_identity(_text("workload", path))
    except InvalidWorkloadPath as e:
        raise InvalidInput(str(e), code="invalid_workload_path") from None


def _repository_id(agent: Agent) -> int:
    if agent.token.repository_id is None:
        raise Forbidden("this agent token has no repository", code="repository_out_of_scope")
    return agent.token.repository_id


def _own(agent: Agent, run: RunRecord | None, what: str) -> RunRecord:
    if run is None or run.repository_id != agent.token.repository_id:
        raise NotFound(f"no {what} in {agent.token.repository}", code="run_not_found")
    return run


def _verdict_text(view: dict[str, Any]) -> str:
    lines = [f"{view['tier']} for run {view['run_id']} ({view['branch']} @ {view['sha'][:12]})"]
    lines += [f"- {reason}" for reason in view["reasons"][:10]]
    return "\n".join(lines)


def run_verdict(
    svc: Services, agent: Agent, run_id: str, pull_request: int | None, branch: str
) -> Answer:
    """The verdict of one run: by id, a pull request's newest, or a branch's newest."""
    given = [bool(run_id.strip()), pull_request is not None, bool(branch.strip())]
    if sum(given) != 1:
        raise InvalidInput("give exactly one of run_id, pull_request, branch", code="one_of")
    repository_id = _repository_id(agent)
    with svc.database.read() as conn:
        if run_id.strip():
            found = runs.by_run_id(conn, check_run_id(run_id.strip()))
            what = f"run {run_id.strip()}"
        elif pull_request is not None:
            listed = runs.pull_request_runs(conn, repository_id, pull_request, limit=1)
            found = listed[0] if listed else None
            what = f"run of pull request #{pull_request}"
        else:
            name = _text("branch", branch)
            found = runs.newest_on_branch(conn, repository_id, name)
            what = f"run on branch {name!r}"
    view = run_view(_own(agent, found, what))
    view.pop("receipt", None)  # a signed token for CI's records, of no use to an agent
    return Answer(view, _verdict_text(view))


def baselines(
    svc: Services,
    agent: Agent,
    branch: str,
    environment: str,
    workload: str,
    documents: bool = False,
) -> Answer:
    """The baseline runs an upload would now be compared with (ids and commits); with
    `documents`, their stored results documents and the server's thresholds too, so a
    pre-flight check gates against them exactly as the server would (`rnx check`)."""
    with svc.database.read() as conn:
        key, chosen = baseline_for_ci(
            conn,
            _repository_id(agent),
            _text("branch", branch),
            _text("environment", environment),
            _workload(workload),
            svc.settings.baseline_history,
        )
        stored = runs.documents(conn, [r.run_id for r in chosen]) if documents else {}
    listed = [{"run_id": r.run_id, "sha": r.sha} for r in chosen]
    data: dict[str, Any] = {
        "branch": key.branch,
        "environment": key.environment_key,
        "workload": key.workload,
        "baselines": listed,
    }
    if documents:
        gate = svc.settings.gate
        data["documents"] = [json.loads(stored[r.run_id]) for r in chosen if r.run_id in stored]
        data["gate"] = {
            "block_threshold": gate.block_threshold,
            "rope": gate.rope,
            "probability": gate.probability,
        }
    text = (
        f"{len(listed)} baseline run(s) for {key.workload} on {key.branch} ({key.environment_key})"
    )
    return Answer(data, text)


def history(
    svc: Services, agent: Agent, branch: str, environment: str, workload: str, limit: int
) -> Answer:
    """A configuration series' baseline history: each run's location per configuration, and
    the series' change points."""
    if not 1 <= limit <= MAX_HISTORY:
        raise InvalidInput(f"limit: 1 to {MAX_HISTORY}", code="invalid_argument")
    key = BaselineKey(
        _repository_id(agent),
        _text("branch", branch),
        _text("environment", environment),
        _workload(workload),
    )
    with svc.database.read() as conn:
        points = change_points.history(conn, key, limit)
        located = change_points.locations(conn, [p.run_id for p in points])
        found = change_points.of_series(conn, key)
    data = {
        "runs": [
            {"run_id": p.run_id, "sha": p.sha, "median_ns": located.get(p.run_id, {})}
            for p in points
        ],
        "change_points": [change_point_view(cp) for cp in found],
    }
    text = f"{len(points)} baseline run(s), {len(found)} change point(s) for {key.workload}"
    return Answer(data, text)


def open_change_points(svc: Services, agent: Agent, status: str) -> Answer:
    if status not in STATUSES:
        raise InvalidInput(f"status: one of {', '.join(STATUSES)}", code="invalid_argument")
    with svc.database.read() as conn:
        found = change_points.listed(conn, _repository_id(agent), status=status, limit=100)
    views = [change_point_view(cp) for cp in found]
    return Answer({"change_points": views}, f"{len(views)} {status} change point(s)")


def compare_runs(svc: Services, agent: Agent, base_run_id: str, head_run_id: str) -> Answer:
    """Gate one stored run against another, with the server's thresholds."""
    ids = [check_run_id(base_run_id.strip()), check_run_id(head_run_id.strip())]
    with svc.database.read() as conn:
        for run_id in ids:
            _own(agent, runs.by_run_id(conn, run_id), f"run {run_id}")
        bodies = runs.documents(conn, ids)
    base, head = (parse_results(bodies[i], source=f"run {i}") for i in ids)
    report = evaluate(head, [base], svc.settings.gate)
    data = json.loads(report.model_dump_json())
    lines = [f"{report.tier}: run {ids[1]} against run {ids[0]}"]
    lines += [f"- {reason}" for reason in report.reasons[:10]]
    return Answer(data, "\n".join(lines))


def environments(svc: Services, agent: Agent) -> Answer:
    """The environments with a baseline in the repository, with their hourly prices."""
    with svc.database.read() as conn:
        found = hardware.baselined_environments(conn, [_repository_id(agent)])
        priced = prices.of_environments(
            conn, agent.token.workspace_id, sorted({e.environment_key for e in found})
        )
    rows = [
        {
            "environment": e.environment_key,
            "branch": e.branch,
            "workload": e.workload,
            "baselines": e.baselines,
            "price_per_hour": priced.get(e.environment_key),
        }
        for e in found
    ]
    return Answer({"environments": rows}, f"{len(rows)} environment/workload baseline(s)")


def compare_hardware(
    svc: Services, agent: Agent, branch: str, workload: str, environments: list[str]
) -> Answer:
    """One workload's newest baseline on 2-6 environments side by side (the first is the
    baseline): time, throughput and, where prices are set, cost per million items."""
    keys = [_text("environment", e) for e in environments]
    if not MIN_ENVIRONMENTS <= len(set(keys)) == len(keys) <= MAX_ENVIRONMENTS:
        raise InvalidInput(
            f"environments: {MIN_ENVIRONMENTS} to {MAX_ENVIRONMENTS} different keys "
            "(the environments tool lists them)",
            code="invalid_argument",
        )
    name, path = _text("branch", branch), _workload(workload)
    documents = []
    with svc.database.read() as conn:
        for key in keys:
            _, chosen = baseline_for_ci(conn, _repository_id(agent), name, key, path, 0)
            if not chosen:
                raise NotFound(f"no baseline of {path} on {name} in {key}", code="no_baseline")
            stored = runs.document(conn, chosen[0].run_id)
            if stored is None:
                raise NotFound(f"no baseline of {path} on {name} in {key}", code="no_baseline")
            documents.append(parse_results(stored, source=f"the baseline in {key}"))
        priced = prices.of_environments(conn, agent.token.workspace_id, keys)
    try:
        compared = hardware_comparison(documents, prices=priced)
    except NotComparable as e:
        raise InvalidInput(str(e), code="not_comparable") from None
    data = {
        "workload": compared.workload,
        "environments": [
            {
                "label": s.label,
                "key": s.key,
                "hardware": s.hardware,
                "price_per_hour": s.price_per_hour,
            }
            for s in compared.sides
        ],
        "rows": [asdict(r) for r in compared.rows],
        "software": [asdict(r) for r in compared.software if r.differs],
        "notes": compared.notes,
    }
    lines = [f"{compared.workload}: {len(keys)} environments, baseline {compared.baseline.label}"]
    for row in compared.rows[:10]:
        cells = ", ".join(
            f"{c.environment} {c.verdict}" + (f" {c.ratio:.2f}x" if c.ratio else "")
            for c in row.cells[1:]
        )
        lines.append(f"- {row.id}: {cells}")
    return Answer(data, "\n".join(lines))


def check_grant(app: GitHubApp | None, agent: Agent, run: RunRecord) -> None:
    """The accept scope is a code owner's grant: whoever the admin named as its grantor must,
    today, be allowed to accept this run themselves (write permission, or a code owner of its
    workload on the base branch: the rules of a "/kernalin accept" comment). Only GitHub can
    say so: without the App, or where it is not installed, an agent accepts nothing."""
    grantor = agent.grant.accept_granted_by
    if grantor is None:  # issue_agent_token refuses the accept scope without one
        raise Forbidden("this agent token has no accept grant", code="missing_scope")
    why_not = "the server has no GitHub App (RNX_GITHUB_APP_ID) to ask GitHub"
    client = None
    if app is not None:
        try:
            client = app.client(repository=run.repository)
        except GitHubError as e:
            why_not = (
                f"the GitHub App is not installed on {run.repository}"
                if e.status == 404
                else f"GitHub could not be asked ({e})"
            )
    if client is None:
        raise Forbidden(
            f"the accept grant of @{grantor} cannot be checked: {why_not}; nothing was accepted "
            "(a person can accept with a PR comment or `rnx accept`)",
            code="grant_unverifiable",
        )
    try:
        decision = decide_accept(
            client,
            repository=run.repository,
            base_ref=run.base_branch or run.branch,
            user=grantor,
            workloads=[run.workload],
        )
    except GitHubError as e:
        raise UpstreamFailed(
            f"GitHub could not confirm the accept grant ({e})", code="github_unavailable"
        ) from None
    if not decision.allowed:
        raise Forbidden(
            f"the accept grant of @{grantor} does not cover run {run.run_id}: {decision.why}",
            code="grant_refused",
        )


def upload(svc: Services, agent: Agent, document: dict[str, Any]) -> Answer:
    """Store and gate a results document, as a CI upload would be, except that it never
    becomes a baseline: an agent moves a baseline only by `accept`, with a code owner's grant."""
    body = json.dumps(document).encode("utf-8")
    if len(body) > svc.settings.max_body_bytes:
        raise TooLarge(
            f"the document has {len(body)} bytes; at most {svc.settings.max_body_bytes}",
            code="body_too_large",
        )
    timestamp = str(int(time.time()))
    answer = ingest_run(
        svc.database,
        svc.settings,
        svc.signer,
        replace(agent.token, branches=[]),  # no baseline branch: gated, never a baseline
        body,
        sign_upload(agent.secret, timestamp, body),
        svc.settings.public_url or "",
        documents=svc.documents,
    )
    data = answered(answer.body, svc.settings.public_url or "")
    data.pop("receipt", None)
    return Answer(data, f"{data.get('tier')}: run {data.get('run_id')} stored")


def accept(svc: Services, agent: Agent, run_id: str, reason: str) -> Answer:
    run = check_accept_scope(svc.database, agent.token, run_id)
    check_grant(svc.github.app, agent, run)
    check_before_accept(svc.github.app, svc.database, run)
    data = accept_run(
        svc.database,
        run.run_id,
        actor=agent.actor,
        reason=_text("reason", reason),
        via="mcp",
        token_id=agent.token.id,
    )
    return Answer(data, f"run {run.run_id} is now a baseline of {data['baseline_branch']}")
