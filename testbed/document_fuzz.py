"""Valid results documents with one field pushed to a boundary value, signed and uploaded to the
real server: every answer must be below 500, and a normal upload afterwards still gets its
verdict.

schemathesis (testbed/fuzz.py) generates from the OpenAPI schema and almost never builds
a document that validates, so it never reaches storage and re-gating; these cases start valid
and change one thing: a date, an integer at a type's limit, unicode (NUL, bidi controls,
zero-width), a very long string, an empty list, a duplicate configuration. Used by
tests/reliability/test_reliability_document_fuzz.py (a few hundred cases) and
`python -m benchmarks.reliability.fuzz_documents` (thousands, with the counts printed).
"""

from __future__ import annotations

import copy
import json
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
from hypothesis import strategies as st

from testbed.factories import body, make_results
from testbed.gate_helpers import signed_headers

CONFIGS = [("pytorch_eager", "float32", 1), ("onnxruntime", "float16", 8)]


def _valid(**kwargs: Any) -> dict[str, Any]:
    return dict(json.loads(body(make_results(configs=CONFIGS, n=10, processes=2, **kwargs))))


# A push to the baseline branch and a pull request into it: the two kinds of upload.
STARTS = {
    "push": _valid(branch="main", seed=1),
    "pull_request": _valid(branch="feature/x", pr_number=12, event="pull_request", seed=2),
}


def _now(days: float) -> str:
    """A time `days` from now, in UTC."""
    return (datetime.now(timezone.utc) + timedelta(days=days)).isoformat()


DATES = [
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "0001-01-01T00:00:00",
    "9999-12-31T23:59:59.999999",
    "1970-01-01T00:00:00Z",
    "1999-12-31T23:59:59Z",
    "2000-01-01T00:00:00Z",
    "2016-12-31T23:59:60Z",
    "2024-02-30T00:00:00Z",
    "2024-01-01T00:00:00+23:59",
    "2024-01-01",
    "+10000-01-01T00:00:00Z",
    "-0001-01-01T00:00:00Z",
]
INTEGERS = [
    0,
    -1,
    1,
    2**15,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**32,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63) - 1,
    2**64,
    10**30,
]
FLOATS = [0.0, -0.0, 5e-324, 1e308, -1e308, 0.5, 1e-9]
TEXTS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\u202emain",
    "ma\u2066in\u2069",
    "ma\u200bin",
    "\ufeff",
    "\x85",
    "\ud800",
    "e\u0301",
    "ｍａｉｎ",
    "🔥" * 20,
    "\n\r\t",
    "a" * 256,
    "a" * 70_000,
    "../" * 40,
    "HEAD",
    "@",
    "-x",
    "'; DROP TABLE runs; --",
    "<script>alert(1)</script>",
]
OTHERS: list[Any] = [None, True, [], {}, [[]], {"": None}]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:2]):
            yield from _paths(v, (*prefix, i))


def _fields(doc: dict[str, Any]) -> set[tuple[Any, ...]]:
    """Every field of a document (of its first configuration), and the optional ones a valid
    document may leave out."""
    optional = {
        ("git", "pr_number"),
        ("git", "base_branch"),
        ("git", "base_sha"),
        ("workload", "base_path"),
        ("configurations", 0, "reason"),
        ("configurations", 0, "base_samples"),
        ("settings", "time_budget_s"),
        ("settings", "seed"),
    }
    return {p for p in _paths(doc) if p and p[:2] != ("configurations", 1)} | optional


FIELDS = sorted(_fields(STARTS["push"]) | _fields(STARTS["pull_request"]), key=repr)
# Fields the server stores in columns of their own: each drawn as often as all the rest.
STORED = [
    ("created_at",),
    ("run_id",),
    ("repository",),
    ("git", "branch"),
    ("git", "base_branch"),
    ("git", "sha"),
    ("git", "event"),
    ("git", "pr_number"),
    ("environment", "key"),
    ("workload", "path"),
]


