"""Subscriptions against the real server: dedupe and order across cut
connections, transport switches with overlapping offsets, resync,
iterators, callbacks that fail."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

import msgmesh
from conftest import eventually, partition_rooms, unique

pytestmark = pytest.mark.asyncio

TRANSPORTS = ["sse", "websocket"]


def assert_once_in_order(got: list[msgmesh.Message], want: dict[str, list[int]]) -> None:
    cursors = [m.cursor for m in got]
    assert len(cursors) == len(set(cursors)), f"duplicates: {sorted(c for c in cursors if cursors.count(c) > 1)}"
    per_room: dict[str, list[int]] = defaultdict(list)
    for m in got:
        per_room[m.room].append(m.data["n"])
    assert dict(per_room) == want  # every message exactly once, in publish order per room


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_cut_connection_mid_stream_three_partitions(server, admin, proxy, kits, kind, transport):
    topic = unique("cut")
    admin.create_topic(topic, partitions=3)
    rooms = list(partition_rooms(admin, topic, 3).values()) * 2  # two rooms per partition at least
    rooms = [f"{r}" for r in rooms[:3]] + ["a", "b", "c"]
    k = kits(kind, api_key=server.key, url=server.url, realtime_url=proxy.url,
             reconnect={"min_delay": 0.05, "max_delay": 0.5})
    s = await k.subscribe(topic, transport=transport)
    await s.wait_live()
    accepted_before = len(proxy.accepted)
    want: dict[str, list[int]] = defaultdict(list)
    n = 0
    for burst in range(4):
        await s.wait_live()
        batch = []
        for _ in range(15):
            room = rooms[n % len(rooms)]
            batch.append({"data": {"n": n}, "room": room})
            want[room].append(n)
            n += 1
        await asyncio.to_thread(admin.publish_batch, topic, batch)
        await asyncio.sleep(0.05)
        before = len(proxy.accepted)
        assert proxy.cut() >= 1  # mid-stream: some of the burst may not have been read yet
        await eventually(lambda: len(proxy.accepted) > before, 15, "a reconnect")
    await eventually(lambda: len(s.messages) >= n, 30, f"{n} messages")
    await asyncio.sleep(0.5)  # nothing more may come
    assert_once_in_order([m for m in s.messages if "n" in (m.data or {})], dict(want))
    assert len(proxy.accepted) - accepted_before >= 4, "each cut was followed by a reconnect"
    assert any(isinstance(e, msgmesh.ConnectionLostError) for e in s.errors)
    assert "reconnecting" in s.states and s.sub.state == "live"


async def test_overlapping_offsets_on_a_new_websocket(server, admin, kits, kind):
    """An SSE subscription delivers partition A's offsets; a WebSocket
    subscription of the same client then replays from the earliest record:
    offsets already seen on A are skipped, the same offsets of partition B
    are delivered."""
    topic = unique("overlap")
    admin.create_topic(topic, partitions=2)
    k = kits(kind, api_key=server.key, url=server.url)
    s1 = await k.subscribe(topic, transport="sse")
    await s1.wait_live()
    probe = admin.publish(topic, {"probe": 1}, room="ra")
    pa = int(probe.cursor.split("-")[0])
    room_b = next(f"rb{i}" for i in range(100)
                  if int(admin.publish(topic, {"probe": 2}, room=f"rb{i}").cursor.split("-")[0]) != pa)
    for i in range(5):
        await asyncio.to_thread(admin.publish, topic, {"i": i}, room="ra")
    await eventually(lambda: sum(1 for m in s1.messages if m.room == "ra") == 6, 15, "partition A on SSE")
    seen_a = {m.offset for m in s1.messages if m.partition == pa}
    await s1.close()
    seen_b_before = {m.offset for m in s1.messages if m.partition != pa}

    for i in range(3):
        await asyncio.to_thread(admin.publish, topic, {"late": i}, room="ra")
        await asyncio.to_thread(admin.publish, topic, {"late": i}, room=room_b)
    s2 = await k.subscribe(topic, transport="websocket", from_="earliest")
    await s2.wait_live()
    await eventually(lambda: len(s2.messages) >= 6, 15, "the new offsets of A and B on the WebSocket")
    await asyncio.sleep(0.5)
    got_a = [m.offset for m in s2.messages if m.partition == pa]
    assert not set(got_a) & seen_a, "an offset already delivered on SSE came again"
    assert got_a == sorted(got_a) and len(got_a) == 3
    got_b = {m.offset for m in s2.messages if m.partition != pa}
    # partition B's records that SSE had already delivered are skipped too; the rest (same offset numbers
    # as A's skipped ones) are delivered
    assert len(got_b) == 3 and not (got_b & seen_b_before)
    assert got_b & seen_a, "the same offset of another partition must be delivered"


async def test_resync_beyond_the_replay_window(server, admin, kits, kind):
    topic = unique("resync")
    admin.create_topic(topic, partitions=1)
    admin.publish_batch(topic, [{"data": {"i": i}} for i in range(60)])  # the test server's window is 50 records
    k = kits(kind, api_key=server.key, url=server.url)
    for transport in TRANSPORTS:
        s = await k.subscribe(topic, cursor="0-0", transport=transport)
        await eventually(lambda: len(s.resyncs) == 1, 15, "the resync")
        assert s.resyncs[0].reason == "window_records"
        await s.wait_live()
        # the app reloads a snapshot that already covers the next offset and seeds it
        nxt = int(s.sub.position.split(".")[1])  # the resync's position: the next offset of partition 0
        s.sub.seed([f"0-{nxt}"] if transport == "sse" else {0: nxt})
        await asyncio.to_thread(admin.publish, topic, {"covered": transport})
        await asyncio.to_thread(admin.publish, topic, {"after": transport})
        await eventually(lambda: any((m.data or {}).get("after") == transport for m in s.messages), 15, "live after resync")
        await s.close()
        assert [m.data for m in s.messages] == [{"after": transport}], "the seeded offset was skipped"
    # a new subscription of this client after a seeded snapshot: covered offsets never come
    s = await k.subscribe(topic, from_="earliest")
    await s.wait_live()
    await asyncio.to_thread(admin.publish, topic, {"last": 1})
    await eventually(lambda: any((m.data or {}).get("last") == 1 for m in s.messages), 15, "the last message")
    assert [m.data for m in s.messages] == [{"last": 1}], "everything up to the seeded offsets was skipped"


async def test_iterator_yields_and_raises_the_terminal_error(server, admin, kits, kind):
    topic = unique("iter")
    admin.create_topic(topic, partitions=3)
    admin.publish_batch(topic, [{"data": {"i": i}, "room": f"r{i % 2}"} for i in range(5)])
    k = kits(kind, api_key=server.key, url=server.url)
    got = []
    if kind == "sync":
        def run() -> None:
            with k.client.messages(topic, from_="earliest") as it:
                for m in it:
                    got.append(m)
                    if len(got) == 5:
                        break
        await asyncio.to_thread(run)
    else:
        async with k.client.messages(topic, from_="earliest") as it:
            async for m in it:
                got.append(m)
                if len(got) == 5:
                    break
    assert sorted(m.data["i"] for m in got) == list(range(5))

    missing = unique("missing")
    with pytest.raises(msgmesh.NotFoundError) as ei:
        if kind == "sync":
            await asyncio.to_thread(lambda: next(iter(k.client.messages(missing))))
        else:
            async for _ in k.client.messages(missing):
                pass
    assert ei.value.status == 404 and ei.value.code == "topic_not_found"


async def test_failing_callback_is_reported_and_the_stream_goes_on(server, admin, kits, kind):
    topic = unique("cb")
    admin.create_topic(topic, partitions=1)
    k = kits(kind, api_key=server.key, url=server.url)
    got: list[msgmesh.Message] = []
    errors: list[BaseException] = []

    def on_message(m: msgmesh.Message) -> None:
        got.append(m)
        if m.data == 1:
            raise ValueError("boom in the app")

    s = await k.subscribe(topic, on_message=on_message, on_error=errors.append)
    await s.wait_live()
    for i in range(3):
        await asyncio.to_thread(admin.publish, topic, i)
    await eventually(lambda: len(got) == 3, 15, "3 messages")
    assert [m.data for m in got] == [0, 1, 2]
    assert any(isinstance(e, ValueError) for e in errors)
    assert s.sub.state == "live"


async def test_slow_callback_does_not_stall_reading(server, admin, kits, kind):
    """The position advances while a callback is still busy: reading is not
    on the callback's thread/task."""
    topic = unique("slow")
    admin.create_topic(topic, partitions=1)
    k = kits(kind, api_key=server.key, url=server.url)
    release = asyncio.Event() if kind == "async" else None
    import threading
    gate = threading.Event()
    got: list[msgmesh.Message] = []

    if kind == "async":
        async def on_message(m: msgmesh.Message) -> None:
            got.append(m)
            await release.wait()  # type: ignore[union-attr]
    else:
        def on_message(m: msgmesh.Message) -> None:  # type: ignore[misc]
            got.append(m)
            gate.wait(20)

    s = await k.subscribe(topic, on_message=on_message)
    await s.wait_live()
    await asyncio.to_thread(admin.publish_batch, topic, [{"data": i} for i in range(5)])
    await eventually(lambda: s.sub.position is not None and s.sub.position.endswith(".5"), 15,
                     "the reader to reach the 5th message while the callback is blocked")
    await eventually(lambda: len(got) == 1, 5, "the first callback")
    await asyncio.sleep(0.2)
    assert len(got) == 1  # still blocked in the first one
    if release is not None:
        release.set()
    gate.set()
    await eventually(lambda: len(got) == 5, 15, "the rest")


