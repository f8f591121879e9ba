"""A stored run document's samples per configuration, one list of times per worker process:
what change-point detection and bisection read of a run."""

from __future__ import annotations

import json
from collections import defaultdict

from rnx.schema import config_id


def sample_groups(document: bytes | None) -> dict[str, list[list[float]]]:
    """Each configuration that ran ("ok", with samples) by its id (runtime/dtype/bsN), its
    sample times grouped by process; a configuration whose samples cannot be read is left out,
    and a document that cannot be read gives {}."""
    try:
        configurations = json.loads(document or b"null")["configurations"]
    except (ValueError, KeyError, TypeError):
        return {}
    out = {}
    for c in configurations if isinstance(configurations, list) else []:
        try:
            if c.get("status") != "ok" or not c.get("samples"):
                continue
            groups: dict[int, list[float]] = defaultdict(list)
            for t, p in zip(c["samples"]["ns"], c["samples"]["process"], strict=True):
                groups[int(p)].append(float(t))
            name = config_id(str(c["runtime"]), str(c["dtype"]), c.get("batch_size"))
            out[name] = [groups[p] for p in sorted(groups)]
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return out
