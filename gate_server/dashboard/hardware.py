"""The /hardware page: pick a workload, then 2 to 6 environments that have a baseline of it, and
compare their newest baseline runs with rnx.hardware (the same table as `rnx compare-hardware`)."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import QueryParams

from gate_server.db import Database, dashboard, hardware, prices, runs
from gate_server.db.hardware import BaselinedEnvironment
from gate_server.db.runs import BaselineKey
from gate_server.domain.stored_documents import StoredDocuments
from rnx.hardware import (
    CURRENCY,
    MAX_ENVIRONMENTS,
    MIN_ENVIRONMENTS,
    HardwareComparison,
    NotComparable,
    Side,
    compare_hardware,
)
from rnx.schema import ResultsDocument

MAX_LISTED = 24  # environments offered for one workload (the newest baselines first)
_SAFE_FILE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class HardwareQuery:
    """What the page was asked for: a workload (repository, baseline branch, path), the
    environments to compare (by key) and which of them is the baseline."""

    repository: str | None = None
    branch: str | None = None
    workload: str | None = None
    environments: tuple[str, ...] = ()
    baseline: str | None = None

    @classmethod
    def from_params(cls, params: QueryParams) -> HardwareQuery:
        envs = tuple(dict.fromkeys(e for e in params.getlist("env") if e))
        return cls(
            repository=params.get("repo") or None,
            branch=params.get("branch") or None,
            workload=params.get("workload") or None,
            environments=envs[: MAX_ENVIRONMENTS + 1],  # one more than allowed: "too many"
            baseline=params.get("baseline") or None,
        )

    def link(self, **changes: Any) -> str:
        """This page's URL with some fields changed."""
        values = {
            "repo": self.repository,
            "branch": self.branch,
            "workload": self.workload,
            "env": list(self.environments),
            "baseline": self.baseline,
            **changes,
        }
        pairs = [(k, v) for k, v in values.items() if v and not isinstance(v, list)]
        pairs += [("env", e) for e in values["env"] or []]
        return "?" + urlencode(pairs)


@dataclass(frozen=True)
class EnvironmentChoice:
    key: str
    label: str
    hardware: str
    baselines: int
    newest_run: str | None
    price: float | None


@dataclass
class WorkloadChoice:
    repository: str
    branch: str
    workload: str
    environments: list[BaselinedEnvironment] = field(default_factory=list)

    def link(self) -> str:
        return HardwareQuery(self.repository, self.branch, self.workload).link()


def _workloads(found: list[BaselinedEnvironment]) -> list[WorkloadChoice]:
    groups: dict[tuple[str, str, str], WorkloadChoice] = {}
    for e in found:
        key = (e.repository, e.branch, e.workload)
        groups.setdefault(key, WorkloadChoice(*key)).environments.append(e)
    for g in groups.values():
        g.environments.sort(key=lambda e: (e.newest is None, e.newest), reverse=True)
    return sorted(groups.values(), key=lambda g: (-len(g.environments), g.repository, g.workload))


def _label(doc: ResultsDocument) -> str:
    return doc.environment.name or doc.environment.key


def _hardware_of(doc: ResultsDocument) -> str:
    return Side(_label(doc), doc.environment.key, doc).hardware


def _newest_baselines(
    database: Database, documents: StoredDocuments, workspace_id: int, group: WorkloadChoice
) -> dict[str, tuple[str, ResultsDocument]]:
    """The newest baseline of each offered environment that the baseline branch ran itself
    (an accepted pull request run only where there is no other): (run id, document) by key.
    Documents come parsed from the server's cache (gate_server/domain/stored_documents.py): a viewer
    reloading the page parses nothing again."""
    chosen = []
    with database.read() as conn:
        for e in group.environments[:MAX_LISTED]:
            key = BaselineKey(e.repository_id, e.branch, e.environment_key, e.workload)
            found = hardware.newest_branch_baseline(conn, key) or next(
                iter(runs.baselines(conn, key, 1)), None
            )
            if found is not None and found.workspace_id == workspace_id:
                chosen.append((e.environment_key, found))
        parsed = documents.load([r for _, r in chosen], lambda ids: runs.documents(conn, ids))
    return {key: (r.run_id, doc) for (key, r), doc in zip(chosen, parsed, strict=True)}


def _choices(
    group: WorkloadChoice,
    newest: dict[str, tuple[str, ResultsDocument]],
    priced: dict[str, float],
) -> list[EnvironmentChoice]:
    out = []
    for e in group.environments[:MAX_LISTED]:
        run_id, doc = newest.get(e.environment_key, (None, None))
        out.append(
            EnvironmentChoice(
                key=e.environment_key,
                label=_label(doc) if doc else e.environment_key,
                hardware=_hardware_of(doc) if doc else "",
                baselines=e.baselines,
                newest_run=run_id,
                price=priced.get(e.environment_key),
            )
        )
    return out


