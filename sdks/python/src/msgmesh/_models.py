"""The values the SDK returns: messages, headers, topics, tokens."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence, Union

__all__ = ["Header", "Message", "PublishResult", "PublishBatchResult", "Topic", "Token", "Resync", "HeadersInput"]


@dataclass(frozen=True)
class Header:
    """One record header, in record order. ``value`` is the text; a value
    that is not valid UTF-8 comes as ``value_base64`` instead."""

    key: str
    value: str | None = None
    value_base64: str | None = None


HeadersInput = Union[Mapping[str, str], Sequence[Union[Header, Mapping[str, Any]]]]

_FRACTION = re.compile(r"\.(\d+)")


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 (``Z`` or an offset, any number of fraction digits)."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    text = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], text, count=1)
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def parse_headers(raw: Any) -> list[Header]:
    """Headers as the server sends them: a list of ``{"key","value"}`` /
    ``{"key","value_base64"}`` (CONTRACT), or the older JSON object."""
    if isinstance(raw, list):
        out = []
        for h in raw:
            if isinstance(h, Mapping) and isinstance(h.get("key"), str):
                out.append(Header(h["key"], h.get("value"), h.get("value_base64")))
        return out
    if isinstance(raw, Mapping):
        return [Header(str(k), v if isinstance(v, str) else str(v)) for k, v in raw.items()]
    return []


def headers_to_wire(headers: HeadersInput | None) -> Any:
    """Publish headers: a mapping stays a JSON object (document order); a
    list becomes ``[{"key","value"|"value_base64"}]``."""
    if headers is None:
        return None
    if isinstance(headers, Mapping):
        return {str(k): str(v) for k, v in headers.items()}
    out = []
    for h in headers:
        if isinstance(h, Header):
            d: dict[str, Any] = {"key": h.key}
            if h.value_base64 is not None:
                d["value_base64"] = h.value_base64
            else:
                d["value"] = h.value if h.value is not None else ""
            out.append(d)
        elif isinstance(h, Mapping):
            out.append(dict(h))
        else:
            raise TypeError(f"a header must be a Header or a mapping, not {type(h).__name__}")
    return out


def split_cursor(cursor: str) -> tuple[int, int]:
    p, _, o = cursor.partition("-")
    return int(p), int(o)


@dataclass(frozen=True)
class Message:
    """One message. ``partition`` and ``offset`` come from ``cursor``
    (``<partition>-<offset>``). ``data`` is the JSON payload; a payload that
    is not JSON is ``data_base64`` (and ``data`` is ``None``)."""

    cursor: str
    partition: int
    offset: int
    room: str | None
    data: Any
    headers: list[Header] = field(default_factory=list)
    published_at: datetime | None = None
    data_base64: str | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Message":
        cursor = doc["cursor"]
        if not isinstance(cursor, str):
            raise ValueError("message without a cursor")
        partition, offset = split_cursor(cursor)
        return cls(
            cursor=cursor,
            partition=partition,
            offset=offset,
            room=doc.get("room"),
            data=doc.get("data"),
            headers=parse_headers(doc.get("headers")),
            published_at=parse_time(doc.get("published_at")),
            data_base64=doc.get("data_base64"),
        )

    def header(self, key: str) -> str | None:
        """The value of the first header named ``key`` (case-sensitive), if any."""
        for h in self.headers:
            if h.key == key:
                return h.value
        return None


@dataclass(frozen=True)
class PublishResult:
    cursor: str


@dataclass(frozen=True)
class PublishBatchResult:
    cursors: list[str]


@dataclass(frozen=True)
class Topic:
    name: str
    partitions: int
    kafka_topic: str | None = None
    retention_ms: int | None = None
    created_at: datetime | None = None
    epoch: str | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Topic":
        return cls(
            name=doc["name"],
            partitions=int(doc.get("partitions", 0)),
            kafka_topic=doc.get("kafka_topic"),
            retention_ms=doc.get("retention_ms"),
            created_at=parse_time(doc.get("created_at")),
            epoch=doc.get("epoch"),
        )


@dataclass(frozen=True)
class Token:
    """A minted token. Return it (or ``{"token", "expires_at"}``, or the bare
    string) from ``get_token``."""

    token: str
    expires_at: datetime | None
    ttl_seconds: int | None = None


@dataclass(frozen=True)
class Resync:
    """The server cannot guarantee completeness from the requested position
    (``reason``: ``window_records``, ``window_age``, ``retention`` or
    ``epoch``): reload your state, then keep applying messages. The stream
    continues live from ``position``."""

    reason: str
    position: str | None
