"""GitHub as the server uses it, without routes: OIDC tokens for uploads, the App, the sticky
comment's parts, the workload check before an accept, and the dashboard's GitHub sign-in. Its
routes (the webhook, the pull-request API, the sign-in's two routes) are in gate_server/http/."""
