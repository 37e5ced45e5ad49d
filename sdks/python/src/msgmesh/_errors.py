"""Typed errors: one class per HTTP status family of MsgMesh (spec section 6).

Every non-2xx answer of MsgMesh is ``{"error": "...", "code": "..."}`` (plus
``request_id`` on 5xx), with an ``X-Request-Id`` header, and ``Retry-After``
on 429. :func:`error_from_response` turns such an answer into the matching
exception.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

__all__ = [
    "MsgMeshError",
    "InvalidRequestError",
    "UnauthorizedError",
    "ForbiddenError",
    "NotFoundError",
    "ConflictError",
    "PayloadTooLargeError",
    "RateLimitError",
    "ServerError",
    "ConnectionLostError",
    "error_from_response",
]


class MsgMeshError(Exception):
    """Base class of every error the SDK raises or reports.

    ``status`` is the HTTP status (``None`` when no answer came, see
    :class:`ConnectionLostError`), ``code`` MsgMesh's stable error code,
    ``request_id`` the server's request id (5xx and ``X-Request-Id``),
    ``retry_after`` the seconds a 429 (or 503) asked to wait.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.request_id = request_id
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, status={self.status!r}, code={self.code!r}, "
            f"request_id={self.request_id!r}, retry_after={self.retry_after!r})"
        )

    def __str__(self) -> str:
        parts = [self.message]
        if self.status is not None:
            parts.append(f"status {self.status}")
        if self.code:
            parts.append(f"code {self.code}")
        if self.request_id:
            parts.append(f"request_id {self.request_id}")
        return parts[0] if len(parts) == 1 else f"{parts[0]} ({', '.join(parts[1:])})"


class InvalidRequestError(MsgMeshError):
    """400 or 422: fix the request."""


class UnauthorizedError(MsgMeshError):
    """401: the credential is missing, wrong, expired or revoked: get a new one.

    Terminal for subscriptions (state ``failed``)."""


class ForbiddenError(MsgMeshError):
    """403: the credential may not do this (or the tenant is suspended).

    Subscriptions retry with backoff: a suspension lifts by itself."""


class NotFoundError(MsgMeshError):
    """404: unknown topic (or consumer, webhook...), or the topic was deleted."""


class ConflictError(MsgMeshError):
    """409: it already exists."""


class PayloadTooLargeError(MsgMeshError):
    """413: over a size or count limit."""


class RateLimitError(MsgMeshError):
    """429: over a rate or quota; ``retry_after`` says when to try again."""


class ServerError(MsgMeshError):
    """5xx: the server could not do it (503: Kafka did not acknowledge in
    time, nothing is confirmed). Carries ``request_id``."""


class ConnectionLostError(ServerError):
    """No answer, or a stream that broke or ended: the network, a proxy, or
    a server that went away (``status`` is ``None``; ``code``
    ``network_error``, ``stream_ended``, ``idle_timeout``...). A
    :class:`ServerError`, as the JavaScript SDK reports it; subscriptions
    reconnect with backoff."""


def _class_for(status: int) -> type[MsgMeshError]:
    if status in (400, 422):
        return InvalidRequestError
    if status == 401:
        return UnauthorizedError
    if status == 403:
        return ForbiddenError
    if status == 404:
        return NotFoundError
    if status == 409:
        return ConflictError
    if status == 413:
        return PayloadTooLargeError
    if status == 429:
        return RateLimitError
    if status >= 500:
        return ServerError
    return MsgMeshError


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare, and the backoff still applies


def error_from_response(status: int, body: bytes | str | None, headers: Mapping[str, str] | Any) -> MsgMeshError:
    """The typed error for an HTTP answer with a non-2xx ``status``."""
    message, code, request_id = "", None, None
    if body:
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            doc = None
        if isinstance(doc, dict):
            message = str(doc.get("error") or "")
            code = doc.get("code") if isinstance(doc.get("code"), str) else None
            request_id = doc.get("request_id") if isinstance(doc.get("request_id"), str) else None
        elif isinstance(body, (bytes, str)):
            text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
            message = text.strip()[:200]
    get = getattr(headers, "get", None)
    if request_id is None and get is not None:
        request_id = get("X-Request-Id") or get("x-request-id")
    retry_after = _retry_after(get("Retry-After") or get("retry-after")) if get is not None else None
    if not message:
        message = f"HTTP {status}"
    return _class_for(status)(message, status=status, code=code, request_id=request_id, retry_after=retry_after)


# Error codes of WebSocket "error" frames (proto/ws), mapped to the HTTP
# status their code has in the HTTP error catalog.
_CODE_STATUS = {
    "invalid_request": 400,
    "invalid_cursor": 400,
    "room_not_supported": 400,
    "unauthenticated": 401,
    "invalid_credential": 401,
    "invalid_token": 401,
    "token_expired": 401,
    "credential_revoked": 401,
    "forbidden": 403,
    "tenant_suspended": 403,
    "topic_not_found": 404,
    "topic_deleted": 404,
    "not_found": 404,
    "conflict": 409,
    "payload_too_large": 413,
    "rate_limited": 429,
    "quota_exceeded": 429,
    "too_many_subscribers": 429,
}


def error_from_code(code: str, message: str) -> MsgMeshError:
    """The typed error for an error ``code`` that came without an HTTP status
    (a WebSocket frame or close reason, an SSE ``msgmesh-closed`` event)."""
    status = _CODE_STATUS.get(code, 500 if code in ("internal", "kafka_unavailable", "not_ready") else 400)
    return _class_for(status)(message or code, status=status, code=code)
