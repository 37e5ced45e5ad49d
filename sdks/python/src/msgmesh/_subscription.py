"""One subscription's connection loop (SSE or WebSocket), on an event loop.

The asyncio client runs it on the caller's loop; the sync client on a loop
thread of its own. Semantics (shared with the JavaScript SDK,
``sdks/SEMANTICS.md``):

* one connection at a time: the next one is opened only after the previous
  one is closed, and nothing of a replaced connection is delivered;
* resume from the last position received (SSE event id, also of id-only
  events; WebSocket ``position``), on any node;
* dedupe per partition: an offset not above the highest delivered for its
  partition is skipped (across reconnects, transports and resubscribes of
  the same client, topic and room); a new topic epoch starts over;
* reconnect with full-jitter backoff (``uniform(min, min(max, min * 2**n))``,
  0.5 s and 20 s by default), reset after a healthy connection (one that
  stayed live ``HEALTHY_AFTER`` seconds);
* 401 and 404 (and 400/409/413/422) are terminal: state ``failed``; 403,
  429, 5xx and lost connections are retried; every failure is reported to
  ``on_error``.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any
from urllib.parse import quote

import httpx
import httpx_sse
import websockets
import websockets.asyncio.client
import websockets.exceptions
import websockets.protocol

from ._auth import Auth, Credential
from ._errors import (
    ConflictError,
    ConnectionLostError,
    ForbiddenError,
    InvalidRequestError,
    MsgMeshError,
    NotFoundError,
    PayloadTooLargeError,
    UnauthorizedError,
    error_from_code,
    error_from_response,
)
from ._models import Message, Resync, split_cursor

STATES = ("connecting", "live", "reconnecting", "failed", "closed")
HEALTHY_AFTER = 5.0
IDLE_TIMEOUT = 45.0  # 3 heartbeats (realtime.heartbeat, 15 s): a silent connection is dead
WS_MAX_SIZE = 16 * 1024 * 1024

_TERMINAL = (UnauthorizedError, NotFoundError, InvalidRequestError, ConflictError, PayloadTooLargeError)


class Backoff:
    """Full jitter, as the JavaScript SDK: attempt n waits
    ``uniform(min_delay, min(max_delay, min_delay * 2**n))``."""

    def __init__(self, min_delay: float = 0.5, max_delay: float = 20.0) -> None:
        if min_delay <= 0 or max_delay < min_delay:
            raise ValueError("want 0 < min_delay <= max_delay")
        self.min_delay = float(min_delay)
        self.max_delay = float(max_delay)

    def ceiling(self, attempt: int) -> float:
        return min(self.max_delay, self.min_delay * float(2 ** min(attempt, 40)))

    def delay(self, attempt: int) -> float:
        return float(random.uniform(self.min_delay, self.ceiling(attempt)))


class Dedupe:
    """The highest offset delivered per partition. Each subscription has its
    own, started from its client's memory of the same (topic, room) (so a
    resubscribe skips what an earlier subscription delivered) and writing
    back into it; two subscriptions running at once do not hide messages
    from each other."""

    def __init__(self, memory: "Dedupe | None" = None) -> None:
        self.memory = memory
        self.highest: dict[int, int] = dict(memory.highest) if memory else {}
        self.epoch: str | None = memory.epoch if memory else None

    def admit(self, m: Message) -> bool:
        h = self.highest.get(m.partition)
        if h is not None and m.offset <= h:
            return False
        self.highest[m.partition] = m.offset
        mem = self.memory
        if mem is not None and mem.epoch == self.epoch and m.offset > mem.highest.get(m.partition, -1):
            mem.highest[m.partition] = m.offset
        return True

    def seed(self, cursors: Any) -> None:
        """Cursors ``"p-o"``, or a mapping ``{partition: highest offset}``."""
        pairs = ([(int(p), int(o)) for p, o in cursors.items()] if isinstance(cursors, dict)
                 else [split_cursor(c) for c in cursors])
        for p, o in pairs:
            if o > self.highest.get(p, -1):
                self.highest[p] = o
        if self.memory is not None:
            self.memory.seed(cursors)

    def observe_epoch(self, position: str) -> None:
        epoch = position.split(".", 1)[0] if "." in position else None
        if not epoch:
            return
        if self.epoch is not None and epoch != self.epoch:
            self.highest.clear()  # the topic was made again: offsets start over
        self.epoch = epoch
        mem = self.memory
        if mem is not None and mem.epoch != epoch:
            mem.highest.clear()
            mem.epoch = epoch

    def reset(self) -> None:
        self.highest.clear()
        if self.memory is not None:
            self.memory.highest.clear()


class _Reconnect(Exception):
    """Control flow: end this connection and open the next one."""

    def __init__(self, error: BaseException | None = None, *, immediate: bool = False, refresh: bool = False,
                 planned: bool = False) -> None:
        super().__init__("reconnect")
        self.error = error
        self.immediate = immediate
        self.refresh = refresh
        self.planned = planned  # our own token refresh (SSE), not a failure


def _lost(e: BaseException) -> BaseException:
    if isinstance(e, (httpx.TransportError, httpx_sse.SSEError, OSError, asyncio.TimeoutError,
                      websockets.exceptions.WebSocketException, json.JSONDecodeError)):
        err = ConnectionLostError(f"connection lost: {type(e).__name__}: {e}".rstrip(": "), code="network_error")
        err.__cause__ = e
        return err
    return e


def ws_url(base: str) -> str:
    if base.startswith("https://"):
        return "wss://" + base[len("https://"):]
    if base.startswith("http://"):
        return "ws://" + base[len("http://"):]
    return base


def closed_reason(reason: str | None, text: str | None) -> BaseException:
    """An SSE ``msgmesh-closed`` event or a WebSocket ``closed`` frame."""
    if reason == "topic_deleted":
        return NotFoundError(text or "the topic was deleted", status=404, code="topic_deleted")
    if reason == "token_expired":
        return _Reconnect(None, immediate=True, refresh=True)
    if reason == "shutdown":
        return _Reconnect(None)  # a node going away: reconnect with backoff, nothing to report
    return _Reconnect(ConnectionLostError(text or f"the server ended the stream ({reason})", code=reason or "closed"))


class SubscriptionCore:
    def __init__(self, *, stream: httpx.AsyncClient, auth: Auth, realtime_url: str, topic: str,
                 room: str | None, cursor: str | None, from_: str | None, transport: str,
                 dedupe: Dedupe, backoff: Backoff, dispatcher: Any) -> None:
        if transport not in ("sse", "websocket"):
            raise ValueError('transport must be "sse" or "websocket"')
        if from_ not in (None, "latest", "earliest"):
            raise ValueError('from_ must be "latest" or "earliest"')
        self.topic, self.room, self.transport = topic, room, transport
        self._cursor, self._from = cursor, from_
        self._stream, self._auth, self._realtime = stream, auth, realtime_url.rstrip("/")
        self.dedupe, self._backoff, self._disp = dedupe, backoff, dispatcher
        self.state = "connecting"
        self.position: str | None = None
        self.error: BaseException | None = None
        self.attempts = 0  # connections opened
        self.last_delay: float | None = None
        self._gen = 0
        self._cred_value = ""
        self._live_at: float | None = None
        self._delivered = 0
        self._live = asyncio.Event()
        self._done = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ---- lifecycle -------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"msgmesh-subscription-{self.topic}")

    async def close(self) -> None:
        if self.state in ("closed",):
            return
        failed = self.state == "failed"
        task = self._task
        if task is not None:
            # cancel until it ends: on Python 3.10 a cancellation that lands
            # inside httpx's stream reading can be swallowed (anyio)
            while not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=1.0)
            if not task.cancelled():
                task.exception()  # retrieved: _run reports its own failures
        if not failed:
            await self._set_state("closed")
            await self._disp.put("end", None)
        self.state = "closed"
        self._done.set()
        self._live.clear()
        await self._disp.aclose()

    async def wait_live(self, timeout: float | None = None) -> None:
        waiter = asyncio.ensure_future(self._live.wait())
        done = asyncio.ensure_future(self._done.wait())
        try:
            finished, _ = await asyncio.wait({waiter, done}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            done.cancel()
        if self._live.is_set() or waiter in finished:
            return
        if self.error is not None:
            raise self.error
        if self._done.is_set():
            raise MsgMeshError("the subscription is closed", code="closed")
        raise TimeoutError(f"the subscription was not live within {timeout}s (state {self.state})")

    async def _set_state(self, state: str) -> None:
        if state == self.state:
            return
        self.state = state
        if state == "live":
            self._live.set()
        else:
            self._live.clear()
        await self._disp.put("state", state)

    async def _set_live(self) -> None:
        self._live_at = time.monotonic()
        await self._set_state("live")

    async def _fail(self, err: BaseException) -> None:
        self.error = err
        await self._set_state("failed")
        await self._disp.put("error", err)
        await self._disp.put("end", err)
        self._done.set()

    # ---- the loop --------------------------------------------------------

    async def _run(self) -> None:
        attempt = 0
        immediate_streak = 0
        stale: str | None = None  # a token the server called expired: renew it (unless another already did)
        try:
            while True:
                err: BaseException | None = None
                immediate = planned = False
                self._gen += 1
                self._live_at = None
                self._delivered = 0
                cred: Credential | None = None
                renewed = stale is not None
                try:
                    cred = await self._auth.get(stale=stale)
                    stale = None
                    self.attempts += 1
                    if self.transport == "sse":
                        await self._run_sse(cred)
                    else:
                        await self._run_ws(cred)
                    err = ConnectionLostError("the stream ended", code="stream_ended")
                except _Reconnect as r:
                    err, immediate, planned = r.error, r.immediate, r.planned
                    if r.refresh and cred is not None:
                        stale = cred.value
                except asyncio.CancelledError:
                    raise
                except MsgMeshError as e:
                    if (isinstance(e, UnauthorizedError) and e.code == "token_expired" and cred is not None
                            and self._auth.uses_tokens and not renewed):
                        # the cached token ran out before we refreshed it: one quiet retry with a new one
                        stale, immediate = cred.value, True
                    elif isinstance(e, _TERMINAL):
                        await self._fail(e)
                        return
                    else:
                        err = e
                except Exception as e:
                    err = _lost(e)
                healthy = self._live_at is not None and time.monotonic() - self._live_at >= HEALTHY_AFTER
                if healthy:
                    attempt = 0
                    immediate_streak = 0
                if immediate and not planned:
                    immediate_streak += 1
                    if immediate_streak > 1:
                        immediate = False  # one immediate retry per healthy connection, then back off
                if err is not None:
                    await self._disp.put("error", err)
                await self._set_state("reconnecting")
                if not immediate:
                    delay = self._backoff.delay(attempt)
                    attempt += 1
                    retry_after = getattr(err, "retry_after", None)
                    if retry_after:
                        delay = max(delay, min(float(retry_after), 300.0))
                    self.last_delay = delay
                    await asyncio.sleep(delay)
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # a bug in the SDK: surfaced, never a silent death
            await self._fail(e)

    def _observe(self, position: str | None) -> None:
        if position:
            self.dedupe.observe_epoch(position)
            self.position = position

    async def _deliver(self, doc: Any) -> None:
        m = Message.from_json(doc)
        if self.dedupe.admit(m):
            self._delivered += 1
            await self._disp.put("message", m)

    # ---- SSE -------------------------------------------------------------

    async def _run_sse(self, cred: Credential) -> None:
        url = f"{self._realtime}/v1/topics/{quote(self.topic, safe='')}/events"
        params: dict[str, str] = {}
        headers = {"Authorization": f"Bearer {cred.value}", "Cache-Control": "no-cache"}
        if self.room is not None:
            params["room"] = self.room
        if self.position:
            headers["Last-Event-ID"] = self.position
        elif self._cursor:
            params["cursor"] = self._cursor
        elif self._from:
            params["from"] = self._from
        refresh_at = cred.refresh_at() if self._auth.uses_tokens else None
        read_timeout = IDLE_TIMEOUT
        if refresh_at is not None:
            read_timeout = max(0.05, min(read_timeout, refresh_at - time.time()))
        timeout = httpx.Timeout(10.0, read=read_timeout)
        async with httpx_sse.aconnect_sse(self._stream, "GET", url, params=params, headers=headers, timeout=timeout) as es:
            r = es.response
            if r.status_code != 200:
                raise error_from_response(r.status_code, await r.aread(), r.headers)
            await self._set_live()
            try:
                async for ev in es.aiter_sse():
                    await self._on_sse(ev)
                    if refresh_at is not None and time.time() >= refresh_at:
                        raise _Reconnect(None, immediate=True, refresh=True, planned=True)
            except httpx.ReadTimeout as e:
                if refresh_at is not None and time.time() >= refresh_at - 0.05:
                    raise _Reconnect(None, immediate=True, refresh=True, planned=True) from e
                raise ConnectionLostError(f"nothing received for {read_timeout:.0f}s, not even a heartbeat",
                                          code="idle_timeout") from e

    async def _on_sse(self, ev: httpx_sse.ServerSentEvent) -> None:
        kind = ev.event or "message"
        if kind == "message":
            if ev.data == "":
                self._observe(ev.id)  # an id-only event (or a heartbeat): a position update
                return
            self._observe(ev.id)
            await self._deliver(json.loads(ev.data))
        elif kind == "msgmesh-resync":
            doc = json.loads(ev.data) if ev.data else {}
            if doc.get("reason") == "epoch":
                self.dedupe.reset()
            self._observe(ev.id or doc.get("position"))
            await self._disp.put("resync", Resync(str(doc.get("reason") or ""), self.position))
        elif kind == "msgmesh-closed":
            doc = json.loads(ev.data) if ev.data else {}
            self._observe(ev.id)
            raise closed_reason(doc.get("reason"), doc.get("error"))
        else:
            self._observe(ev.id)

    # ---- WebSocket -------------------------------------------------------

    async def _run_ws(self, cred: Credential) -> None:
        self._cred_value = cred.value
        url = ws_url(self._realtime) + "/v1/ws"
        sid = f"s{self._gen}"
        frame: dict[str, Any] = {"type": "subscribe", "id": sid, "topic": self.topic}
        if self.room is not None:
            frame["room"] = self.room
        if self.position:
            frame["cursor"] = self.position
        elif self._cursor:
            frame["cursor"] = self._cursor
        elif self._from:
            frame["from"] = self._from
        try:
            async with websockets.asyncio.client.connect(
                url, additional_headers={"Authorization": f"Bearer {cred.value}"},
                open_timeout=10, ping_interval=15, ping_timeout=IDLE_TIMEOUT - 15, close_timeout=2,
                max_size=WS_MAX_SIZE, compression=None,
            ) as ws:
                await ws.send(json.dumps(frame))
                refresher: asyncio.Task[None] | None = None
                try:
                    async for raw in ws:
                        if not isinstance(raw, str):
                            continue
                        f = json.loads(raw)
                        if not isinstance(f, dict):
                            continue
                        refresher = await self._on_ws_frame(ws, sid, f, refresher)
                finally:
                    if refresher is not None:
                        refresher.cancel()
                raise ws_close_error(ws.close_code, ws.close_reason)
        except websockets.exceptions.InvalidStatus as e:
            resp = e.response
            raise error_from_response(resp.status_code, bytes(resp.body or b""), resp.headers) from e
        except websockets.exceptions.ConnectionClosed as e:
            rc = e.rcvd
            raise ws_close_error(rc.code if rc else None, rc.reason if rc else None) from e

    async def _on_ws_frame(self, ws: Any, sid: str, f: dict[str, Any], refresher: Any) -> Any:
        t = f.get("type")
        fid = f.get("id")
        if t in ("subscribed", "message", "resync", "unsubscribed") and fid != sid:
            return refresher  # not this subscription's
        if t == "subscribed":
            self._observe(f.get("position"))
            await self._set_live()
        elif t == "message":
            await self._deliver(f["message"])
            self._observe(f.get("position"))
        elif t == "resync":
            if f.get("reason") == "epoch":
                self.dedupe.reset()
            self._observe(f.get("position"))
            await self._disp.put("resync", Resync(str(f.get("reason") or ""), self.position))
        elif t == "unsubscribed":
            reason = f.get("reason")
            if reason == "topic_deleted":
                raise NotFoundError("the topic was deleted", status=404, code="topic_deleted")
            if reason == "forbidden":
                raise ForbiddenError("the refreshed credential may not subscribe to this", status=403, code="forbidden")
            raise ConnectionLostError(f"the server ended the subscription ({reason})", code=str(reason or "unsubscribed"))
        elif t == "error":
            if fid not in (None, sid):
                return refresher
            code = str(f.get("code") or "error")
            if code == "token_expired":
                raise _Reconnect(None, immediate=True, refresh=True)
            err = error_from_code(code, str(f.get("error") or code))
            if fid == sid or self.state != "live":
                raise err
            await self._disp.put("error", err)  # e.g. a refused refresh: the connection goes on
        elif t == "token-expiring":
            if refresher is None or refresher.done():
                refresher = asyncio.get_running_loop().create_task(self._ws_refresh(ws, self._gen, self._cred_value))
        elif t == "closed":
            if f.get("topic") in (None, self.topic):
                raise closed_reason(f.get("reason"), f.get("error"))
        return refresher

    async def _ws_refresh(self, ws: Any, gen: int, current: str) -> None:
        try:
            cred = await self._auth.get(stale=current)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            await self._disp.put("error", e)
            return
        if gen != self._gen or ws.state is not websockets.protocol.State.OPEN:
            return  # the connection was replaced meanwhile: the late token is discarded
        self._cred_value = cred.value
        try:
            await ws.send(json.dumps({"type": "refresh", "token": cred.value}))
        except websockets.exceptions.ConnectionClosed:
            pass


def ws_close_error(code: int | None, reason: str | None) -> BaseException:
    reason = reason or ""
    if code == 4001:
        return _Reconnect(None, immediate=True, refresh=True)
    if code == 4003:
        # revoked or suspended: retried with backoff (a revoked key then gets 401 at the handshake: terminal)
        return ForbiddenError(reason or "credential revoked or tenant suspended", status=403, code=reason or "forbidden")
    if code == 1001:
        return ConnectionLostError("the server is shutting down", code="shutdown")
    if code == 4008:
        return ConnectionLostError("the server closed a slow consumer", code="slow_consumer")
    return ConnectionLostError(f"WebSocket closed ({code} {reason})".replace(" )", ")"), code="websocket_closed")
