"""The dashboard's pages: thin routes that check the viewer, read, and render a template."""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gate_server import storage as q
from gate_server.api import read_body
from gate_server.dashboard.access import (
    SECURITY_HEADERS,
    NotAViewer,
    Viewer,
    current_viewer,
    dashboard_state,
    login_viewer,
    same_origin,
    secure_cookies,
    set_prelogin_cookie,
    set_session_cookie,
)
from gate_server.dashboard.sessions import PRELOGIN_COOKIE, SESSION_COOKIE, new_nonce
from gate_server.dashboard.views import (
    HistoryRun,
    branch_url,
    build_history,
    commit_url,
    correctness_rows,
    distributions,
    environment_rows,
    pr_url,
    ratios_from_answer,
    short_reasons,
    summarize_document,
)
from gate_server.errors import ApiError
from gate_server.services import services
from rnx.formatting import format_ns, format_percent, format_ratio

HERE = Path(__file__).parent
HISTORY_WINDOW = 120  # commits per history page: enough to see a trend, light to render
AUDIT_PAGE = 100
MAX_FORM_BODY = 8 * 1024


def _ago(when: datetime | None) -> str:
    if when is None:
        return "–"
    seconds = (datetime.now(timezone.utc) - when).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


templates = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.filters.update(
    ns=format_ns,
    ratio=format_ratio,
    pct=format_percent,
    dt=lambda d: "–" if d is None else f"{d:%Y-%m-%d %H:%M} UTC",
    dts=lambda d: "–" if d is None else f"{d:%Y-%m-%d %H:%M:%S}",
    ago=_ago,
    # "pytorch_eager/float32/bs8" may wrap after each "/" on a phone.
    breakable=lambda text: Markup("/<wbr>").join(escape(str(text)).split("/")),
)
_CSS = (HERE / "static" / "dashboard.css").read_bytes()


def _secure(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


def render(
    request: Request, name: str, viewer: Viewer | None, status: int = 200, **context: Any
) -> Response:
    csrf = ""
    if viewer is not None and viewer.via_session:
        csrf = request.state.signer.csrf_token(viewer.csrf_binding)
    html = templates.get_template(name).render(
        viewer=viewer, csrf=context.pop("csrf", csrf), **context
    )
    return _secure(HTMLResponse(html, status_code=status))


def _error_page(
    request: Request, viewer: Viewer | None, status: int, heading: str, msg: str
) -> Response:
    return render(request, "error.html", viewer, status, heading=heading, message=msg)


def _safe_next(target: str | None) -> str:
    # Only paths on this server: "//evil.example" and "/\\evil" would leave it.
    if (
        not target
        or not target.startswith("/")
        or target.startswith("//")
        or "\\" in target
        or any(ord(c) < 33 for c in target)  # browsers drop tabs and newlines: "/\t/x" is "//x"
    ):
        return "/"
    return target


async def _viewer_or_response(request: Request) -> Viewer | Response:
    """The viewer, or the response an anonymous or refused visitor gets (and nothing else)."""
    state = await dashboard_state(request)
    request.state.signer = state.signer
    try:
        viewer = await current_viewer(request)
    except NotAViewer as e:
        return _error_page(request, None, e.status, "Not allowed", e.message)
    if viewer is None:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return _secure(RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303))
    return viewer


# ---- pages


async def overview(request: Request) -> Response:
    viewer = await _viewer_or_response(request)
    if isinstance(viewer, Response):
        return viewer
    storage = services(request).storage

    def read() -> dict[str, Any]:
        with storage.read() as conn:
            repos = q.dashboard_repositories(conn, viewer.workspace_id)
            for repo in repos:
                repo["latest"] = q.dashboard_latest_per_branch(conn, repo["id"])
            repo_ids = [repo["id"] for repo in repos]
            blocks = q.dashboard_recent_runs(conn, repo_ids, tier="BLOCK")
            accepts = q.dashboard_recent_runs(conn, repo_ids, accepted=True)
            answers = q.dashboard_answers(conn, [r.run_id for r in blocks])
        reasons = {rid: short_reasons(a.get("reasons") or []) for rid, a in answers.items()}
        return {
            "repos": repos,
            "blocks": blocks,
            "accepts": accepts,
            "block_reasons": reasons,
            "total_runs": sum(r["run_count"] for r in repos),
        }

    return render(request, "overview.html", viewer, nav="overview", **await run_in_threadpool(read))


def _page_number(request: Request) -> int:
    raw = request.query_params.get("page", "1")
    return max(1, min(int(raw), 100_000)) if raw.isdigit() else 1


