"""``AsyncMsgMesh``: the asyncio client."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Mapping, Sequence, TypeVar, cast

import httpx

from ._core import Core, backoff_from
from ._dispatch import AsyncDispatcher
from ._errors import ConnectionLostError, MsgMeshError, UnauthorizedError, error_from_response
from ._models import HeadersInput, Message, PublishBatchResult, PublishResult, Resync, Token, Topic
from . import _rest
from ._rest import Call, resolve_urls
from ._subscription import SubscriptionCore

__all__ = ["AsyncMsgMesh", "AsyncSubscription", "AsyncMessageIterator"]

_END = object()
T = TypeVar("T")


class AsyncSubscription:
    """A live subscription (asyncio). ``state`` is ``connecting``, ``live``,
    ``reconnecting``, ``failed`` or ``closed``; ``position`` the resume
    position; ``error`` the terminal error once ``failed``."""

    def __init__(self, client: "AsyncMsgMesh", core: SubscriptionCore) -> None:
        self._client = client
        self._core = core

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
        """Mark ``cursors`` as delivered (e.g. from the snapshot you loaded
        after a resync): those offsets and older ones of their partitions are
        skipped."""
        self._core.dedupe.seed(cursors)

    async def wait_live(self, timeout: float | None = None) -> None:
        """Until the subscription is live; raises its error if it failed."""
        await self._core.wait_live(timeout)

    async def close(self) -> None:
        core = self._client._core
        if core is not None:
            await core.close_subscription(self._core)
        else:
            await self._core.close()

    async def __aenter__(self) -> "AsyncSubscription":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class AsyncMessageIterator:
    """``async for message in client.messages(...)``. Raises the
    subscription's terminal error; ``aclose()`` (or leaving ``async with``)
    ends it."""

    LIMIT = 256

    def __init__(self, client: "AsyncMsgMesh", kwargs: dict[str, Any]) -> None:
        self._client = client
        self._kwargs = kwargs
        self._q: asyncio.Queue[Any] = asyncio.Queue()
        self._space = asyncio.Event()
        self._space.set()
        self._sub: AsyncSubscription | None = None
        self._closed = False

    async def _on_message(self, m: Message) -> None:
        self._q.put_nowait(m)
        if self._q.qsize() >= self.LIMIT:
            self._space.clear()
            while not self._space.is_set() and not self._closed:
                try:
                    await asyncio.wait_for(self._space.wait(), 0.5)
                except asyncio.TimeoutError:
                    pass

    def _on_end(self, err: BaseException | None) -> None:
        self._q.put_nowait((_END, err))

    def __aiter__(self) -> "AsyncMessageIterator":
        return self

    async def __anext__(self) -> Message:
        if self._closed:
            raise StopAsyncIteration
        if self._sub is None:
            self._sub = await self._client._subscribe(on_message=self._on_message, on_end=self._on_end, **self._kwargs)
        item = await self._q.get()
        if self._q.qsize() < self.LIMIT:
            self._space.set()
        if isinstance(item, tuple) and item and item[0] is _END:
            self._closed = True
            await self.aclose()
            if item[1] is not None:
                raise item[1]
            raise StopAsyncIteration
        return cast(Message, item)

    @property
    def subscription(self) -> AsyncSubscription | None:
        return self._sub

    async def aclose(self) -> None:
        self._closed = True
        self._space.set()
        if self._sub is not None:
            await self._sub.close()

    async def __aenter__(self) -> "AsyncMessageIterator":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class AsyncMsgMesh:
    """The asyncio client. Give ``api_key=`` (server side) or ``get_token=``
    (a callable, plain or ``async``, returning a token string, a
    :class:`Token` or ``{"token", "expires_at"}``).

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
        self._timeout = timeout
        self._http: httpx.AsyncClient | None = None
        self._core: Core | None = None
        self._batches: dict[tuple[str, str, str], str] = {}
        self._closed = False

    # ---- plumbing --------------------------------------------------------

    def _ensure(self) -> Core:
        if self._closed:
            raise MsgMeshError("the client is closed", code="closed")
        if self._core is None:
            self._core = Core(self._urls, self._api_key, self._get_token, self._backoff)
            self._http = httpx.AsyncClient(timeout=self._timeout, headers={"User-Agent": _rest.USER_AGENT})
        return self._core

    async def _send(self, call: Call[T]) -> T:
        core = self._ensure()
        assert self._http is not None
        stale: str | None = None
        while True:
            cred = await core.auth.get(stale=stale)
            try:
                r = await self._http.request(
                    call.method, call.url, json=call.json,
                    headers={"Authorization": f"Bearer {cred.value}"},
                    timeout=call.timeout if call.timeout is not None else httpx.USE_CLIENT_DEFAULT,
                )
            except httpx.TransportError as e:
                raise ConnectionLostError(f"{call.method} {call.url}: {type(e).__name__}: {e}", code="network_error") from e
            if r.status_code >= 300:
                err = error_from_response(r.status_code, r.content, r.headers)
                if (isinstance(err, UnauthorizedError) and err.code == "token_expired"
                        and core.auth.uses_tokens and stale is None):
                    stale = cred.value  # renewed once (nothing was done with a refused credential)
                    continue
                raise err
            if not call.expect_body or not r.content:
                return None  # type: ignore[return-value]
            return call.parse(r.json())

    # ---- topics ----------------------------------------------------------

    async def create_topic(self, name: str, partitions: int | None = None) -> Topic:
        return await self._send(_rest.create_topic(self._urls, name, partitions))

    async def delete_topic(self, name: str) -> None:
        await self._send(_rest.delete_topic(self._urls, name))

    async def get_topic(self, name: str) -> Topic:
        return await self._send(_rest.get_topic(self._urls, name))

    async def list_topics(self) -> list[Topic]:
        return await self._send(_rest.list_topics(self._urls))

    # ---- publish ---------------------------------------------------------

    async def publish(self, topic: str, data: Any, room: str | None = None,
                      headers: HeadersInput | None = None) -> PublishResult:
        """One message, answered after Kafka acknowledged it."""
        return await self._send(_rest.publish(self._urls, topic, data, room, headers))

    async def publish_batch(self, topic: str, messages: Sequence[Mapping[str, Any]]) -> PublishBatchResult:
        """``[{"data", "room"?, "headers"?}, ...]``; cursors in request order."""
        return await self._send(_rest.publish_batch(self._urls, topic, messages))

    # ---- poll ------------------------------------------------------------

    async def poll(self, topic: str, group: str, consumer: str | None = None, max: int | None = None,
                   wait_ms: int | None = None, *, max_bytes: int | None = None) -> list[Message]:
        """A batch of the consumer group. The previous batch of this (topic,
        group, consumer) is acknowledged by this call (``ack``); until then it
        is delivered again."""
        key = _rest.poll_key(topic, group, consumer)
        doc = await self._send(_rest.poll(self._urls, topic, group, consumer, max, wait_ms, max_bytes,
                                          self._batches.get(key)))
        batch = doc.get("batch")
        if isinstance(batch, str) and batch:
            self._batches[key] = batch
        else:
            self._batches.pop(key, None)
        return _rest.poll_messages(doc)

    async def commit(self, topic: str, group: str, cursors: Sequence[str] | Sequence[Message],
                     consumer: str | None = None) -> None:
        """Acknowledge ``cursors`` (or messages) now, before the next poll."""
        cs = [c.cursor if isinstance(c, Message) else c for c in cursors]
        await self._send(_rest.commit(self._urls, topic, group, consumer, cs))

    # ---- tokens ----------------------------------------------------------

    async def mint_token(self, ttl_seconds: int | None = None,
                         capabilities: Sequence[Mapping[str, Any]] | None = None) -> Token:
        """A short-lived, downscoped token (needs a key with ``tokens.mint``)."""
        return await self._send(_rest.mint_token(self._urls, ttl_seconds, capabilities))

    # ---- subscribe -------------------------------------------------------

    async def subscribe(self, topic: str, room: str | None = None, cursor: str | None = None,
                        from_: str | None = None, transport: str = "sse", *,
                        on_message: Callable[[Message], Any],
                        on_resync: Callable[[Resync], Any] | None = None,
                        on_error: Callable[[BaseException], Any] | None = None,
                        on_state_change: Callable[[str], Any] | None = None) -> AsyncSubscription:
        """Receive ``topic`` (or one ``room``) live over SSE (default) or
        ``transport="websocket"``, from ``cursor`` (a position or message
        cursors) or ``from_`` (``"latest"``, ``"earliest"``). Callbacks may be
        plain functions or coroutines; they run in a task of their own."""
        return await self._subscribe(topic=topic, room=room, cursor=cursor, from_=from_, transport=transport,
                                     on_message=on_message, on_resync=on_resync, on_error=on_error,
                                     on_state_change=on_state_change)

    async def _subscribe(self, *, topic: str, room: str | None = None, cursor: str | None = None,
                         from_: str | None = None, transport: str = "sse", on_message: Callable[[Message], Any],
                         on_resync: Any = None, on_error: Any = None, on_state_change: Any = None,
                         on_end: Any = None) -> AsyncSubscription:
        core = self._ensure()
        disp = AsyncDispatcher(on_message, on_resync, on_error, on_state_change, on_end)
        try:
            sub = core.subscription(topic, room, cursor, from_, transport, disp)
        except BaseException:
            await disp.aclose()
            raise
        return AsyncSubscription(self, sub)

    def messages(self, topic: str, room: str | None = None, cursor: str | None = None, from_: str | None = None,
                 transport: str = "sse", *, on_resync: Callable[[Resync], Any] | None = None,
                 on_error: Callable[[BaseException], Any] | None = None) -> AsyncMessageIterator:
        """``async for m in client.messages("orders"):`` the same stream as
        :meth:`subscribe`; the terminal error is raised from the loop."""
        return AsyncMessageIterator(self, dict(topic=topic, room=room, cursor=cursor, from_=from_,
                                               transport=transport, on_resync=on_resync, on_error=on_error))

    # ---- lifecycle -------------------------------------------------------

    async def close(self) -> None:
        """Close every subscription and connection of this client."""
        if self._closed:
            return
        self._closed = True
        if self._core is not None:
            await self._core.aclose()
        if self._http is not None:
            await self._http.aclose()

    aclose = close

    async def __aenter__(self) -> "AsyncMsgMesh":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
