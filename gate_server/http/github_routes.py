"""Every route of the GitHub integration, for create_app."""

from __future__ import annotations

from gate_server.http import pull_requests, webhook

routes = [*webhook.routes, *pull_requests.routes]
