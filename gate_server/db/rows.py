"""Rows as frozen dataclasses: each field read from the column of its name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime, timezone
from typing import Any, TypeVar

T = TypeVar("T")


def aware(value: datetime | None) -> datetime | None:
    """A stored time as UTC: SQLite hands datetimes back without a zone."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


def as_record(cls: type[T], row: Mapping[Any, Any], **decoded: Any) -> T:
    """An instance of dataclass `cls` from a row's mapping; `decoded` gives fields whose column
    needs decoding first (JSON text, say). Every time comes back timezone-aware (UTC)."""
    values = {}
    for f in fields(cls):  # type: ignore[arg-type]
        value = decoded[f.name] if f.name in decoded else row[f.name]
        values[f.name] = aware(value) if isinstance(value, datetime) else value
    return cls(**values)
