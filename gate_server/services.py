"""What a request handler needs (storage, settings, receipt signer), kept on the app's state."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from gate_server.receipts import ReceiptSigner
from gate_server.settings import ServerSettings
from gate_server.storage import Storage


@dataclass(frozen=True)
class Services:
    settings: ServerSettings
    storage: Storage
    signer: ReceiptSigner


def services(request: Request) -> Services:
    found: Services = request.app.state.services
    return found
