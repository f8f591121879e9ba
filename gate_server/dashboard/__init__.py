"""The dashboard: server-rendered pages for signed-in viewers (overview, history, runs, audit).

Its routes are gate_server.http.dashboard.routes.routes; create_app mounts them.
"""
