"""Which workload a run measured: its path in the repository, normalised. Baselines are kept per
workload, so this path is part of a baseline's identity (never the file's content hash, which
changes with every pull request that edits the kernel).

Migration 5 (gate_server/db/migrations.py) gave the runs stored before it their workload with
these rules: change them only together with a migration that re-keys the stored runs.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gate_server.errors import InvalidInput

# A path's UTF-8 bytes are bounded, not only its characters (runs.workload is this wide): the
# baseline index (ix_runs_baseline) holds the workload next to a branch name and an environment
# key, and PostgreSQL refuses an index entry over about 2,700 bytes.
MAX_WORKLOAD_BYTES = 1000
# The workload of a run stored before migration 5 whose document cannot be read, or whose
# workload.path is not a path these rules accept. It starts with "/", which no normalised path
# does, so no upload is ever compared with such runs.
UNKNOWN_WORKLOAD = "/(unknown workload)"

_DRIVE = re.compile(r"^[A-Za-z]:")
_EXAMPLE = "e.g. kernels/attention.py"


class InvalidWorkloadPath(InvalidInput):
    """A workload.path that does not name a file in the repository."""


def workload_identity(path: str) -> str:
    """`path` as the workload's identity: forward slashes, no empty or `.` segments (so
    `./kernels//attention.py` is `kernels/attention.py`). Refused: a path that names nothing,
    an absolute one (`/...`, `C:...`), one with a `..` segment anywhere (a commit's paths never
    hold one), control characters, more than MAX_WORKLOAD_BYTES bytes of UTF-8."""
    shown = repr(path[:200])
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise InvalidWorkloadPath(f"workload.path {shown} holds control characters")
    text = path.replace("\\", "/")
    if text.startswith("/") or _DRIVE.match(text):
        raise InvalidWorkloadPath(
            f"workload.path {shown} is absolute; give the workload's path relative to the "
            f"repository root, {_EXAMPLE}"
        )
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise InvalidWorkloadPath(
            f"workload.path {shown} has a '..' segment; give the workload's path inside the "
            f"repository without '..', {_EXAMPLE}"
        )
    if not parts:
        raise InvalidWorkloadPath(f"workload.path {shown} names no file; {_EXAMPLE}")
    identity = "/".join(parts)
    size = len(identity.encode("utf-8"))
    if size > MAX_WORKLOAD_BYTES:
        raise InvalidWorkloadPath(
            f"workload.path is {size} bytes long in UTF-8; at most {MAX_WORKLOAD_BYTES}"
        )
    return identity


def stored_workload(document: bytes) -> str:
    """The workload of a stored document (migration 5): UNKNOWN_WORKLOAD when the document
    cannot be read or its workload.path is refused. Never raises."""
    try:
        raw: Any = json.loads(document)
        path = raw["workload"]["path"]
    except (ValueError, UnicodeDecodeError, RecursionError, KeyError, TypeError):
        return UNKNOWN_WORKLOAD
    if not isinstance(path, str):
        return UNKNOWN_WORKLOAD
    try:
        return workload_identity(path)
    except InvalidWorkloadPath:
        return UNKNOWN_WORKLOAD


def several_workloads(raw: Any) -> str | None:
    """Why an uploaded JSON body holds more than one workload (a list of documents, a
    `workloads` list, a `workload` that is a list), or None when it holds at most one (a list
    of anything else is no results document at all: the document parser says so)."""
    if isinstance(raw, list) and any(isinstance(item, dict) for item in raw):
        return f"the body is a JSON array of {len(raw)} documents"
    if not isinstance(raw, dict):
        return None
    if "workloads" in raw:
        return "the document has a 'workloads' field"
    if isinstance(raw.get("workload"), list):
        return "the document's 'workload' is a list"
    return None
