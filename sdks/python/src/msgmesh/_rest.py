"""The HTTP calls, shared by the sync and asyncio clients: each builds a
:class:`Call` (what to send) and parses the answer; the clients only send."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar
from urllib.parse import quote

from ._models import (
    HeadersInput,
    Message,
    PublishBatchResult,
    PublishResult,
    Token,
    Topic,
    headers_to_wire,
    parse_time,
)

DEFAULT_URL = "http://127.0.0.1:8080"
USER_AGENT = "msgmesh-python/0.1.0"


@dataclass(frozen=True)
class Urls:
    control_plane: str
    gateway: str
    realtime: str


def resolve_urls(url: str | None, control_plane_url: str | None, gateway_url: str | None,
                 realtime_url: str | None) -> Urls:
    base = (url or os.environ.get("MSGMESH_URL") or DEFAULT_URL).rstrip("/")
    return Urls(
        control_plane=(control_plane_url or base).rstrip("/"),
        gateway=(gateway_url or base).rstrip("/"),
        realtime=(realtime_url or base).rstrip("/"),
    )


T = TypeVar("T")


def _none(doc: Any) -> None:
    return None


@dataclass
class Call(Generic[T]):
    method: str
    url: str
    json: Any = None
    timeout: float | None = None
    parse: Callable[[Any], T] = _none  # type: ignore[assignment]
    expect_body: bool = True


def _t(name: str) -> str:
    return quote(name, safe="")


def create_topic(u: Urls, name: str, partitions: int | None) -> Call[Topic]:
    body: dict[str, Any] = {"name": name}
    if partitions is not None:
        body["partitions"] = partitions
    return Call("POST", f"{u.control_plane}/v1/topics", body, parse=Topic.from_json)


def delete_topic(u: Urls, name: str) -> Call[None]:
    return Call("DELETE", f"{u.control_plane}/v1/topics/{_t(name)}", expect_body=False)


def get_topic(u: Urls, name: str) -> Call[Topic]:
    return Call("GET", f"{u.control_plane}/v1/topics/{_t(name)}", parse=Topic.from_json)


def list_topics(u: Urls) -> Call[list[Topic]]:
    return Call("GET", f"{u.control_plane}/v1/topics",
                parse=lambda doc: [Topic.from_json(t) for t in doc.get("topics", [])])


def _message_body(data: Any, room: str | None, headers: HeadersInput | None) -> dict[str, Any]:
    m: dict[str, Any] = {"data": data}
    if room is not None:
        m["room"] = room
    wire = headers_to_wire(headers)
    if wire:
        m["headers"] = wire
    return m


def publish(u: Urls, topic: str, data: Any, room: str | None, headers: HeadersInput | None) -> Call[PublishResult]:
    return Call("POST", f"{u.gateway}/v1/topics/{_t(topic)}/messages", _message_body(data, room, headers),
                parse=lambda doc: PublishResult(doc["cursor"]))


def publish_batch(u: Urls, topic: str, messages: Sequence[Any]) -> Call[PublishBatchResult]:
    body = []
    for m in messages:
        if isinstance(m, Mapping):
            if "data" not in m:
                raise ValueError("each message of publish_batch needs 'data'")
            body.append(_message_body(m["data"], m.get("room"), m.get("headers")))
        else:
            raise TypeError("publish_batch takes a list of {'data', 'room'?, 'headers'?} mappings")
    if not body:
        raise ValueError("publish_batch needs at least one message")
    return Call("POST", f"{u.gateway}/v1/topics/{_t(topic)}/messages", {"messages": body},
                parse=lambda doc: PublishBatchResult(list(doc["cursors"])))


def poll(u: Urls, topic: str, group: str, consumer: str | None, max: int | None, wait_ms: int | None,
         max_bytes: int | None, ack: str | None) -> Call[dict[str, Any]]:
    body: dict[str, Any] = {"group": group}
    if consumer is not None:
        body["consumer"] = consumer
    if max is not None:
        body["max"] = max
    if max_bytes is not None:
        body["max_bytes"] = max_bytes
    if wait_ms is not None:
        body["wait_ms"] = wait_ms
    if ack is not None:
        body["ack"] = ack
    # the server waits up to wait_ms (capped at poll.max_wait, 30 s by default)
    timeout = (wait_ms if wait_ms is not None else 5000) / 1000.0 + 30.0
    return Call("POST", f"{u.gateway}/v1/topics/{_t(topic)}/poll", body, timeout=timeout,
                parse=lambda doc: dict(doc))


def poll_messages(doc: Mapping[str, Any]) -> list[Message]:
    return [Message.from_json(m) for m in doc.get("messages") or []]


def commit(u: Urls, topic: str, group: str, consumer: str | None, cursors: Sequence[str]) -> Call[None]:
    body: dict[str, Any] = {"group": group, "cursors": list(cursors)}
    if consumer is not None:
        body["consumer"] = consumer
    return Call("POST", f"{u.gateway}/v1/topics/{_t(topic)}/commit", body, expect_body=False)


def mint_token(u: Urls, ttl_seconds: int | None, capabilities: Sequence[Mapping[str, Any]] | None) -> Call[Token]:
    body: dict[str, Any] = {}
    if ttl_seconds is not None:
        body["ttl_seconds"] = ttl_seconds
    if capabilities is not None:
        body["capabilities"] = [dict(c) for c in capabilities]
    return Call("POST", f"{u.control_plane}/v1/tokens", body,
                parse=lambda doc: Token(doc["token"], parse_time(doc.get("expires_at")), doc.get("ttl_seconds")))


def poll_key(topic: str, group: str, consumer: str | None) -> tuple[str, str, str]:
    return (topic, group, consumer or "default")
