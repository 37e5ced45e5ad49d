"""CONTRACT.md behaviour the server branches add (id-only SSE events,
msgmesh-closed / WebSocket closed reasons), checked against a scripted
fake server so they pass before those branches are merged."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets.asyncio.server

import msgmesh
from conftest import eventually

MSG = {"cursor": "0-5", "room": None, "data": {"n": 5}, "headers": [], "published_at": "2026-12-01T10:00:00Z"}


class FakeSSE:
    def __init__(self, script):
        self.script = script  # one list of raw SSE chunks per connection
        self.requests: list[dict[str, str]] = []

    async def start(self) -> str:
        self.srv = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.srv.sockets[0].getsockname()[1]}"

    async def handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        head = (await r.readuntil(b"\r\n\r\n")).decode()
        lines = head.split("\r\n")
        hdrs = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:] if l)}
        hdrs[":path"] = lines[0].split(" ")[1]
        self.requests.append(hdrs)
        n = len(self.requests) - 1
        chunks = self.script[min(n, len(self.script) - 1)]
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                b"Connection: close\r\n\r\n")
        for c in chunks:
            w.write(c.encode())
            await w.drain()
            await asyncio.sleep(0.02)
        w.close()

    def close(self) -> None:
        self.srv.close()


def tokens():
    calls = []

    def get_token() -> dict:
        calls.append(1)
        return {"token": f"tok-{len(calls)}", "expires_at": None}

    return get_token, calls


async def test_sse_id_only_events_and_closed_reasons(kits, kind):
    closed = lambda reason: f'event: msgmesh-closed\ndata: {{"reason":"{reason}","error":"{reason} text"}}\n\n'
    msg = f"id: E.6-0-0\ndata: {json.dumps(MSG)}\n\n"
    fake = FakeSSE([
        ["retry: 100\n\n", "id: E.5-0-0\n\n", ": heartbeat\n\n", closed("token_expired")],
        [msg, msg, closed("shutdown")],  # the same message twice: delivered once
        ["id: E.6-0-0\n\n", closed("topic_deleted")],
    ])
    url = await fake.start()
    try:
        get_token, calls = tokens()
        k = kits(kind, get_token=get_token, url=url, reconnect={"min_delay": 0.05, "max_delay": 0.1})
        s = await k.subscribe("orders")
        await eventually(lambda: s.sub.state == "failed", 10, "state failed")
        await eventually(lambda: s.sub.error in s.errors, 5, "every error through on_error")
        assert [m.cursor for m in s.messages] == ["0-5"]
        err = s.sub.error
        assert isinstance(err, msgmesh.NotFoundError) and err.code == "topic_deleted"
        assert not any(getattr(e, "code", None) == "shutdown" for e in s.errors), "shutdown is not an error"
        r = fake.requests
        assert len(r) == 3
        assert r[0]["authorization"] == "Bearer tok-1" and "last-event-id" not in r[0]
        # token_expired: a new token, resuming from the id-only event's position
        assert r[1]["authorization"] == "Bearer tok-2" and r[1]["last-event-id"] == "E.5-0-0"
        assert r[2]["last-event-id"] == "E.6-0-0"
        assert all("token=" not in x[":path"] for x in r), "credentials never go in the URL"
        assert len(calls) == 2
        assert s.sub.position == "E.6-0-0"
    finally:
        fake.close()


async def test_websocket_closed_frames_and_token_refresh_frame(kits, kind):
    conns: list[dict] = []

    async def handler(ws) -> None:
        info = {"auth": ws.request.headers.get("Authorization"), "frames": []}
        conns.append(info)
        n = len(conns)
        sub = json.loads(await ws.recv())
        info["frames"].append(sub)
        sid = sub["id"]
        if n == 1:
            await ws.send(json.dumps({"type": "subscribed", "id": sid, "position": "E.5-0-0"}))
            await ws.send(json.dumps({"type": "closed", "topic": "orders", "reason": "token_expired", "error": "x"}))
            await asyncio.sleep(0.5)
        elif n == 2:
            await ws.send(json.dumps({"type": "subscribed", "id": sid, "position": "E.5-0-0"}))
            for _ in range(2):
                await ws.send(json.dumps({"type": "message", "id": sid, "position": "E.6-0-0", "message": MSG}))
            await ws.send(json.dumps({"type": "message", "id": "another", "position": "E.9-0-0",
                                      "message": dict(MSG, cursor="0-9")}))  # not this subscription's
            await ws.send(json.dumps({"type": "token-expiring", "expires_at": "2030-01-01T00:00:00Z"}))
            info["frames"].append(json.loads(await ws.recv()))  # the refresh frame
            await ws.send(json.dumps({"type": "refreshed"}))
            await ws.send(json.dumps({"type": "closed", "topic": "orders", "reason": "shutdown", "error": "bye"}))
            await asyncio.sleep(0.5)
        else:
            await ws.send(json.dumps({"type": "closed", "topic": "orders", "reason": "topic_deleted", "error": "gone"}))
            await asyncio.sleep(0.5)

    async with websockets.asyncio.server.serve(handler, "127.0.0.1", 0) as srv:
        port = list(srv.sockets)[0].getsockname()[1]
        get_token, calls = tokens()
        k = kits(kind, get_token=get_token, url=f"http://127.0.0.1:{port}",
                 reconnect={"min_delay": 0.05, "max_delay": 0.1})
        s = await k.subscribe("orders", transport="websocket")
        await eventually(lambda: s.sub.state == "failed", 10, "state failed")
        await eventually(lambda: s.sub.error in s.errors, 5, "every error through on_error")
        assert [m.cursor for m in s.messages] == ["0-5"]
        assert isinstance(s.sub.error, msgmesh.NotFoundError) and s.sub.error.code == "topic_deleted"
        assert conns[0]["auth"] == "Bearer tok-1" and "cursor" not in conns[0]["frames"][0]
        assert conns[1]["auth"] == "Bearer tok-2" and conns[1]["frames"][0]["cursor"] == "E.5-0-0"
        assert conns[1]["frames"][1] == {"type": "refresh", "token": "tok-3"}
        assert conns[2]["frames"][0]["cursor"] == "E.6-0-0"
        assert len(conns) == 3  # shutdown: reconnected


async def test_late_token_for_a_replaced_websocket_is_discarded(kits, kind):
    """token-expiring starts a refresh; the connection is replaced before the
    token arrives: the token is not sent as a refresh on any connection."""
    conns: list[dict] = []

    async def handler(ws) -> None:
        info = {"auth": ws.request.headers.get("Authorization"), "frames": []}
        conns.append(info)
        sub = json.loads(await ws.recv())
        await ws.send(json.dumps({"type": "subscribed", "id": sub["id"], "position": "E.0-0"}))
        if len(conns) == 1:
            await ws.send(json.dumps({"type": "token-expiring", "expires_at": "2030-01-01T00:00:00Z"}))
            await asyncio.sleep(0.1)
            await ws.close(1001, "going away")  # replaced while the refresh is still running
            return
        try:
            async for raw in ws:
                info["frames"].append(json.loads(raw))
        except websockets.exceptions.ConnectionClosed:
            pass

    calls = []

    async def get_token() -> str:
        calls.append(1)
        if len(calls) == 2:
            await asyncio.sleep(1.0)  # the refresh is slow
        return f"tok-{len(calls)}"

    import websockets.exceptions
    async with websockets.asyncio.server.serve(handler, "127.0.0.1", 0) as srv:
        port = list(srv.sockets)[0].getsockname()[1]
        gt = get_token if kind == "async" else (lambda: asyncio.run(get_token()))
        k = kits(kind, get_token=gt, url=f"http://127.0.0.1:{port}", reconnect={"min_delay": 0.05, "max_delay": 0.1})
        s = await k.subscribe("orders", transport="websocket")
        await eventually(lambda: len(conns) == 2 and s.sub.state == "live", 10, "the second connection live")
        await asyncio.sleep(1.5)  # the slow token has arrived by now
        assert conns[1]["frames"] == [], "nothing but the subscribe on the new connection"
        assert conns[0]["auth"] == "Bearer tok-1"