async def history(request: Request) -> Response:
    viewer = await _viewer_or_response(request)
    if isinstance(viewer, Response):
        return viewer
    storage = services(request).storage
    cache = (await dashboard_state(request)).summaries
    name = f"{request.path_params['owner']}/{request.path_params['name']}"
    wanted_branch = request.query_params.get("branch")
    environment = request.query_params.get("environment") or None
    page = _page_number(request)
    offset = (page - 1) * HISTORY_WINDOW

    def read() -> dict[str, Any] | None:
        with storage.read() as conn:
            repo_id = q.dashboard_repository(conn, viewer.workspace_id, name)
            if repo_id is None:
                return None
            branches = q.dashboard_baseline_branches(conn, repo_id)
            branch = wanted_branch or (
                "main" if "main" in branches or not branches else branches[0]
            )
            environments = q.dashboard_recent_environments(conn, repo_id, branch)
            rows = q.dashboard_history(
                conn,
                repo_id,
                branch,
                environment=environment,
                offset=offset,
                limit=HISTORY_WINDOW + 1,
            )
            missing = [r.run_id for r, _ in rows if cache.get(r.run_id) is None]
            documents = q.dashboard_documents(conn, missing)
        for run_id, document in documents.items():
            cache.put(run_id, summarize_document(document))
        has_older = len(rows) > HISTORY_WINDOW
        window = rows[:HISTORY_WINDOW]
        runs = []
        for run, answer in reversed(window):
            summary = cache.get(run.run_id)
            if summary is None:  # deleted between the two reads: nothing to draw
                continue
            runs.append(
                HistoryRun(
                    run_id=run.run_id,
                    sha=run.sha,
                    created_at=run.created_at,
                    environment=run.environment_key,
                    tier=run.tier,
                    is_baseline=run.baseline_branch is not None,
                    accepted_reason=run.accept_reason if run.accepted_at else None,
                    ratios=ratios_from_answer(answer),
                    summary=summary,
                )
            )
        charts, events = build_history(runs)
        return {
            "repository": name,
            "branches": branches or [branch],
            "branch": branch,
            "branch_link": branch_url(name, branch),
            "environments": environments,
            "environment": environment,
            "charts": charts,
            "events": events,
            "shown": len(window),
            "offset": offset,
            "page": page,
            "has_older": has_older,
        }

    data = await run_in_threadpool(read)
    if data is None:
        return _error_page(
            request,
            viewer,
            404,
            "Not found",
            f"No repository {name} in workspace {viewer.workspace}.",
        )
    return render(request, "history.html", viewer, nav="history", **data)


def _parse_run_id(raw: str) -> str | None:
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        return None


async def run_page(request: Request) -> Response:
    viewer = await _viewer_or_response(request)
    if isinstance(viewer, Response):
        return viewer
    storage = services(request).storage
    run_id = _parse_run_id(request.path_params["run_id"])

    def read() -> dict[str, Any] | None:
        if run_id is None:
            return None
        with storage.read() as conn:
            run = storage.get_run(conn, run_id)
            if run is None or run.workspace_id != viewer.workspace_id:
                return None
            document = storage.get_document(conn, run_id)
            baseline = run.answer.get("baseline") or {}
            base_ids = [str(b) for b in baseline.get("run_ids") or []]
            base_docs_raw = q.dashboard_documents(conn, base_ids)
        assert document is not None
        doc = json.loads(document)
        base_docs = [json.loads(base_docs_raw[b]) for b in base_ids if b in base_docs_raw]
        newest_base = base_docs[0] if base_docs else None
        answer = run.answer
        return {
            "run": run,
            "doc": doc,
            "reasons": answer.get("reasons") or [],
            "comparisons": answer.get("comparisons") or [],
            "baseline": baseline or None,
            "base_ids": base_ids,
            "commit_link": commit_url(run.repository, run.sha),
            "pr_link": pr_url(run.repository, run.pr_number) if run.pr_number else None,
            "branch_link": branch_url(run.repository, run.branch),
            "distributions": distributions(doc, base_docs),
            "paired": doc.get("settings", {}).get("mode") == "paired",
            "correctness": correctness_rows(doc),
            "environment": environment_rows(
                doc.get("environment") or {},
                None if newest_base is None else newest_base.get("environment") or {},
            ),
            "base_environment_run": base_ids[0] if base_ids else None,
        }

    data = await run_in_threadpool(read)
    if data is None:
        return _error_page(
            request,
            viewer,
            404,
            "Not found",
            f"No run {request.path_params['run_id'][:40]} in workspace {viewer.workspace}.",
        )
    return render(request, "run.html", viewer, nav="run", **data)


