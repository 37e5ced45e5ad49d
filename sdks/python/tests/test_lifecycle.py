"""Closing leaves nothing behind: no thread, task or connection."""

from __future__ import annotations

import asyncio
import threading

import msgmesh
from conftest import eventually, unique


async def test_sync_clients_closed_leave_no_thread(server, admin):
    topic = unique("life")
    admin.create_topic(topic, partitions=1)
    await asyncio.to_thread(lambda: None)  # the test loop's own worker thread
    baseline = threading.active_count()

    def churn() -> None:
        for i in range(30):
            with msgmesh.MsgMesh(api_key=server.key, url=server.url) as c:
                s = c.subscribe(topic, transport="sse" if i % 2 else "websocket", on_message=lambda m: None)
                s.wait_live(10)
                # an iterator left open is closed by the client too
                c.messages(topic)

    await asyncio.to_thread(churn)
    await eventually(lambda: threading.active_count() <= baseline, 10,
                     f"threads back to {baseline} (now {threading.active_count()})")


async def test_async_clients_closed_leave_no_task(server, admin):
    topic = unique("life")
    admin.create_topic(topic, partitions=1)
    baseline = len(asyncio.all_tasks())
    for i in range(30):
        async with msgmesh.AsyncMsgMesh(api_key=server.key, url=server.url) as c:
            s = await c.subscribe(topic, transport="sse" if i % 2 else "websocket", on_message=lambda m: None)
            await s.wait_live(10)
    await asyncio.sleep(0.1)
    assert len(asyncio.all_tasks()) <= baseline


async def test_close_from_inside_a_callback(server, admin, kits, kind):
    topic = unique("selfclose")
    admin.create_topic(topic, partitions=1)
    k = kits(kind, api_key=server.key, url=server.url)
    holder: dict = {}
    got = []

    if kind == "async":
        async def on_message(m):
            got.append(m)
            await holder["s"].close()
    else:
        def on_message(m):  # type: ignore[misc]
            got.append(m)
            holder["s"].close()

    s = await k.subscribe(topic, on_message=on_message)
    holder["s"] = s.sub
    await s.wait_live()
    await asyncio.to_thread(admin.publish_batch, topic, [{"data": 1}, {"data": 2}])
    await eventually(lambda: s.sub.state == "closed", 10, "closed from its own callback")
    assert len(got) >= 1
