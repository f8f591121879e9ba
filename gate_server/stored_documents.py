"""Stored baseline documents, parsed once per server process instead of on every upload.

Every upload is re-gated against up to seven stored baseline runs; parsing and validating their
documents again each time cost about as much as the statistics. A run's document never changes
once stored (runs are neither deleted nor rewritten; accepting one or renaming its branch only
changes which runs are chosen, and that is read from the database on every upload), so a parse
can be kept under the run id and the stored bytes' SHA-256. Each server process keeps its own:
nothing is shared between processes, so there is nothing to invalidate across them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from rnx.schema import ResultsDocument, parse_results

# A 48-configuration document parses to about 250 KiB, an 8-configuration one to about 50 KiB.
MAX_DOCUMENTS = 256


class StoredDocuments:
    """A bounded, least-recently-used cache of parsed stored documents; safe across threads
    (uploads are handled in a thread pool)."""

    def __init__(self, max_entries: int = MAX_DOCUMENTS):
        self._entries: OrderedDict[tuple[str, str], ResultsDocument] = OrderedDict()
        self._max = max_entries
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def parsed(self, run_id: str, body_sha256: str, document: bytes) -> ResultsDocument:
        """The stored run's document, parsed (raises rnx.schema.InvalidDocument as
        parse_results does). body_sha256 is the stored one: the key names the bytes."""
        key = (run_id, body_sha256)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return found
        doc = parse_results(document, source=f"stored run {run_id}")
        with self._lock:
            self.misses += 1
            self._entries[key] = doc
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return doc

    def __len__(self) -> int:
        return len(self._entries)
