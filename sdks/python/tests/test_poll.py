"""Poll: the previous batch is acknowledged by the next poll; a consumer
killed mid-batch gets the unacknowledged batch again."""

from __future__ import annotations

import asyncio
import json

import pytest

import msgmesh
from conftest import unique


async def _poll_until(k, topic, group, want, consumer=None):
    got = []
    for _ in range(20):
        got += await k.call("poll", topic, group=group, consumer=consumer, max=want - len(got), wait_ms=2000)
        if len(got) >= want:
            break
    return got


async def test_poll_acknowledges_the_previous_batch_on_the_next_poll(server, admin, kits, kind):
    topic = unique("poll")
    admin.create_topic(topic, partitions=1)
    admin.publish_batch(topic, [{"data": i} for i in range(6)])
    k = kits(kind, api_key=server.key, url=server.url)
    first = await _poll_until(k, topic, "g1", 3)
    assert [m.data for m in first] == [0, 1, 2]
    assert all(isinstance(m, msgmesh.Message) and m.partition == 0 for m in first)
    second = await _poll_until(k, topic, "g1", 3)
    assert [m.data for m in second] == [3, 4, 5]  # the first batch was acknowledged, not delivered again
    empty = await k.call("poll", topic, group="g1", wait_ms=200)
    assert empty == []
    # a new client of the same consumer: everything was acknowledged
    k2 = kits(kind, api_key=server.key, url=server.url)
    assert await k2.call("poll", topic, group="g1", wait_ms=500) == []


async def test_commit_acknowledges_early(server, admin, kits, kind):
    topic = unique("commit")
    admin.create_topic(topic, partitions=1)
    admin.publish_batch(topic, [{"data": i} for i in range(3)])
    k = kits(kind, api_key=server.key, url=server.url)
    got = await _poll_until(k, topic, "gc", 3, consumer="w1")
    await k.call("commit", topic, group="gc", consumer="w1", cursors=got)
    # the process dies here; a new one polls as the same consumer
    k2 = kits(kind, api_key=server.key, url=server.url)
    assert await k2.call("poll", topic, group="gc", consumer="w1", wait_ms=500) == []


async def test_killed_mid_batch_gets_the_unacknowledged_batch_again(server, admin, kits, kind):
    """A poll without ``ack`` gets the outstanding batch again."""
    topic = unique("redeliver")
    admin.create_topic(topic, partitions=1)
    admin.publish_batch(topic, [{"data": i} for i in range(5)])
    k = kits(kind, api_key=server.key, url=server.url)
    batch = await _poll_until(k, topic, "gk", 3, consumer="w1")
    assert [m.data for m in batch] == [0, 1, 2]
    assert k.client._batches, "the server sent no poll batch id"
    # killed mid-batch: the process never polls again; a new one starts as the same consumer
    k2 = kits(kind, api_key=server.key, url=server.url)
    again = await _poll_until(k2, topic, "gk", 3, consumer="w1")
    assert [m.cursor for m in again] == [m.cursor for m in batch]
    # acknowledged by the next poll of the new process
    rest = await _poll_until(k2, topic, "gk", 2, consumer="w1")
    assert [m.data for m in rest] == [3, 4]


class FakePoll:
    """Answers polls from a script and records each request body."""

    def __init__(self, answers):
        self.answers = list(answers)  # (status, body)
        self.bodies: list[dict] = []

    async def start(self) -> str:
        self.srv = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.srv.sockets[0].getsockname()[1]}"

    async def handle(self, r, w) -> None:
        while True:
            try:
                head = (await r.readuntil(b"\r\n\r\n")).decode()
            except asyncio.IncompleteReadError:
                break
            length = next(int(l.split(":", 1)[1]) for l in head.split("\r\n") if l.lower().startswith("content-length"))
            self.bodies.append(json.loads(await r.readexactly(length)))
            status, body = self.answers.pop(0)
            data = json.dumps(body).encode()
            w.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (status, len(data)) + data)
            await w.drain()
        w.close()


async def test_the_next_poll_sends_the_previous_batch_as_ack(kits, kind):
    m = lambda c: {"cursor": c, "room": None, "data": 1, "headers": [], "published_at": "2026-12-01T10:00:00Z"}
    fake = FakePoll([
        (200, {"messages": [m("0-0")], "batch": "b1"}),
        (503, {"error": "kafka slow", "code": "kafka_unavailable", "request_id": "r1"}),
        (200, {"messages": [m("0-1")], "batch": "b2"}),
        (200, {"messages": []}),
        (200, {"messages": [m("0-2")]}),  # a server that sends no batch yet
        (200, {"messages": []}),
    ])
    url = await fake.start()
    k = kits(kind, api_key="mm_test", url=url)
    assert [x.cursor for x in await k.call("poll", "t", group="g", wait_ms=0)] == ["0-0"]
    with pytest.raises(msgmesh.ServerError) as e:
        await k.call("poll", "t", group="g", wait_ms=0)
    assert e.value.request_id == "r1"
    await k.call("poll", "t", group="g", wait_ms=0)
    await k.call("poll", "t", group="g", wait_ms=0)
    await k.call("poll", "t", group="g", wait_ms=0)
    await k.call("poll", "t", group="g", wait_ms=0)
    acks = [b.get("ack") for b in fake.bodies]
    # b1 is sent again after the failed poll; an empty answer or one without a batch leaves nothing to ack
    assert acks == [None, "b1", "b1", "b2", None, None]
    fake.srv.close()
