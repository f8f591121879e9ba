"""GitHub Actions' workflow commands and files: outputs, job summary, annotations, masking.

The only module that writes `::command::` lines or touches GITHUB_OUTPUT / GITHUB_STEP_SUMMARY,
so every escape rule lives in one place. Workflow commands are written only where
GITHUB_ACTIONS=true: anywhere else (GitLab, Jenkins, a terminal) nothing would read them, and
`::add-mask::` would print the very secret it masks into a plain log. There an annotation is a
plain line ("error: title: message"), masking is left to that CI's own masked variables, and
the files are skipped when their variables are unset.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, TextIO, TypedDict

if TYPE_CHECKING:
    from typing_extensions import Unpack


def _escape_data(text: str) -> str:
    # The runner's own escaping rules (actions/toolkit command.ts): data may not contain raw
    # newlines or a '%' that would be read as an escape.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


class Where(TypedDict, total=False):
    """Where an annotation points (GitHub shows it on that file and line)."""

    file: str | None
    line: int | None
    title: str | None


class Workflow:
    """Writes workflow commands to `out` and the runner's files named in `env`."""

    def __init__(self, env: Mapping[str, str] | None = None, out: TextIO | None = None) -> None:
        self.env = dict(os.environ if env is None else env)
        self.out = out if out is not None else sys.stdout
        self.on_github = self.env.get("GITHUB_ACTIONS") == "true"

    def _command(self, name: str, message: str, **props: str | int | None) -> None:
        if not self.on_github:
            self._plain(name, message, props)
            return
        given = {k: v for k, v in props.items() if v is not None}
        prop_text = ",".join(f"{k}={_escape_property(str(v))}" for k, v in given.items())
        sep = " " if prop_text else ""
        self.out.write(f"::{name}{sep}{prop_text}::{_escape_data(message)}\n")
        self.out.flush()

    def _plain(self, level: str, message: str, props: dict[str, str | int | None]) -> None:
        where = ":".join(str(props[k]) for k in ("file", "line") if props.get(k) is not None)
        head = ": ".join(str(x) for x in (level, where, props.get("title")) if x)
        self.log(f"{head}: {message}")

    def error(self, message: str, **where: Unpack[Where]) -> None:
        self._command("error", message, **where)

    def warning(self, message: str, **where: Unpack[Where]) -> None:
        self._command("warning", message, **where)

    def notice(self, message: str, **where: Unpack[Where]) -> None:
        self._command("notice", message, **where)

    def mask(self, secret: str) -> None:
        # Outside Actions the command would be the leak: print nothing.
        if secret and self.on_github:
            self._command("add-mask", secret)

    def log(self, message: str) -> None:
        self.out.write(message + "\n")
        self.out.flush()

    def set_output(self, name: str, value: str) -> None:
        path = self.env.get("GITHUB_OUTPUT")
        if not path:
            return
        # The heredoc form survives multi-line values; a random delimiter cannot occur in them.
        delimiter = f"rnx_{uuid.uuid4().hex}"
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")

    def append_summary(self, markdown: str) -> None:
        path = self.env.get("GITHUB_STEP_SUMMARY")
        if not path:
            return
        with open(path, "a", encoding="utf-8") as f:
            f.write(markdown.rstrip("\n") + "\n\n")
