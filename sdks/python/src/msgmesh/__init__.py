"""MsgMesh for Python: publish, poll and subscribe (SSE or WebSocket) with
per-partition dedupe, exact resume, reconnect with backoff and token
rotation. ``MsgMesh`` is the sync client, ``AsyncMsgMesh`` the asyncio one;
both have the same methods and semantics."""

from ._async import AsyncMessageIterator, AsyncMsgMesh, AsyncSubscription
from ._errors import (
    ConflictError,
    ConnectionLostError,
    ForbiddenError,
    InvalidRequestError,
    MsgMeshError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitError,
    ServerError,
    UnauthorizedError,
)
from ._models import Header, Message, PublishBatchResult, PublishResult, Resync, Token, Topic
from ._sync import MessageIterator, MsgMesh, Subscription

__version__ = "0.1.0"

__all__ = [
    "MsgMesh",
    "AsyncMsgMesh",
    "Subscription",
    "AsyncSubscription",
    "MessageIterator",
    "AsyncMessageIterator",
    "Message",
    "Header",
    "PublishResult",
    "PublishBatchResult",
    "Topic",
    "Token",
    "Resync",
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
]