async def audit(request: Request) -> Response:
    viewer = await _viewer_or_response(request)
    if isinstance(viewer, Response):
        return viewer
    storage = services(request).storage
    page = _page_number(request)

    def read() -> list[dict[str, Any]]:
        with storage.read() as conn:
            return q.dashboard_audit(
                conn, viewer.workspace_id, offset=(page - 1) * AUDIT_PAGE, limit=AUDIT_PAGE + 1
            )

    entries = await run_in_threadpool(read)
    return render(
        request,
        "audit.html",
        viewer,
        nav="audit",
        entries=entries[:AUDIT_PAGE],
        page=page,
        has_older=len(entries) > AUDIT_PAGE,
    )


# ---- signing in and out


async def login_form(request: Request) -> Response:
    state = await dashboard_state(request)
    request.state.signer = state.signer
    nonce = new_nonce()
    response = render(
        request,
        "login.html",
        None,
        csrf=state.signer.csrf_token(nonce),
        next=_safe_next(request.query_params.get("next")),
        error=None,
    )
    set_prelogin_cookie(response, nonce, secure=secure_cookies(request))
    return response


async def _small_form(request: Request) -> dict[str, str] | None:
    """A urlencoded form of a few short fields, read with a size limit (sign-in and sign-out
    post nothing else); None for anything larger or different."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        return None
    try:
        raw = await read_body(request, MAX_FORM_BODY)
        fields = parse_qs(raw.decode("utf-8"), max_num_fields=8, strict_parsing=False)
    except (ApiError, UnicodeDecodeError, ValueError):
        return None
    return {k: v[0] for k, v in fields.items()}


async def login_submit(request: Request) -> Response:
    state = await dashboard_state(request)
    request.state.signer = state.signer
    storage = services(request).storage
    form = await _small_form(request)
    if form is None:
        return _error_page(
            request, None, 400, "Not a sign-in form", "Sign in from the form at /login."
        )
    target = _safe_next(str(form.get("next") or "/"))
    nonce = request.cookies.get(PRELOGIN_COOKIE)
    if not same_origin(request) or not state.signer.csrf_ok(nonce, str(form.get("csrf") or "")):
        return _error_page(
            request,
            None,
            403,
            "Sign-in refused",
            "The sign-in form had expired or came from another site. "
            "Open /login again and sign in from there.",
        )

    def again(status: int, message: str) -> Response:
        fresh = new_nonce()
        response = render(
            request,
            "login.html",
            None,
            status,
            csrf=state.signer.csrf_token(fresh),
            next=target,
            error=message,
        )
        set_prelogin_cookie(response, fresh, secure=secure_cookies(request))
        return response

    try:
        viewer = await run_in_threadpool(login_viewer, storage, str(form.get("token") or ""))
    except NotAViewer as e:
        return again(e.status, e.message)

    def record() -> None:
        with storage.write() as conn:
            storage.audit(
                conn,
                actor=f"token:{viewer.token_id}",
                token_id=viewer.token_id,
                action="dashboard.login",
                subject=f"token:{viewer.token_id}",
                details={"workspace": viewer.workspace},
            )

    await run_in_threadpool(record)
    # A fresh session (and nonce) on every sign-in: a cookie planted earlier is worth nothing.
    _, cookie = state.signer.issue(str(viewer.token_id), now=time.time())
    response = _secure(RedirectResponse(target, status_code=303))
    set_session_cookie(response, cookie, secure=secure_cookies(request))
    response.delete_cookie(PRELOGIN_COOKIE, path="/login")
    return response


async def logout(request: Request) -> Response:
    viewer = await _viewer_or_response(request)
    if isinstance(viewer, Response):
        return viewer
    form = await _small_form(request) or {}
    if (
        not viewer.via_session
        or not same_origin(request)
        or not request.state.signer.csrf_ok(viewer.csrf_binding, str(form.get("csrf") or ""))
    ):
        return _error_page(
            request,
            viewer,
            403,
            "Sign-out refused",
            "The form came from another site or had expired; use the Sign out "
            "button on a dashboard page.",
        )
    response = _secure(RedirectResponse("/login", status_code=303))
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=secure_cookies(request)
    )
    return response


async def stylesheet(request: Request) -> Response:
    response = Response(_CSS, media_type="text/css")
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "public, max-age=3600"
    return response


routes: list[BaseRoute] = [
    Route("/", overview, methods=["GET"], include_in_schema=False),
    Route("/repos/{owner}/{name}", history, methods=["GET"], include_in_schema=False),
    Route("/runs/{run_id}", run_page, methods=["GET"], include_in_schema=False),
    Route("/audit", audit, methods=["GET"], include_in_schema=False),
    Route("/login", login_form, methods=["GET"], include_in_schema=False),
    Route("/login", login_submit, methods=["POST"], include_in_schema=False),
    Route("/logout", logout, methods=["POST"], include_in_schema=False),
    Route("/static/dashboard.css", stylesheet, methods=["GET"], include_in_schema=False),
]
