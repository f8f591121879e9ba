"""Baseline documents parsed once per process (gate_server/domain/stored_documents.py): the same
verdicts as parsing them on every upload, and an accepted run becomes the baseline at once."""

from __future__ import annotations

import gc
import threading
import tracemalloc
import uuid

import pytest

from gate_server.domain.stored_documents import StoredDocuments, parsed_size
from gate_server.errors import SettingsError
from rnx.schema import InvalidDocument, parse_results
from rnx.verdict import evaluate
from testbed.factories import body, make_results

UPLOAD = "/api/v1/runs"


def _stored(seed: int) -> tuple[str, str, bytes]:
    doc = make_results(seed=seed, run_id=uuid.UUID(int=seed + 1))
    return str(doc.run_id), f"{seed:064x}", body(doc)


def test_a_document_is_parsed_once_and_kept_by_run_and_digest() -> None:
    cache = StoredDocuments()
    run_id, digest, data = _stored(1)
    first = cache.parsed(run_id, digest, data)
    assert cache.parsed(run_id, digest, data) is first
    assert (cache.hits, cache.misses) == (1, 1)
    assert first == parse_results(data)
    # Other bytes under the same run id (never stored, but keyed apart all the same).
    other = cache.parsed(run_id, "f" * 64, _stored(2)[2])
    assert other is not first and cache.misses == 2


def test_the_least_recently_used_document_goes_first() -> None:
    a, b, c = (_stored(s) for s in (1, 2, 3))
    cache = StoredDocuments(max_bytes=2 * parsed_size(parse_results(a[2])))
    kept_a = cache.parsed(*a)
    cache.parsed(*b)
    assert cache.parsed(*a) is kept_a  # a is now the most recently used
    cache.parsed(*c)  # evicts b
    assert len(cache) == 2
    assert cache.parsed(*a) is kept_a
    misses = cache.misses
    cache.parsed(*b)
    assert cache.misses == misses + 1


def _large(seed: int, n: int) -> tuple[str, str, bytes]:
    doc = make_results(seed=seed, run_id=uuid.UUID(int=seed + 1), configs=CONFIGS_48, n=n)
    return str(doc.run_id), f"{seed:064x}", body(doc)


CONFIGS_48 = [
    (runtime, dtype, bs)
    for runtime in ("pytorch_eager", "onnxruntime", "torch_compile")
    for dtype in ("float32", "float16", "bfloat16", "float64")
    for bs in (1, 8, 32, 64)
]


def test_the_bound_is_bytes_not_documents() -> None:
    small = [_stored(s) for s in range(1, 11)]
    large = _large(20, n=3000)
    one_small = parsed_size(parse_results(small[0][2]))
    cache = StoredDocuments(max_bytes=10 * one_small)
    for key in small:
        cache.parsed(*key)
    assert len(cache) == 10 and cache.size <= cache.max_bytes
    # A large document is not kept when it alone exceeds the bound, and evicts nothing.
    cache.parsed(*large)
    assert len(cache) == 10 and cache.size == 10 * one_small
    cache.max_bytes = parsed_size(parse_results(large[2])) + one_small
    cache.parsed(*large)  # kept now: the small ones make room, oldest first
    assert cache.size <= cache.max_bytes and len(cache) == 2
    assert cache.parsed(*small[-1]) is not None and cache.misses == 11 + 1


def test_a_parsed_document_takes_no_more_than_its_estimate() -> None:
    # What the bound counts (parsed_size) against what the document really holds: tracemalloc
    # after parsing and working out the groups the statistics keep.
    for n in (30, 2000):
        data = _large(30 + n, n=n)[2]
        gc.collect()
        tracemalloc.start()
        try:
            doc = parse_results(data)
            for c in doc.configurations:
                if c.samples is not None:
                    c.samples.process_arrays  # noqa: B018 (kept once worked out)
            taken = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        assert taken <= parsed_size(doc) <= 2 * taken


def test_the_server_bounds_its_cache_by_the_setting() -> None:
    from gate_server.settings import load_settings

    settings = load_settings({"RNX_DOCUMENT_CACHE_MB": "64"})
    assert settings.document_cache_mb == 64
    with pytest.raises(SettingsError, match="RNX_DOCUMENT_CACHE_MB"):
        load_settings({"RNX_DOCUMENT_CACHE_MB": "lots"})


def test_only_documents_not_kept_are_fetched_and_in_one_call() -> None:
    from datetime import datetime, timezone

    from gate_server.db.runs import BaselineRun

    stored = {run_id: (digest, data) for run_id, digest, data in map(_stored, (1, 2, 3))}
    chosen = [
        BaselineRun(i, run_id, 1, "a" * 40, datetime.now(timezone.utc), digest)
        for i, (run_id, (digest, _)) in enumerate(stored.items())
    ]
    calls: list[list[str]] = []

    def fetch(run_ids: list[str]) -> dict[str, bytes]:
        calls.append(run_ids)
        return {run_id: stored[run_id][1] for run_id in run_ids}

    cache = StoredDocuments()
    cache.parsed(chosen[1].run_id, *stored[chosen[1].run_id])
    docs = cache.load(chosen, fetch)
    assert calls == [[chosen[0].run_id, chosen[2].run_id]]  # the kept one is not read again
    assert [str(d.run_id) for d in docs] == [r.run_id for r in chosen]  # in the chosen order
    assert cache.load(chosen, fetch) == docs and len(calls) == 1  # all kept: nothing read


