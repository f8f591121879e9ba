"""What a job handler is handed: the part of the app's Services (gate_server/services.py) that
the domain's handlers use. A Protocol, so that the domain never imports the app's wiring: the
worker hands over its Services, which has these and more."""

from __future__ import annotations

from typing import Protocol

from gate_server.db import Database
from gate_server.domain.alerts.traffic import ChannelTraffic
from gate_server.settings import ServerSettings
from rnx_github.app_auth import GitHubApp


class GitHubAppSetting(Protocol):
    """The GitHub App, when App mode is on (None when it is off)."""

    @property
    def app(self) -> GitHubApp | None: ...


class JobContext(Protocol):
    @property
    def settings(self) -> ServerSettings: ...

    @property
    def database(self) -> Database: ...

    @property
    def traffic(self) -> ChannelTraffic: ...

    @property
    def github(self) -> GitHubAppSetting: ...
