"""``MsgMesh``: the sync client.

Request/response calls use ``httpx.Client`` on the calling thread.
Subscriptions run their connection loop on one event loop thread per
client (``msgmesh-loop``), the same code as the asyncio client, and call
your callbacks on a thread of their own per subscription: a slow callback
never stalls reading, and a failure in the background is retried on the
backoff schedule or reported to ``on_error`` (and raised from
``messages()``), never lost.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from typing import Any, Callable, Coroutine, Mapping, Sequence, TypeVar, cast

import httpx

from . import _rest
from ._core import Core, backoff_from
from ._dispatch import ThreadDispatcher
from ._errors import ConnectionLostError, MsgMeshError, UnauthorizedError, error_from_response
from ._models import HeadersInput, Message, PublishBatchResult, PublishResult, Resync, Token, Topic
from ._rest import Call, resolve_urls
from ._subscription import SubscriptionCore

__all__ = ["MsgMesh", "Subscription", "MessageIterator"]

T = TypeVar("T")
_END = object()


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._main, name="msgmesh-loop", daemon=True)
        self.thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("a sync MsgMesh call from inside its own event loop thread")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            if fut.done():
                raise  # the coroutine's own TimeoutError
            fut.cancel()
            raise TimeoutError(f"no answer within {timeout}s") from None

    def stop(self) -> None:
        if not self.loop.is_closed():
            try:  # worker threads of get_token calls
                self.run(self.loop.shutdown_default_executor(), timeout=10)
            except Exception:
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
            if not self.thread.is_alive():
                self.loop.close()


class Subscription:
    """A live subscription (sync). ``state`` is ``connecting``, ``live``,
    ``reconnecting``, ``failed`` or ``closed``; ``position`` the resume
    position; ``error`` the terminal error once ``failed``."""

    def __init__(self, client: "MsgMesh", core: SubscriptionCore, dispatcher: ThreadDispatcher) -> None:
        self._client = client
        self._core = core
        self._disp = dispatcher

    @property
    def state(self) -> str:
        return self._core.state

    @property
    def position(self) -> str | None:
        return self._core.position

    @property
    def error(self) -> BaseException | None:
        return self._core.error

    @property
    def topic(self) -> str:
        return self._core.topic

    def seed(self, cursors: Sequence[str]) -> None:
        """Mark ``cursors`` as delivered (e.g. from a snapshot after a resync)."""
        self._core.dedupe.seed(cursors)

    def wait_live(self, timeout: float | None = None) -> None:
        """Until the subscription is live; raises its error if it failed."""
        self._client._loop_thread().run(self._core.wait_live(timeout))

    def close(self) -> None:
        with self._client._lock:
            self._client._subs.discard(self)
        lt = self._client._lt
        if lt is not None and not lt.loop.is_closed() and self._client._core is not None:
            lt.run(self._client._core.close_subscription(self._core), timeout=30)
        self._disp.join()

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class MessageIterator:
    """``for message in client.messages(...)``. Raises the subscription's
    terminal error; ``close()`` (or leaving ``with``) ends it."""

    def __init__(self, client: "MsgMesh", kwargs: dict[str, Any]) -> None:
        self._q: queue.Queue[Any] = queue.Queue(maxsize=256)
        self._closed = threading.Event()
        self._sub = client._subscribe(on_message=self._on_message, on_end=self._on_end, **kwargs)

    def _on_message(self, m: Message) -> None:
        while not self._closed.is_set():
            try:
                self._q.put(m, timeout=0.5)
                return
            except queue.Full:
                continue

    def _on_end(self, err: BaseException | None) -> None:
        while not self._closed.is_set():
            try:
                self._q.put((_END, err), timeout=0.5)
                return
            except queue.Full:
                continue

    @property
    def subscription(self) -> Subscription:
        return self._sub

    def __iter__(self) -> "MessageIterator":
        return self

    def __next__(self) -> Message:
        if self._closed.is_set():
            raise StopIteration
        item = self._q.get()
        if isinstance(item, tuple) and item and item[0] is _END:
            self.close()
            if item[1] is not None:
                raise item[1]
            raise StopIteration
        return cast(Message, item)

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self._sub.close()

    def __enter__(self) -> "MessageIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class MsgMesh:
    """The sync client. Give ``api_key=`` (server side) or ``get_token=`` (a
    callable returning a token string, a :class:`Token` or ``{"token",
    "expires_at"}``; ``async def`` works too).

    ``url`` serves all three services, or give ``control_plane_url``,
    ``gateway_url``, ``realtime_url`` apart. ``reconnect={"min_delay": 0.5,
    "max_delay": 20.0}`` (seconds) sets the subscriptions' backoff.
    ``timeout`` is the HTTP timeout of the request/response calls."""

    def __init__(self, api_key: str | None = None, get_token: Callable[[], Any] | None = None,
                 url: str | None = None, control_plane_url: str | None = None, gateway_url: str | None = None,
                 realtime_url: str | None = None, *, reconnect: Mapping[str, float] | None = None,
                 timeout: float = 30.0) -> None:
        if bool(api_key) == bool(get_token):
            raise ValueError("give api_key= (server side) or get_token= (a callable returning a token), one of them")
        self._urls = resolve_urls(url, control_plane_url, gateway_url, realtime_url)
        self._api_key = api_key
        self._get_token = get_token
        self._backoff = backoff_from(reconnect)
        self._http = httpx.Client(timeout=timeout, headers={"User-Agent": _rest.USER_AGENT})
        self._lt: _LoopThread | None = None
        self._core: Core | None = None
        self._lock = threading.Lock()
        self._batches: dict[tuple[str, str, str], str] = {}
        self._subs: set[Subscription] = set()
        self._closed = False

    # ---- plumbing --------------------------------------------------------

    def _loop_thread(self) -> _LoopThread:
        with self._lock:
            if self._closed:
                raise MsgMeshError("the client is closed", code="closed")
            if self._lt is None:
                lt = _LoopThread()

                async def make() -> Core:
                    return Core(self._urls, self._api_key, self._get_token, self._backoff)

                self._core = lt.run(make())
                self._lt = lt
            return self._lt

    def _credential(self, stale: str | None) -> str:
        if self._api_key:
            return self._api_key
        lt = self._loop_thread()
        assert self._core is not None
        return lt.run(self._core.auth.get(stale=stale)).value

    def _send(self, call: Call[T]) -> T:
        if self._closed:
            raise MsgMeshError("the client is closed", code="closed")
        stale: str | None = None
        while True:
            cred = self._credential(stale)
            try:
                r = self._http.request(
                    call.method, call.url, json=call.json, headers={"Authorization": f"Bearer {cred}"},
                    timeout=call.timeout if call.timeout is not None else httpx.USE_CLIENT_DEFAULT,
                )
            except httpx.TransportError as e:
                raise ConnectionLostError(f"{call.method} {call.url}: {type(e).__name__}: {e}", code="network_error") from e
            if r.status_code >= 300:
                err = error_from_response(r.status_code, r.content, r.headers)
                if isinstance(err, UnauthorizedError) and err.code == "token_expired" and self._get_token and stale is None:
                    stale = cred  # renewed once (nothing was done with a refused credential)
                    continue
                raise err
            if not call.expect_body or not r.content:
                return None  # type: ignore[return-value]
            return call.parse(r.json())

    # ---- topics ----------------------------------------------------------

    def create_topic(self, name: str, partitions: int | None = None) -> Topic:
        return self._send(_rest.create_topic(self._urls, name, partitions))

    def delete_topic(self, name: str) -> None:
        self._send(_rest.delete_topic(self._urls, name))

    def get_topic(self, name: str) -> Topic:
        return self._send(_rest.get_topic(self._urls, name))

    def list_topics(self) -> list[Topic]:
        return self._send(_rest.list_topics(self._urls))

    # ---- publish ---------------------------------------------------------

    def publish(self, topic: str, data: Any, room: str | None = None,
                headers: HeadersInput | None = None) -> PublishResult:
        """One message, answered after Kafka acknowledged it."""
        return self._send(_rest.publish(self._urls, topic, data, room, headers))

    def publish_batch(self, topic: str, messages: Sequence[Mapping[str, Any]]) -> PublishBatchResult:
        """``[{"data", "room"?, "headers"?}, ...]``; cursors in request order."""
        return self._send(_rest.publish_batch(self._urls, topic, messages))

    # ---- poll ------------------------------------------------------------

    def poll(self, topic: str, group: str, consumer: str | None = None, max: int | None = None,
             wait_ms: int | None = None, *, max_bytes: int | None = None) -> list[Message]:
        """A batch of the consumer group. The previous batch of this (topic,
        group, consumer) is acknowledged by this call (``ack``); until then it
        is delivered again."""
        key = _rest.poll_key(topic, group, consumer)
        with self._lock:
            ack = self._batches.get(key)
        doc = self._send(_rest.poll(self._urls, topic, group, consumer, max, wait_ms, max_bytes, ack))
        batch = doc.get("batch")
        with self._lock:
            if isinstance(batch, str) and batch:
                self._batches[key] = batch
            else:
                self._batches.pop(key, None)
        return _rest.poll_messages(doc)

    def commit(self, topic: str, group: str, cursors: Sequence[str] | Sequence[Message],
               consumer: str | None = None) -> None:
        """Acknowledge ``cursors`` (or messages) now, before the next poll."""
        cs = [c.cursor if isinstance(c, Message) else c for c in cursors]
        self._send(_rest.commit(self._urls, topic, group, consumer, cs))

    # ---- tokens ----------------------------------------------------------

    def mint_token(self, ttl_seconds: int | None = None,
                   capabilities: Sequence[Mapping[str, Any]] | None = None) -> Token:
        """A short-lived, downscoped token (needs a key with ``tokens.mint``)."""
        return self._send(_rest.mint_token(self._urls, ttl_seconds, capabilities))

    # ---- subscribe -------------------------------------------------------

    def subscribe(self, topic: str, room: str | None = None, cursor: str | None = None, from_: str | None = None,
                  transport: str = "sse", *, on_message: Callable[[Message], Any],
                  on_resync: Callable[[Resync], Any] | None = None,
                  on_error: Callable[[BaseException], Any] | None = None,
                  on_state_change: Callable[[str], Any] | None = None) -> Subscription:
        """Receive ``topic`` (or one ``room``) live over SSE (default) or
        ``transport="websocket"``, from ``cursor`` (a position or message
        cursors) or ``from_`` (``"latest"``, ``"earliest"``). Callbacks run on
        a thread of their own, in order."""
        return self._subscribe(topic=topic, room=room, cursor=cursor, from_=from_, transport=transport,
                               on_message=on_message, on_resync=on_resync, on_error=on_error,
                               on_state_change=on_state_change)

    def _subscribe(self, *, topic: str, room: str | None = None, cursor: str | None = None,
                   from_: str | None = None, transport: str = "sse", on_message: Callable[[Message], Any],
                   on_resync: Any = None, on_error: Any = None, on_state_change: Any = None,
                   on_end: Any = None) -> Subscription:
        lt = self._loop_thread()
        core = self._core
        assert core is not None
        disp = ThreadDispatcher(on_message, on_resync, on_error, on_state_change, on_end)

        async def start() -> SubscriptionCore:
            return core.subscription(topic, room, cursor, from_, transport, disp)

        try:
            sc = lt.run(start())
        except BaseException:
            disp._q.put_nowait(("_stop", None))
            raise
        sub = Subscription(self, sc, disp)
        with self._lock:
            self._subs.add(sub)
        return sub

    def messages(self, topic: str, room: str | None = None, cursor: str | None = None, from_: str | None = None,
                 transport: str = "sse", *, on_resync: Callable[[Resync], Any] | None = None,
                 on_error: Callable[[BaseException], Any] | None = None) -> MessageIterator:
        """``for m in client.messages("orders"):`` the same stream as
        :meth:`subscribe`; the terminal error is raised from the loop."""
        return MessageIterator(self, dict(topic=topic, room=room, cursor=cursor, from_=from_, transport=transport,
                                          on_resync=on_resync, on_error=on_error))

    # ---- lifecycle -------------------------------------------------------

    def close(self) -> None:
        """Close every subscription and connection of this client."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            subs = list(self._subs)
            self._subs.clear()
        lt, core = self._lt, self._core
        if lt is not None and core is not None:
            try:
                lt.run(core.aclose(), timeout=30)
            finally:
                for s in subs:
                    s._disp.join()
                lt.stop()
        self._http.close()

    def __enter__(self) -> "MsgMesh":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