def test_an_invalid_stored_document_is_refused_and_not_kept() -> None:
    cache = StoredDocuments()
    with pytest.raises(InvalidDocument, match="stored run r1"):
        cache.parsed("r1", "0" * 64, b"{not json")
    assert len(cache) == 0


def test_threads_get_one_consistent_document() -> None:
    cache = StoredDocuments()
    key = _stored(4)
    seen: list[object] = []

    def work() -> None:
        for _ in range(20):
            seen.append(cache.parsed(*key).run_id)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(seen) == {uuid.UUID(key[0])} and len(seen) == 80
    assert len(cache) == 1


def test_uploads_reuse_parsed_baselines_with_unchanged_verdicts(client, ci_token, sign):
    tok = ci_token(branches=("main",))
    history = [make_results(branch="main", seed=s, spread=0.02) for s in range(3)]
    for doc in history:
        data = body(doc)
        assert client.post(UPLOAD, content=data, headers=sign(tok.secret, data)).status_code == 201
    services = client.app.state.services
    cache: StoredDocuments = services.documents
    gate, resamples, seed = (
        services.settings.gate,
        services.settings.resamples,
        services.settings.seed,
    )
    for head_seed in (50, 51):
        head = make_results(
            event="pull_request", pr_number=3, branch="f", seed=head_seed, slowdown=1.3, spread=0.02
        )
        data = body(head)
        answer = client.post(UPLOAD, content=data, headers=sign(tok.secret, data)).json()
        # What evaluate says with the documents parsed afresh, newest baseline first.
        baselines = [parse_results(body(d)) for d in history[::-1]]
        fresh = evaluate(head, baselines, gate, resamples=resamples, seed=seed)
        assert answer["tier"] == fresh.tier
        expected = [c.model_dump(mode="json") for c in fresh.comparisons]
        assert answer["comparisons"] == expected
    # Each stored document was parsed once, by the first upload gated against it: push 1 by
    # push 2, push 2 by push 3, push 3 by the first pull request; the rest were kept.
    assert cache.misses == len(history)
    assert cache.hits == 1 + 2 + 3  # push 3: push 1; first pull request: 1, 2; second: all
    # One prepared baseline per baseline set (the first push's empty one among them): the two
    # pull requests shared the last.
    assert len(cache._prepared) == 4


def test_a_baseline_set_is_prepared_once_and_gives_the_numbers_of_one_made_anew() -> None:
    from datetime import datetime, timezone

    from gate_server.db.runs import BaselineRun
    from rnx.config import GateSettings

    stored = {run_id: (digest, data) for run_id, digest, data in map(_stored, (1, 2, 3))}
    chosen = [
        BaselineRun(i, run_id, 1, "a" * 40, datetime.now(timezone.utc), digest)
        for i, (run_id, (digest, _)) in enumerate(stored.items())
    ]
    cache = StoredDocuments()
    docs = cache.load(chosen, lambda ids: {i: stored[i][1] for i in ids})
    prepared = cache.prepared(chosen, docs)
    assert cache.prepared(chosen, docs) is prepared  # the same set: made once
    assert cache.prepared(chosen[:2], docs[:2]) is not prepared  # another set: its own
    head = make_results(seed=40, slowdown=1.1, event="pull_request", pr_number=2, branch="f")
    gate = GateSettings()
    for _ in range(2):
        with_it = evaluate(head, prepared.baselines, gate, prepared=prepared)
        anew = evaluate(head, [parse_results(d) for _, d in stored.values()], gate)
        assert with_it.model_dump() == anew.model_dump()
    with pytest.raises(ValueError, match="prepared must be made from these very"):
        evaluate(head, [parse_results(d) for _, d in stored.values()], gate, prepared=prepared)


def test_an_accepted_run_is_the_baseline_of_the_next_upload(client, ci_token, sign):
    """Accepting changes which runs are chosen, read from the database on every upload; the
    cache only saves parsing them."""
    tok = ci_token(branches=("main",))
    for s in range(3):
        data = body(make_results(branch="main", seed=s))
        client.post(UPLOAD, content=data, headers=sign(tok.secret, data))
    slow = body(make_results(event="pull_request", pr_number=4, branch="f", seed=9, slowdown=1.5))
    first = client.post(UPLOAD, content=slow, headers=sign(tok.secret, slow)).json()
    assert first["tier"] == "BLOCK" and len(first["baseline"]["run_ids"]) == 3
    accepted = client.post(
        f"{UPLOAD}/{first['run_id']}/accept",
        json={"reason": "slower kernel, more accurate"},
        headers={"Authorization": f"Bearer {tok.secret}"},
    )
    assert accepted.status_code == 200, accepted.text
    again = body(make_results(event="pull_request", pr_number=4, branch="f", seed=10, slowdown=1.5))
    second = client.post(UPLOAD, content=again, headers=sign(tok.secret, again)).json()
    assert second["baseline"]["run_ids"] == [first["run_id"]]
    assert second["tier"] == "PASS"
