"""Failures inside a worker that become a configuration's status instead of a crash."""

from __future__ import annotations


class ConfigFailure(Exception):
    """Ends one configuration with a status (unsupported, diverged, error) and a reason."""

    status = "error"

    def __init__(self, reason: str, *, details: dict[str, object] | None = None):
        super().__init__(reason)
        self.reason = reason
        self.details = details or {}


class Unsupported(ConfigFailure):
    """The runtime cannot do this combination (or is not installed): not a fault of the kernel."""

    status = "unsupported"


class WorkloadError(ConfigFailure):
    """The workload file fails to import, lacks a name, or raises while building its inputs."""

    status = "error"
