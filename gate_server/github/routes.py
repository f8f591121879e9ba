"""Every route of the GitHub integration, for create_app."""

from __future__ import annotations

from gate_server.github import pulls_api, webhook

routes = [*webhook.routes, *pulls_api.routes]