@dataclass(frozen=True)
class Case:
    start: str  # "push" | "pull_request"
    change: str  # what was changed, for the report
    document: dict[str, Any]
    raw: bytes | None = None  # when the change is to the bytes, not the JSON value


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    if isinstance(target, list) and path[-1] >= len(target):
        target.append(value)
    else:
        target[path[-1]] = value


def _value(draw: Any, original: Any, path: tuple[Any, ...]) -> Any:
    """Mostly a boundary value of the field's own kind (what a typed client could send),
    sometimes any kind."""
    kind = draw(st.sampled_from(["own", "own", "own", "any"]))
    if kind == "any":
        kind = draw(st.sampled_from(["date", "int", "float", "text", "other"]))
    elif path == ("created_at",):
        kind = "date"
    elif isinstance(original, bool) or original is None:
        kind = "other" if original is not None else draw(st.sampled_from(["int", "text", "date"]))
    elif isinstance(original, int):
        kind = "int"
    elif isinstance(original, float):
        kind = "float"
    elif isinstance(original, str):
        kind = "text"
    else:
        kind = "other"
    if kind == "date":
        return draw(st.sampled_from(DATES) | st.sampled_from([-1.0, 0.99, 1.01, 3650.0]).map(_now))
    if kind == "int":
        return draw(st.sampled_from(INTEGERS))
    if kind == "float":
        return draw(st.sampled_from(FLOATS))
    if kind == "text":
        return draw(st.sampled_from(TEXTS) | st.text(max_size=40))
    return draw(st.sampled_from(OTHERS))


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        try:
            doc = doc[key]
        except (KeyError, IndexError, TypeError):
            return None
    return doc


def _structural(draw: Any, doc: dict[str, Any]) -> str:
    """A change to the document's shape rather than to one value; returns what it was."""
    what = draw(
        st.sampled_from(
            [
                "duplicate configuration",
                "duplicate configuration, other samples",
                "no configurations",
                "49 configurations",
                "empty samples",
                "samples of length 1",
                "unknown field",
                "field removed",
            ]
        )
    )
    configs = doc["configurations"]
    if what.startswith("duplicate configuration"):
        twin = copy.deepcopy(configs[0])
        if what.endswith("other samples"):
            twin["samples"]["ns"] = [n * 2 for n in twin["samples"]["ns"]]
        configs.append(twin)
    elif what == "no configurations":
        doc["configurations"] = []
    elif what == "49 configurations":
        doc["configurations"] = [copy.deepcopy(configs[0]) for _ in range(49)]
    elif what == "empty samples":
        configs[0]["samples"] = {"ns": [], "round": [], "process": []}
    elif what == "samples of length 1":
        configs[0]["samples"] = {"ns": [1], "round": [0], "process": [0]}
    elif what == "unknown field":
        doc[draw(st.sampled_from(["tier", "verdict", "extra", "\x00"]))] = "PASS"
    else:
        path = draw(st.sampled_from([p for p in _paths(doc) if p]))
        target: Any = doc
        for key in path[:-1]:
            target = target[key]
        if isinstance(target, dict):
            target.pop(path[-1], None)
        what = f"removed {'.'.join(map(str, path))}"
    return what


@st.composite
def cases(draw: Any) -> Case:
    """One valid document with one change; a fresh run_id unless run_id is what changed."""
    start = draw(st.sampled_from(sorted(STARTS)))
    doc = copy.deepcopy(STARTS[start])
    doc["run_id"] = str(uuid.uuid4())
    if draw(st.integers(0, 4)) == 0:
        change = _structural(draw, doc)
        return Case(start, change, doc)
    path = draw(st.sampled_from(STORED) | st.sampled_from(FIELDS))
    value = _value(draw, _get(doc, path), path)
    try:
        _set(doc, path, value)
    except (KeyError, IndexError, TypeError):
        return Case(start, "unchanged", doc)
    shown = repr(value) if not isinstance(value, str) or len(value) < 40 else f"str*{len(value)}"
    return Case(start, f"{'.'.join(map(str, path))} = {shown}", doc)