def _problem(query: HardwareQuery, offered: set[str]) -> str | None:
    """Why the chosen environments cannot be compared (None: they can, or none were chosen)."""
    chosen = query.environments
    if not chosen:
        return None
    unknown = [e for e in chosen if e not in offered]
    if unknown:
        return f"No baseline of this workload in {', '.join(unknown)}; pick from the list."
    if not MIN_ENVIRONMENTS <= len(chosen) <= MAX_ENVIRONMENTS:
        return (
            f"Pick {MIN_ENVIRONMENTS} to {MAX_ENVIRONMENTS} environments "
            f"({len(chosen) if len(chosen) <= MAX_ENVIRONMENTS else 'more'} picked)."
        )
    if query.baseline is not None and query.baseline not in chosen:
        return "The baseline must be one of the environments picked."
    return None


def _labels(docs: list[ResultsDocument]) -> list[str]:
    """Each environment's name, or its key where two picked ones share a name."""
    names = [_label(d) for d in docs]
    return [
        n if names.count(n) == 1 else d.environment.key for n, d in zip(names, docs, strict=True)
    ]


class Comparisons:
    """The comparisons worked out lately, by what they were worked out from (the runs, in
    order, and their prices), and at most one worked out at a time. A stored run never changes,
    so the same picks give the same table: viewers reloading /hardware cost the server nothing
    after the first, and however many pick at once, the statistics of one comparison (seconds
    of CPU for 48 configurations on 6 machines) run beside the uploads, never several."""

    def __init__(self, max_entries: int = 32):
        self._entries: OrderedDict[tuple[Any, ...], HardwareComparison] = OrderedDict()
        self._max = max_entries
        self._lock = threading.Lock()  # guards _entries
        self._working = threading.Lock()  # one comparison worked out at a time
        self.computed = 0

    def get(
        self, key: tuple[Any, ...], work: Callable[[], HardwareComparison]
    ) -> HardwareComparison:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
        with self._working:
            with self._lock:  # another viewer may have worked it out while this one waited
                found = self._entries.get(key)
            if found is None:
                found = work()
                self.computed += 1
        with self._lock:
            self._entries[key] = found
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return found


def _compare(
    query: HardwareQuery,
    newest: dict[str, tuple[str, ResultsDocument]],
    priced: dict[str, float],
    comparisons: Comparisons,
) -> HardwareComparison:
    order = list(query.environments)
    baseline = query.baseline or order[0]
    order.remove(baseline)
    picked = [baseline, *order]
    docs = [newest[k][1] for k in picked]
    keyed = {
        d.environment.key: priced[d.environment.key] for d in docs if d.environment.key in priced
    }
    key = (tuple(newest[k][0] for k in picked), tuple(sorted(keyed.items())))
    return comparisons.get(key, lambda: compare_hardware(docs, prices=keyed, labels=_labels(docs)))


def hardware_page(
    database: Database,
    documents: StoredDocuments,
    comparisons: Comparisons,
    workspace_id: int,
    query: HardwareQuery,
) -> dict[str, Any]:
    """Everything the page shows: the workloads to pick from, the picked workload's
    environments, and the comparison when 2 to 6 were picked. `status` is 400 when the
    pick cannot be compared (the page then says why and offers the pick again)."""
    with database.read() as conn:
        repos = dashboard.repositories_by_activity(conn, workspace_id)
        found = hardware.baselined_environments(conn, [r["id"] for r in repos])
    workloads = _workloads(found)
    page: dict[str, Any] = {
        "query": query,
        "workloads": workloads,
        "status": 200,
        "currency": CURRENCY,
    }
    group = next(
        (
            g
            for g in workloads
            if (g.repository, g.workload) == (query.repository, query.workload)
            and (query.branch is None or g.branch == query.branch)
        ),
        None,
    )
    if query.workload is None or group is None:
        if query.workload is not None:
            page.update(status=404, problem="No baseline of that workload in this workspace.")
        return page
    if query.branch is None:
        query = HardwareQuery(
            group.repository, group.branch, group.workload, query.environments, query.baseline
        )
        page["query"] = query
    newest = _newest_baselines(database, documents, workspace_id, group)
    with database.read() as conn:
        priced = prices.of_environments(conn, workspace_id, list(newest))
    page.update(group=group, choices=_choices(group, newest, priced))
    problem = _problem(query, set(newest))
    if problem is not None:
        page.update(status=400, problem=problem)
        return page
    if query.environments:
        try:
            page["comparison"] = _compare(query, newest, priced, comparisons)
        except NotComparable as e:
            page.update(status=400, problem=str(e))
        page["run_ids"] = {newest[k][1].environment.key: newest[k][0] for k in query.environments}
    return page


def export_filename(comparison: HardwareComparison, suffix: str) -> str:
    """hardware-<workload file's stem>.<suffix>, safe in a Content-Disposition header."""
    stem = comparison.workload.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return f"hardware-{_SAFE_FILE.sub('-', stem) or 'workload'}.{suffix}"
