"""Typed errors with status, code, request_id and retry_after."""

from __future__ import annotations

import pytest

import msgmesh
from conftest import unique


async def test_typed_errors(server, admin, kits, kind):
    k = kits(kind, api_key=server.key, url=server.url)
    topic = unique("err")
    t = await k.call("create_topic", topic, partitions=2)
    assert t.name == topic and t.partitions == 2
    assert topic in [x.name for x in await k.call("list_topics")]

    with pytest.raises(msgmesh.ConflictError) as e:
        await k.call("create_topic", topic)
    assert e.value.status == 409 and e.value.code

    with pytest.raises(msgmesh.NotFoundError) as e:
        await k.call("publish", unique("nope"), {"x": 1})
    assert e.value.status == 404 and e.value.code == "topic_not_found"

    with pytest.raises(msgmesh.InvalidRequestError) as e:
        await k.call("poll", topic, group="bad group!")
    assert e.value.status in (400, 422)

    with pytest.raises(msgmesh.PayloadTooLargeError) as e:
        await k.call("publish", topic, "x" * (1024 * 1024 + 10))
    assert e.value.status == 413 and e.value.code == "payload_too_large"

    r = await k.call("publish", topic, {"h": 1}, room="r", headers={"trace": "abc"})
    got = await k.call("poll", topic, group="eg", wait_ms=3000)
    assert [m.cursor for m in got] == [r.cursor] and got[0].header("trace") == "abc"

    await k.call("delete_topic", topic)
    with pytest.raises(msgmesh.NotFoundError):
        await k.call("delete_topic", topic)
    for cls in (msgmesh.InvalidRequestError, msgmesh.UnauthorizedError, msgmesh.ForbiddenError,
                msgmesh.NotFoundError, msgmesh.ConflictError, msgmesh.PayloadTooLargeError,
                msgmesh.RateLimitError, msgmesh.ServerError):
        assert issubclass(cls, msgmesh.MsgMeshError)


def test_error_from_response_reads_request_id_and_retry_after():
    from msgmesh._errors import error_from_response
    e = error_from_response(503, b'{"error":"kafka slow","code":"kafka_unavailable","request_id":"r-1"}', {})
    assert isinstance(e, msgmesh.ServerError) and e.request_id == "r-1" and e.code == "kafka_unavailable"
    e = error_from_response(429, b'{"error":"slow down","code":"rate_limited"}', {"Retry-After": "3", "X-Request-Id": "r-2"})
    assert isinstance(e, msgmesh.RateLimitError) and e.retry_after == 3.0 and e.request_id == "r-2"
    e = error_from_response(422, b"not json", {})
    assert isinstance(e, msgmesh.InvalidRequestError) and e.status == 422


def test_headers_list_and_object_shapes():
    m = msgmesh.Message.from_json({"cursor": "2-7", "room": None, "data": 1, "published_at": "2026-12-01T10:00:00.5Z",
                                   "headers": [{"key": "a", "value": "1"}, {"key": "a", "value": "2"},
                                               {"key": "b", "value_base64": "/w=="}]})
    assert (m.partition, m.offset) == (2, 7)
    assert m.headers == [msgmesh.Header("a", "1"), msgmesh.Header("a", "2"), msgmesh.Header("b", None, "/w==")]
    assert m.published_at is not None and m.published_at.microsecond == 500000
    old = msgmesh.Message.from_json({"cursor": "0-1", "room": "r", "data": None, "data_base64": "AAE=",
                                     "headers": {"content-type": "application/octet-stream"},
                                     "published_at": "2026-12-01T10:00:00Z"})
    assert old.headers == [msgmesh.Header("content-type", "application/octet-stream")] and old.data_base64 == "AAE="


async def test_no_answer_is_a_connection_lost_error(kits, kind):
    from conftest import free_port
    k = kits(kind, api_key="mm_x", url=f"http://127.0.0.1:{free_port()}")  # nothing listens there
    with pytest.raises(msgmesh.ConnectionLostError) as e:
        await k.call("list_topics")
    assert isinstance(e.value, msgmesh.ServerError) and e.value.status is None and e.value.code == "network_error"


async def test_publish_headers_as_a_list_in_record_order(server, admin, kits, kind):
    """Headers are a list in record order, duplicates kept (CONTRACT.md)."""
    topic = unique("hdrs")
    admin.create_topic(topic, partitions=1)
    k = kits(kind, api_key=server.key, url=server.url)
    hs = [msgmesh.Header("a", "1"), {"key": "a", "value": "2"}, msgmesh.Header("b", "x")]
    await k.call("publish", topic, {"x": 1}, headers=hs)
    got = []
    for _ in range(10):
        got += await k.call("poll", topic, group="hg", wait_ms=2000)
        if got:
            break
    mine = [h for h in got[0].headers if h.key in ("a", "b")]
    assert mine == [msgmesh.Header("a", "1"), msgmesh.Header("a", "2"), msgmesh.Header("b", "x")]
