"""Where this rnx-benchmark was installed from (PEP 610's direct_url.json): the `uses:` reference
`rnx init` writes, so the workflow runs the action that exists, and the pip command that adds
an extra from that same source (no release is on a package index yet)."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from importlib import metadata
from urllib.parse import unquote, urlsplit

DISTRIBUTION = "rnx-benchmark"
# What the workflow holds when the source cannot be known: GitHub refuses to run it, and the
# user is told to fill it in (or pass --action-ref), rather than a ref nobody has published.
PLACEHOLDER = "OWNER/REPO@REF"
# https://github.com/o/r(.git), ssh://github.com/o/r.git (user dropped), git@github.com:o/r.git
_GITHUB_URL = re.compile(
    r"^(?:(?:https?|ssh|git)://github\.com/|git@github\.com:)"
    r"(?P<owner>[A-Za-z0-9-]+)/(?P<repo>[A-Za-z0-9_.-]+?)(?:\.git)?/?$"
)
_SUBDIRECTORY = re.compile(r"^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*$")


@dataclass(frozen=True)
class ActionRef:
    """The `uses:` value and, when it is known, why (shown to the user and as a comment)."""

    uses: str
    note: str

    @property
    def known(self) -> bool:
        return self.uses != PLACEHOLDER


def from_direct_url(text: str | None) -> ActionRef:
    """The action ref of a PEP 610 direct_url.json (None: installed from an index or a
    wheel file, which names no repository)."""
    if text is None:
        return ActionRef(PLACEHOLDER, f"{DISTRIBUTION} was not installed from a git URL")
    try:
        record = json.loads(text)
        # PEP 610 asks pip to drop credentials from the URL; a hand-made record may keep them,
        # and the URL is printed and written into the workflow's comment.
        url = re.sub(r"(?<=//)[^@/]*@", "", str(record["url"]))
        vcs = record.get("vcs_info")
    except (ValueError, KeyError, TypeError):
        return ActionRef(PLACEHOLDER, "its direct_url.json does not parse")
    if not isinstance(vcs, dict):
        return ActionRef(PLACEHOLDER, f"{DISTRIBUTION} was installed from {url}, not a git URL")
    match = _GITHUB_URL.match(url)
    commit = str(vcs.get("commit_id", ""))
    if vcs.get("vcs") != "git" or match is None or not re.fullmatch(r"[0-9a-f]{40}", commit):
        return ActionRef(PLACEHOLDER, f"{url} is not a repository on github.com")
    path = f"{match['owner']}/{match['repo']}"
    subdirectory = str(record.get("subdirectory") or "")
    if subdirectory and _SUBDIRECTORY.match(subdirectory):
        path += f"/{subdirectory}"
    # The commit, not the branch or tag asked for: it is what was installed, and a tag can move.
    asked = vcs.get("requested_revision")
    note = f"installed from {url}" + (f" at {asked}" if asked else "")
    return ActionRef(f"{path}@{commit}", note)


def _direct_url() -> str | None:
    try:
        return metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None


def installed() -> ActionRef:
    """The action ref of the installed rnx-benchmark."""
    return from_direct_url(_direct_url())


def pip_install(extra: str, direct_url: str | None = None) -> str:
    """`pip install ...` that adds `extra` from where rnx-benchmark came from: the same git
    commit, the same checkout, else the package index."""
    try:
        record = json.loads(direct_url if direct_url is not None else _direct_url() or "{}")
        url, vcs, local = str(record["url"]), record.get("vcs_info"), record.get("dir_info")
    except (ValueError, KeyError, TypeError):
        return f"pip install '{DISTRIBUTION}[{extra}]'"
    if isinstance(vcs, dict) and vcs.get("vcs") == "git" and vcs.get("commit_id"):
        url = re.sub(r"(?<=//)[^@/]*@", "", url)  # never a credential (see from_direct_url)
        sub = record.get("subdirectory")
        tail = f"#subdirectory={sub}" if sub else ""
        return "pip install " + shlex.quote(
            f"{DISTRIBUTION}[{extra}] @ git+{url}@{vcs['commit_id']}{tail}"
        )
    if isinstance(local, dict) and url.startswith("file://"):
        path = unquote(urlsplit(url).path)
        editable = "-e " if local.get("editable") else ""
        return f"pip install {editable}{shlex.quote(f'{path}[{extra}]')}"
    return f"pip install '{DISTRIBUTION}[{extra}]'"
