"""The HTTP edge: routes, the OpenAPI document, answers and the error shape, the dashboard's
routes, /mcp, GitHub's webhook and pull-request routes. Domain refusals become statuses here."""
