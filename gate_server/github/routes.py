"""Every route of the GitHub integration, for create_app."""

from __future__ import annotations

from gate_server.github import pull_request_routes, webhook

routes = [*webhook.routes, *pull_request_routes.routes]