async def test_two_subscriptions_of_one_client_each_get_everything(server, admin, kits, kind):
    topic = unique("twosubs")
    admin.create_topic(topic, partitions=3)
    k = kits(kind, api_key=server.key, url=server.url)
    a = await k.subscribe(topic, transport="sse")
    b = await k.subscribe(topic, transport="websocket")
    await a.wait_live()
    await b.wait_live()
    await asyncio.to_thread(admin.publish_batch, topic, [{"data": i, "room": f"r{i}"} for i in range(9)])
    await eventually(lambda: len(a.messages) == 9 and len(b.messages) == 9, 15, "9 messages on each")
    assert sorted(m.cursor for m in a.messages) == sorted(m.cursor for m in b.messages)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_deleting_the_topic_fails_the_subscription(server, admin, kits, kind, transport):
    topic = unique("gone")
    admin.create_topic(topic, partitions=1)
    k = kits(kind, api_key=server.key, url=server.url, reconnect={"min_delay": 0.05, "max_delay": 0.2})
    s = await k.subscribe(topic, transport=transport)
    await s.wait_live()
    await asyncio.to_thread(admin.delete_topic, topic)
    await eventually(lambda: s.sub.state == "failed", 20, "state failed")
    assert isinstance(s.sub.error, msgmesh.NotFoundError)
    assert s.sub.error.code in ("topic_deleted", "topic_not_found")