def encode(case: Case) -> bytes:
    """The bytes an uploader would send; lone surrogates go as JSON escapes, as json.dumps
    writes them."""
    return case.raw if case.raw is not None else json.dumps(case.document).encode("utf-8")


@dataclass
class Tally:
    cases: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    lost_verdicts: list[str] = field(default_factory=list)

    def line(self) -> str:
        """The counts on one line (599: no answer, the connection was reset)."""
        return (
            f"{self.cases} cases, {sum(v for k, v in self.statuses.items() if k >= 500)} "
            f"answers 5xx, {len(self.lost_verdicts)} normal uploads without a verdict; "
            "statuses: " + " ".join(f"{k}x{v}" for k, v in sorted(self.statuses.items()))
        )


class Uploader:
    """Signed uploads to one server with one CI token."""

    def __init__(self, url: str, secret: str):
        self.http = httpx.Client(base_url=url, timeout=60)
        self.secret = secret
        self.seed = 1000

    def close(self) -> None:
        self.http.close()

    def post(self, raw: bytes) -> httpx.Response:
        return self.http.post("/api/v1/runs", content=raw, headers=signed_headers(self.secret, raw))

    def normal(self) -> httpx.Response:
        """A pull request's upload, compared with the newest baseline of main."""
        self.seed += 1
        doc = make_results(
            configs=CONFIGS,
            n=10,
            processes=2,
            branch="feature/check",
            pr_number=99,
            event="pull_request",
            seed=self.seed,
        )
        return self.post(body(doc))

    def check(self, case: Case, tally: Tally) -> None:
        """Send the case, then a normal upload; count what came back (no answer at all, a
        reset connection, counts as a 5xx)."""
        tally.cases += 1
        try:
            answer = self.post(encode(case))
        except httpx.TransportError as e:
            tally.statuses[599] += 1
            tally.server_errors.append(f"no answer to {case.change}: {e!r}")
            return
        tally.statuses[answer.status_code] += 1
        if answer.status_code >= 500:
            tally.server_errors.append(f"{answer.status_code} {case.change}: {answer.text[:200]}")
        try:
            after = self.normal()
        except httpx.TransportError as e:
            tally.lost_verdicts.append(f"after {case.change}: no answer: {e!r}")
            return
        if after.status_code != 201 or after.json().get("tier") not in ("PASS", "WARN", "BLOCK"):
            tally.lost_verdicts.append(
                f"after {case.change}: {after.status_code} {after.text[:200]}"
            )


def seed_baseline(uploader: Uploader) -> None:
    """A baseline on main, so the fuzzed uploads and the normal ones are re-gated against it."""
    first = uploader.post(body(make_results(configs=CONFIGS, n=10, processes=2, seed=500)))
    if first.status_code != 201:
        raise RuntimeError(f"the baseline upload failed: {first.status_code} {first.text[:300]}")


def known_cases() -> list[Case]:
    """The cases that answered 500 on PostgreSQL before (issue 11): always among those run."""
    changes: list[tuple[str, tuple[Any, ...], Any]] = [
        ("push", ("created_at",), "0001-01-01T00:00:00+14:00"),
        ("push", ("created_at",), "9999-12-31T23:59:59-14:00"),
        ("pull_request", ("git", "pr_number"), 2**31),
        ("pull_request", ("git", "pr_number"), 2**63),
    ]
    out = []
    for start, path, value in changes:
        doc = copy.deepcopy(STARTS[start])
        doc["run_id"] = str(uuid.uuid4())
        _set(doc, path, value)
        out.append(Case(start, f"{'.'.join(map(str, path))} = {value!r}", doc))
    return out
