"""Stored baseline documents, parsed once per server process instead of on every upload.

Every upload is re-gated against up to seven stored baseline runs; parsing and validating their
documents again each time cost about as much as the statistics. A run's document never changes
once stored (runs are neither deleted nor rewritten; accepting one or renaming its branch only
changes which runs are chosen, and that is read from the database on every upload), so a parse
can be kept under the run id and the stored bytes' SHA-256. Each server process keeps its own:
nothing is shared between processes, so there is nothing to invalidate across them. The
baseline lookup reads no bytes: only the documents not kept here are fetched (load).

The cache is bounded by the memory its documents take, not by their number: the largest
document the server accepts takes about 45 MiB once parsed, a small one 400 KiB, so a bound by
count held anything from a few MiB to gigabytes (RNX_DOCUMENT_CACHE_MB, docs/server.md).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from gate_server.db.runs import BaselineRun
from rnx.schema import ResultsDocument, parse_results

if TYPE_CHECKING:
    from rnx.verdict import PreparedBaselines

DEFAULT_CACHE_BYTES = 256 * 1024 * 1024
# What a parsed document takes in memory, measured with tracemalloc once its samples' groups
# are worked out (48 configurations: 89 bytes a sample at 10,000 samples a configuration, 74 at
# 1,000; 8 KiB a configuration besides): rounded up, so the estimate is never below the truth.
PARSED_BYTES_PER_SAMPLE = 96
PARSED_BYTES_PER_CONFIGURATION = 8 * 1024
# Baseline sets kept prepared for the statistics (one per workload and its chosen runs; each
# holds its documents and a few arrays of their samples' size).
KEEP_PREPARED = 64


def parsed_size(doc: ResultsDocument) -> int:
    """About how many bytes `doc` takes in memory once parsed and its groups kept."""
    samples = sum(
        len(s.ns) for c in doc.configurations for s in (c.samples, c.base_samples) if s is not None
    )
    return PARSED_BYTES_PER_SAMPLE * samples + PARSED_BYTES_PER_CONFIGURATION * (
        1 + len(doc.configurations)
    )


class StoredDocuments:
    """A least-recently-used cache of parsed stored documents, bounded by the bytes they take
    (parsed_size); safe across threads. A document larger than the whole bound is not kept."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES):
        self._entries: OrderedDict[tuple[str, str], tuple[ResultsDocument, int]] = OrderedDict()
        self.max_bytes = max_bytes
        self.size = 0  # bytes, the sum of the kept documents' parsed_size
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self._prepared: OrderedDict[tuple[tuple[str, str], ...], PreparedBaselines] = OrderedDict()

    def prepared(
        self, chosen: Sequence[BaselineRun], docs: Sequence[ResultsDocument]
    ) -> PreparedBaselines:
        """The chosen runs' documents (load's answer for them) prepared once for every upload
        re-gated against this baseline set (rnx.verdict.PreparedBaselines), by the runs and
        their stored bytes' digests: the documents of a kept set are the ones it was made
        from, which hold the same numbers as docs."""
        from rnx.verdict import PreparedBaselines

        key = tuple((r.run_id, r.body_sha256) for r in chosen)
        with self._lock:
            found = self._prepared.get(key)
            if found is not None:
                self._prepared.move_to_end(key)
                return found
        made = PreparedBaselines(docs)
        with self._lock:
            found = self._prepared.setdefault(key, made)
            self._prepared.move_to_end(key)
            while len(self._prepared) > KEEP_PREPARED:
                self._prepared.popitem(last=False)
        return found

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
        size = parsed_size(doc)
        with self._lock:
            self.misses += 1
            if size > self.max_bytes or key in self._entries:
                return doc
            self._entries[key] = (doc, size)
            self.size += size
            while self.size > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.size -= dropped
        return doc

    def _kept(self, key: tuple[str, str]) -> ResultsDocument | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return found[0]

    def __len__(self) -> int:
        return len(self._entries)
