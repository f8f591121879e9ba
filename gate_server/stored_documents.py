"""Stored baseline documents, parsed once per server process instead of on every upload.

Every upload is re-gated against up to seven stored baseline runs; parsing and validating their
documents again each time cost about as much as the statistics. A run's document never changes
once stored (runs are neither deleted nor rewritten; accepting one or renaming its branch only
changes which runs are chosen, and that is read from the database on every upload), so a parse
can be kept under the run id and the stored bytes' SHA-256. Each server process keeps its own:
nothing is shared between processes, so there is nothing to invalidate across them. The
baseline lookup reads no bytes: only the documents not kept here are fetched (load).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence

from gate_server.db.runs import BaselineRun
from rnx.schema import ResultsDocument, parse_results

# A 48-configuration document takes about 320 KiB once parsed and its groups kept for the
# statistics, an 8-configuration one about 64 KiB (benchmarks/regate_steps.py).
MAX_DOCUMENTS = 256


class StoredDocuments:
    """A bounded, least-recently-used cache of parsed stored documents; safe across threads."""

    def __init__(self, max_entries: int = MAX_DOCUMENTS):
        self._entries: OrderedDict[tuple[str, str], ResultsDocument] = OrderedDict()
        self._max = max_entries
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def load(
        self,
        chosen: Sequence[BaselineRun],
        fetch: Callable[[list[str]], Mapping[str, bytes]],
    ) -> list[ResultsDocument]:
        """The chosen runs' documents, parsed, in their order: the ones kept here as they are,
        the others' bytes fetched in one call (fetch: run ids -> stored bytes) and parsed. So
        an upload reads a baseline's bytes from the database only the first time."""
        kept = [self._kept((r.run_id, r.body_sha256)) for r in chosen]
        missing = [r.run_id for r, doc in zip(chosen, kept, strict=True) if doc is None]
        stored = fetch(missing) if missing else {}
        return [
            doc if doc is not None else self.parsed(r.run_id, r.body_sha256, stored[r.run_id])
            for r, doc in zip(chosen, kept, strict=True)
        ]

    def parsed(self, run_id: str, body_sha256: str, document: bytes) -> ResultsDocument:
        """The stored run's document, parsed (raises rnx.schema.InvalidDocument as
        parse_results does). body_sha256 is the stored one: the key names the bytes."""
        key = (run_id, body_sha256)
        found = self._kept(key)
        if found is not None:
            return found
        doc = parse_results(document, source=f"stored run {run_id}")
        with self._lock:
            self.misses += 1
            self._entries[key] = doc
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return doc

    def _kept(self, key: tuple[str, str]) -> ResultsDocument | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            return found

    def __len__(self) -> int:
        return len(self._entries)
