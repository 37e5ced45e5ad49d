"""Credentials: 401 terminal, 403 retried with backoff, tokens refreshed
mid-stream with no loss, get_token failures retried and reported."""

from __future__ import annotations

import asyncio
import threading

import pytest

import msgmesh
from conftest import eventually, unique

TRANSPORTS = ["sse", "websocket"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_get_token_401_is_terminal(server, admin, kits, kind, transport):
    topic = unique("t401")
    admin.create_topic(topic)
    calls = []

    def get_token() -> str:
        calls.append(1)
        raise msgmesh.UnauthorizedError("the backend says: log in again", status=401, code="unauthenticated")

    k = kits(kind, get_token=get_token, url=server.url, reconnect={"min_delay": 0.05, "max_delay": 0.2})
    s = await k.subscribe(topic, transport=transport)
    await eventually(lambda: s.sub.state == "failed", 10, "state failed")
    assert isinstance(s.sub.error, msgmesh.UnauthorizedError)
    await eventually(lambda: any(isinstance(e, msgmesh.UnauthorizedError) for e in s.errors), 5, "on_error")
    await asyncio.sleep(0.5)
    assert len(calls) == 1, "a 401 from get_token is not retried"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_server_401_is_terminal(server, admin, kits, kind, transport):
    topic = unique("s401")
    admin.create_topic(topic)
    bad = "mm_" + "A" * 43
    k = kits(kind, api_key=bad, url=server.url, reconnect={"min_delay": 0.05, "max_delay": 0.2})
    s = await k.subscribe(topic, transport=transport)
    await eventually(lambda: s.sub.state == "failed", 10, "state failed")
    err = s.sub.error
    assert isinstance(err, msgmesh.UnauthorizedError) and err.status == 401 and err.code == "invalid_credential"
    with pytest.raises(msgmesh.UnauthorizedError):
        await k.call("list_topics")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_403_backs_off_and_retries_until_it_lifts(server, admin, kits, kind, transport):
    """A suspended tenant answers 403 tenant_suspended: the subscription keeps
    retrying with backoff and goes live again when the tenant is reinstated."""
    tenant = unique("susp")
    created = server.operator("POST", "/v1/tenants", {"id": tenant, "plan": "free"})
    key = created.get("key") or created.get("admin_key") or created["api_key"]
    owner = msgmesh.MsgMesh(api_key=key, url=server.url)
    try:
        topic = unique("t403")
        owner.create_topic(topic, partitions=1)
        server.operator("POST", f"/v1/tenants/{tenant}/suspend", {"reason": "test"})
        k = kits(kind, api_key=key, url=server.url, reconnect={"min_delay": 0.1, "max_delay": 0.4})
        s = await k.subscribe(topic, transport=transport)
        await eventually(lambda: sum(isinstance(e, msgmesh.ForbiddenError) for e in s.errors) >= 3, 20,
                         "three 403s, retried")
        assert s.sub.state == "reconnecting"
        assert all(e.status == 403 for e in s.errors if isinstance(e, msgmesh.ForbiddenError))
        assert s.sub.error is None
        server.operator("POST", f"/v1/tenants/{tenant}/reinstate")
        await s.wait_live(20)
        await asyncio.to_thread(owner.publish, topic, {"after": "reinstate"})
        await eventually(lambda: len(s.messages) == 1, 15, "the message after reinstatement")
    finally:
        owner.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_token_refreshed_mid_stream_without_loss(server, admin, kits, kind, transport):
    topic = unique("refresh")
    admin.create_topic(topic, partitions=3)
    minted = []
    lock = threading.Lock()

    def get_token() -> msgmesh.Token:
        t = admin.mint_token(ttl_seconds=2, capabilities=[{"ops": ["subscribe"], "topics": [topic]}])
        with lock:
            minted.append(t)
        return t

    async def aget_token() -> msgmesh.Token:  # get_token may be async (either client)
        return await asyncio.to_thread(get_token)

    k = kits(kind, get_token=aget_token if kind == "async" else get_token, url=server.url,
             reconnect={"min_delay": 0.05, "max_delay": 0.5})
    s = await k.subscribe(topic, transport=transport)
    await s.wait_live()
    sent = []
    for i in range(30):  # about 5 s: more than two token lifetimes
        r = await asyncio.to_thread(admin.publish, topic, {"i": i}, room=f"r{i % 4}")
        sent.append(r.cursor)
        await asyncio.sleep(0.15)
    await eventually(lambda: len(s.messages) >= len(sent), 20, "every message")
    await asyncio.sleep(0.3)
    assert sorted(m.cursor for m in s.messages) == sorted(sent)  # none lost, none twice
    assert len(minted) >= 3, f"tokens were refreshed ({len(minted)} minted)"
    assert s.sub.state == "live"
    assert not any(isinstance(e, msgmesh.UnauthorizedError) for e in s.errors)


async def test_concurrent_refreshes_share_one_get_token_call():
    calls = []
    gate = asyncio.Event()

    async def get_token() -> dict:
        calls.append(1)
        await asyncio.sleep(0.2)
        return {"token": f"tok-{len(calls)}", "expires_at": None}

    from msgmesh._auth import Auth
    a = Auth(None, get_token)
    got = await asyncio.gather(*(a.get(force=True) for _ in range(10)))
    assert len(calls) == 1 and {c.value for c in got} == {"tok-1"}
    assert (await a.get()).value == "tok-1"  # cached
    gate.set()


async def test_late_token_does_not_replace_a_newer_one():
    from msgmesh._auth import Auth
    import time
    order = iter([(0.3, 100), (0.0, 200)])  # the first call is slow and returns an older expiry

    async def get_token() -> dict:
        delay, ttl = next(order)
        await asyncio.sleep(delay)
        return {"token": f"ttl{ttl}", "expires_at": time.time() + ttl}

    a = Auth(None, get_token)
    slow = asyncio.ensure_future(a.get(force=True))
    await asyncio.sleep(0.05)
    a._inflight = None  # a second refresh starts while the first is in flight (a replaced connection)
    fast = await a.get(force=True)
    await slow
    assert fast.value == "ttl200"
    assert (await a.get()).value == "ttl200", "the late, older token was discarded"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_get_token_failures_are_retried_and_reported(server, admin, kits, kind, transport):
    topic = unique("gtfail")
    admin.create_topic(topic)
    calls = []

    def get_token() -> str:
        calls.append(1)
        if len(calls) <= 2:
            raise RuntimeError("token backend unavailable")
        return server.key

    k = kits(kind, get_token=get_token, url=server.url, reconnect={"min_delay": 0.05, "max_delay": 0.2})
    s = await k.subscribe(topic, transport=transport)
    await s.wait_live(15)
    assert [type(e) for e in s.errors][:2] == [RuntimeError, RuntimeError]
    assert len(calls) == 3


async def test_a_token_renewed_by_another_caller_is_reused_without_a_call():
    from msgmesh._auth import Auth
    calls = []

    def get_token() -> str:
        calls.append(1)
        return f"tok-{len(calls)}"

    a = Auth(None, get_token)
    first = (await a.get()).value
    second = (await a.get(stale=first)).value  # the server called tok-1 expired: renewed
    assert (first, second, len(calls)) == ("tok-1", "tok-2", 1 + 1)
    again = (await a.get(stale=first)).value  # another caller saw tok-1 refused too: tok-2, no call
    assert again == "tok-2" and len(calls) == 2
