"""Credentials: an API key, or tokens from ``get_token`` (cached, refreshed
before expiry, concurrent refreshes sharing one call, late results
discarded)."""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Mapping

from ._errors import MsgMeshError, UnauthorizedError
from ._models import Token, parse_time

GET_TOKEN_TIMEOUT = 30.0


@dataclass(frozen=True)
class Credential:
    value: str
    expires_at: float | None  # time.time() seconds; None = unknown (a key, or a token without exp)
    fetched_at: float
    generation: int

    def refresh_at(self) -> float | None:
        """When to refresh: 30 s before expiry, or half-way for shorter tokens."""
        if self.expires_at is None:
            return None
        life = max(0.0, self.expires_at - self.fetched_at)
        return self.expires_at - min(30.0, life / 2)


def _jwt_exp(token: str) -> float | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        pad = "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + pad))
        exp = claims.get("exp")
        return float(exp) if isinstance(exp, (int, float)) else None
    except (ValueError, TypeError):
        return None


def _expiry(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, (int, float)):
        # seconds or milliseconds since the epoch
        return float(value) / 1000.0 if value > 1e11 else float(value)
    dt = parse_time(value)
    return dt.timestamp() if dt else None


def normalize_token(result: Any) -> tuple[str, float | None]:
    """What ``get_token`` may return: a string, a :class:`Token`, a mapping
    ``{"token", "expires_at"?}`` or an object with those attributes."""
    token: Any
    if isinstance(result, str):
        token, exp = result, None
    elif isinstance(result, Token):
        token, exp = result.token, _expiry(result.expires_at)
    elif isinstance(result, Mapping):
        token = result.get("token")
        exp = _expiry(result.get("expires_at", result.get("expiresAt")))
    else:
        token = getattr(result, "token", None)
        exp = _expiry(getattr(result, "expires_at", None))
    if not isinstance(token, str) or not token:
        raise TypeError(
            "get_token must return a token string, a msgmesh.Token or {'token': ..., 'expires_at': ...}, "
            f"not {type(result).__name__}"
        )
    if exp is None:
        exp = _jwt_exp(token)
    return token, exp


class Auth:
    """Lives on one event loop. ``get()`` returns the credential to send."""

    def __init__(self, api_key: str | None, get_token: Callable[[], Any] | None) -> None:
        if api_key and get_token:
            raise ValueError("give api_key or get_token, not both")
        if not api_key and not get_token:
            raise ValueError("give api_key= (server side) or get_token= (a callable returning a token)")
        self._api_key = api_key
        self._get_token = get_token
        self._cached: Credential | None = None
        self._inflight: asyncio.Future[Credential] | None = None
        self._generation = 0
        self.calls = 0  # get_token calls so far

    @property
    def uses_tokens(self) -> bool:
        return self._get_token is not None

    async def get(self, *, force: bool = False, stale: str | None = None) -> Credential:
        """The cached credential, or a fresh one when none is cached, it is
        due for refresh, it is ``stale`` (the token a caller saw refused or
        about to expire: if another caller already renewed it, the new one is
        returned without a call), or ``force``. Concurrent callers share one
        ``get_token`` call."""
        if self._api_key:
            return Credential(self._api_key, None, 0.0, 0)
        c = self._cached
        if c is not None and stale is not None and c.value == stale:
            c = None
        if c is not None and not force:
            due = c.refresh_at()
            if due is None or time.time() < due:
                return c
        if self._inflight is None or self._inflight.done():
            self._inflight = asyncio.ensure_future(self._fetch())
            # retrieved even when every waiter was cancelled: never "Task
            # exception was never retrieved"
            self._inflight.add_done_callback(lambda f: f.cancelled() or f.exception())
        return await asyncio.shield(self._inflight)

    def invalidate(self, value: str) -> None:
        """Forget ``value`` (the server refused it as expired)."""
        if self._cached is not None and self._cached.value == value:
            self._cached = None

    async def _fetch(self) -> Credential:
        assert self._get_token is not None
        fn = self._get_token
        self.calls += 1
        started = time.time()
        try:
            if inspect.iscoroutinefunction(fn):
                result = await asyncio.wait_for(fn(), GET_TOKEN_TIMEOUT)
            else:
                result = await asyncio.wait_for(asyncio.to_thread(fn), GET_TOKEN_TIMEOUT)
            if inspect.isawaitable(result):
                result = await asyncio.wait_for(result, GET_TOKEN_TIMEOUT)
        except MsgMeshError:
            raise
        except asyncio.TimeoutError as e:
            raise MsgMeshError(f"get_token did not answer in {GET_TOKEN_TIMEOUT:.0f}s", code="get_token_timeout") from e
        token, exp = normalize_token(result)
        if exp is not None and exp <= time.time():
            raise UnauthorizedError("get_token returned an expired token", status=401, code="token_expired")
        self._generation += 1
        cred = Credential(token, exp, started, self._generation)
        # a slower, older fetch never replaces a newer token
        cur = self._cached
        if cur is None or cur.expires_at is None or exp is None or exp >= cur.expires_at:
            self._cached = cred
        return cred
