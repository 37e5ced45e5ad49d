"""A 503 on reconnect: the next attempt is scheduled on the backoff
schedule and a ServerError with its request_id reaches on_error."""

from __future__ import annotations

import asyncio

import pytest

import msgmesh
from conftest import eventually, unique

TRANSPORTS = ["sse", "websocket"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_503_on_reconnect_is_reported_and_retried(server, admin, proxy, kits, kind, transport):
    topic = unique("t503")
    admin.create_topic(topic, partitions=3)
    min_delay, max_delay = 0.1, 0.8
    k = kits(kind, api_key=server.key, url=server.url, realtime_url=proxy.url,
             reconnect={"min_delay": min_delay, "max_delay": max_delay})
    s = await k.subscribe(topic, transport=transport)
    await s.wait_live()
    await asyncio.to_thread(admin.publish, topic, {"i": 0})
    await eventually(lambda: len(s.messages) == 1, 10, "the first message")

    proxy.fail_next(3)
    before = len(proxy.accepted)
    proxy.cut()
    await asyncio.to_thread(admin.publish, topic, {"i": 1})  # while it cannot connect
    is503 = lambda e: isinstance(e, msgmesh.ServerError) and e.status == 503
    await eventually(lambda: sum(map(is503, s.errors)) == 3, 20, "three 503s")
    errs = [e for e in s.errors if is503(e)]
    assert [e.request_id for e in errs] == proxy.injected == ["req-injected-1", "req-injected-2", "req-injected-3"]
    assert all(e.status == 503 and e.code == "kafka_unavailable" for e in errs)
    await s.wait_live(20)  # the fourth attempt gets through
    await eventually(lambda: len(s.messages) == 2, 10, "the message published meanwhile")
    assert [m.data["i"] for m in s.messages] == [0, 1]
    attempts = proxy.accepted[before:]
    assert len(attempts) >= 4
    # full jitter: retry n (after the first reconnect, n = 1, 2, ...) waits between min_delay and
    # min(max_delay, min_delay * 2**n), plus scheduling slack
    for n, (a, b) in enumerate(zip(attempts, attempts[1:]), start=1):
        assert min_delay * 0.9 <= b - a <= min(max_delay, min_delay * 2 ** n) + 0.3, f"gap {n} was {b - a:.2f}s"
    assert s.sub.state == "live"
