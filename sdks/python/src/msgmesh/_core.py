"""What the sync and asyncio clients share on an event loop: the
credentials, the streaming HTTP client, the dedupe state, the subscriptions."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import httpx

from ._auth import Auth
from ._rest import USER_AGENT, Urls
from ._subscription import Backoff, Dedupe, SubscriptionCore


def backoff_from(reconnect: Mapping[str, float] | None) -> Backoff:
    r = dict(reconnect or {})
    unknown = set(r) - {"min_delay", "max_delay"}
    if unknown:
        raise ValueError(f"reconnect takes min_delay and max_delay (seconds), not {sorted(unknown)}")
    return Backoff(r.get("min_delay", 0.5), r.get("max_delay", 20.0))


class Core:
    """Lives on one event loop (created lazily inside it)."""

    def __init__(self, urls: Urls, api_key: str | None, get_token: Callable[[], Any] | None,
                 backoff: Backoff) -> None:
        self.urls = urls
        self.auth = Auth(api_key, get_token)
        self.backoff = backoff
        # streams hold their connection for as long as they live: no pool
        # limit, no keep-alive reuse of a stream's connection
        self.stream = httpx.AsyncClient(
            headers={"User-Agent": USER_AGENT},
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=0),
        )
        self.dedupes: dict[tuple[str, str | None], Dedupe] = {}
        self.subs: set[SubscriptionCore] = set()

    def subscription(self, topic: str, room: str | None, cursor: str | None, from_: str | None,
                     transport: str, dispatcher: Any) -> SubscriptionCore:
        dedupe = Dedupe(self.dedupes.setdefault((topic, room), Dedupe()))
        sub = SubscriptionCore(stream=self.stream, auth=self.auth, realtime_url=self.urls.realtime, topic=topic,
                               room=room, cursor=cursor, from_=from_, transport=transport, dedupe=dedupe,
                               backoff=self.backoff, dispatcher=dispatcher)
        self.subs.add(sub)
        sub.start()
        return sub

    async def close_subscription(self, sub: SubscriptionCore) -> None:
        self.subs.discard(sub)
        await sub.close()

    async def aclose(self) -> None:
        for sub in list(self.subs):
            await self.close_subscription(sub)
        await self.stream.aclose()
