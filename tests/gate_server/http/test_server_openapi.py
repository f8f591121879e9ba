"""/openapi.json lists exactly the app's routes, and the routes behave as it says."""

from __future__ import annotations

from starlette.routing import Route

from gate_server.http.openapi import schema_routes


def test_openapi_paths_and_methods_match_the_routes(client):
    doc = client.get("/openapi.json").json()
    documented = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    served = {(path, method) for path, method, _ in schema_routes(client.app.routes)}
    assert documented == served
    assert ("/api/v1/runs", "post") in served
    assert ("/api/v1/runs/{run_id}/accept", "post") in served
    assert ("/healthz", "get") in served and ("/readyz", "get") in served


def test_every_schema_reference_resolves(client):
    doc = client.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    refs: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                refs.append(ref)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc)
    assert refs
    missing = {r for r in refs if r.removeprefix("#/components/schemas/") not in schemas}
    assert not missing


def test_an_undocumented_route_is_missing_from_the_document(client):
    async def secret(request):  # pragma: no cover - never called
        raise AssertionError

    client.app.router.routes.append(Route("/api/v1/undocumented", secret, methods=["GET"]))
    doc = client.get("/openapi.json").json()
    served = {(p, m) for p, m, _ in schema_routes(client.app.routes)}
    documented = {(p, m) for p, ops in doc["paths"].items() for m in ops}
    assert served - documented == {("/api/v1/undocumented", "get")}


def test_path_parameters_are_declared(client):
    doc = client.get("/openapi.json").json()
    op = doc["paths"]["/api/v1/runs/{run_id}"]["get"]
    assert {"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}} in op[
        "parameters"
    ]
