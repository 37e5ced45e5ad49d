"""A real msgmesh for the SDK tests, a TCP proxy that cuts connections and
answers 503 on demand, and a harness that runs each case with the sync and
the asyncio client.

The server: ``MSGMESH_TEST_BIN`` (test.sh builds it) or ``go build`` from the
repository; Kafka: ``MSGMESH_TEST_KAFKA_BROKERS`` (the real broker), else the
embedded one, unless ``MSGMESH_TEST_REQUIRE_REAL_KAFKA=1``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

import msgmesh

REPO = Path(__file__).resolve().parents[3]

if os.environ.get("MSGMESH_TEST_REQUIRE_WHEEL") == "1" and "site-packages" not in (msgmesh.__file__ or ""):
    raise RuntimeError(f"msgmesh was imported from {msgmesh.__file__}, not from the installed wheel")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def new_key() -> str:
    # platform/auth: "mm_" + 43 characters of unpadded base64url (256 bits)
    return "mm_" + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class Server:
    def __init__(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="msgmesh-pytest-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.key = new_key()
        self.operator_key = secrets.token_hex(24)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path(self.tmp.name) / "msgmesh.log"

    def binary(self) -> str:
        b = os.environ.get("MSGMESH_TEST_BIN")
        if b:
            return b
        out = str(Path(self.tmp.name) / "msgmesh")
        subprocess.run(["go", "build", "-o", out, "./services/msgmesh"], cwd=REPO, check=True)
        return out

    def start(self) -> None:
        brokers = os.environ.get("MSGMESH_TEST_KAFKA_BROKERS", "").strip()
        if not brokers and os.environ.get("MSGMESH_TEST_REQUIRE_REAL_KAFKA") == "1":
            raise RuntimeError("MSGMESH_TEST_REQUIRE_REAL_KAFKA=1 but MSGMESH_TEST_KAFKA_BROKERS is empty")
        env = dict(os.environ)
        env.update({
            "MSGMESH_HTTP_ADDR": f"127.0.0.1:{self.port}",
            "MSGMESH_DATA_DIR": str(Path(self.tmp.name) / "data"),
            "MSGMESH_BOOTSTRAP_ADMIN_KEY": self.key,
            "MSGMESH_OPERATOR_KEY": self.operator_key,
            # our own control log and topics on the shared broker
            "MSGMESH_KAFKA_TOPIC_PREFIX": "pysdk" + uuid.uuid4().hex[:10],
            "MSGMESH_REALTIME_HEARTBEAT": "1s",
            "MSGMESH_REALTIME_REPLAY_WINDOW_RECORDS": "50",
            "MSGMESH_LIMITS_FREE_REQUESTS_PER_SECOND": "0",
            "MSGMESH_LIMITS_FREE_MESSAGES_PER_SECOND": "0",
            "MSGMESH_LIMITS_FREE_MONTHLY_MESSAGES": "0",
            "MSGMESH_LOG_LEVEL": "warn",
        })
        if brokers:
            env["MSGMESH_KAFKA_BROKERS"] = brokers
        else:
            env.pop("MSGMESH_KAFKA_BROKERS", None)
            env["MSGMESH_KAFKA_EMBEDDED_ADDR"] = f"127.0.0.1:{free_port()}"
        print(f"msgmesh SDK tests: broker {brokers or 'embedded (kfake)'}", file=sys.stderr)
        binary = self.binary()
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen([binary, "serve"], env=env, stdout=self.logf, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"msgmesh exited {self.proc.returncode}:\n{self.log_path.read_text()[-4000:]}")
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("msgmesh was not ready in 60s:\n" + self.log_path.read_text()[-4000:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if hasattr(self, "logf"):
            self.logf.close()
        self.tmp.cleanup()

    def operator(self, method: str, path: str, body: Any = None) -> Any:
        r = httpx.request(method, self.url + path, json=body,
                          headers={"Authorization": f"Bearer {self.operator_key}"}, timeout=30)
        assert r.status_code < 300, r.text
        return r.json() if r.content else None


@pytest.fixture(scope="session")
def server():
    s = Server()
    try:
        s.start()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def admin(server):
    c = msgmesh.MsgMesh(api_key=server.key, url=server.url)
    yield c
    c.close()


# ---- a TCP proxy that cuts connections and injects HTTP errors ------------

class Proxy:
    """127.0.0.1:<port> → the server, on an asyncio loop of its own thread.
    ``cut()`` drops every open connection; ``fail_next(n)`` answers the next
    n connections itself with a 503 in MsgMesh's error shape."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.loop = asyncio.new_event_loop()
        self.accepted: list[float] = []  # when each connection came
        self.injected: list[str] = []  # request ids of the injected answers
        self._fail = 0
        self._status = 503
        self._conns: set[asyncio.StreamWriter] = set()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._main, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait()
        self.url = f"http://127.0.0.1:{self.port}"

    def _main(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            self.srv = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = self.srv.sockets[0].getsockname()[1]

        self.loop.run_until_complete(start())
        ready.set()
        self.loop.run_forever()

    async def _handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.accepted.append(time.monotonic())
        if self._fail > 0:
            self._fail -= 1
            rid = f"req-injected-{len(self.injected) + 1}"
            self.injected.append(rid)
            try:
                await r.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                pass
            body = json.dumps({"error": "injected: Kafka did not acknowledge in time", "code": "kafka_unavailable",
                               "request_id": rid}).encode()
            w.write(b"HTTP/1.1 %d Service Unavailable\r\nContent-Type: application/json\r\nX-Request-Id: %s\r\n"
                    b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (self._status, rid.encode(), len(body)) + body)
            try:
                await w.drain()
            finally:
                w.close()
            return
        try:
            ur, uw = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            w.close()
            return
        self._conns.update((w, uw))

        async def pipe(a: asyncio.StreamReader, b: asyncio.StreamWriter) -> None:
            try:
                while True:
                    data = await a.read(65536)
                    if not data:
                        break
                    b.write(data)
                    await b.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                b.close()

        await asyncio.gather(pipe(r, uw), pipe(ur, w))
        self._conns.discard(w)
        self._conns.discard(uw)

    def _call(self, fn: Callable[[], Any]) -> Any:
        fut: "asyncio.Future[Any]" = asyncio.run_coroutine_threadsafe(self._run(fn), self.loop)  # type: ignore[arg-type]
        return fut.result(10)

    async def _run(self, fn: Callable[[], Any]) -> Any:
        return fn()

    def _cut(self) -> int:
        n = len(self._conns)
        for w in list(self._conns):
            w.transport.abort()
        self._conns.clear()
        return n

    def cut(self) -> int:
        return self._call(self._cut)

    def fail_next(self, n: int, status: int = 503) -> None:
        def do() -> None:
            self._fail, self._status = n, status
        self._call(do)

    def close(self) -> None:
        def do() -> None:
            self.srv.close()
            self._cut()
        try:
            self._call(do)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


@pytest.fixture
def proxy(server):
    p = Proxy(server.port)
    yield p
    p.close()


# ---- helpers ---------------------------------------------------------------

async def eventually(cond: Callable[[], bool], timeout: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


class Kit:
    """One client, sync or asyncio, driven from an async test: sync calls run
    in a worker thread, so the sync client's own threads do the work."""

    def __init__(self, kind: str, **kwargs: Any) -> None:
        self.kind = kind
        self.client: Any = msgmesh.MsgMesh(**kwargs) if kind == "sync" else msgmesh.AsyncMsgMesh(**kwargs)

    async def call(self, name: str, *a: Any, **kw: Any) -> Any:
        fn = getattr(self.client, name)
        if self.kind == "sync":
            return await asyncio.to_thread(fn, *a, **kw)
        return await fn(*a, **kw)

    async def subscribe(self, topic: str, **kw: Any) -> "Sub":
        s = Sub()
        kw.setdefault("on_message", s.messages.append)
        kw.setdefault("on_error", s.errors.append)
        kw.setdefault("on_resync", s.resyncs.append)
        kw.setdefault("on_state_change", s.states.append)
        s.sub = await self.call("subscribe", topic, **kw)
        s.kit = self
        return s

    async def close(self) -> None:
        await self.call("close")


class Sub:
    def __init__(self) -> None:
        self.messages: list[msgmesh.Message] = []
        self.errors: list[BaseException] = []
        self.resyncs: list[msgmesh.Resync] = []
        self.states: list[str] = []
        self.sub: Any = None
        self.kit: Kit

    async def wait_live(self, timeout: float = 20.0) -> None:
        if self.kit.kind == "sync":
            await asyncio.to_thread(self.sub.wait_live, timeout)
        else:
            await self.sub.wait_live(timeout)

    async def close(self) -> None:
        if self.kit.kind == "sync":
            await asyncio.to_thread(self.sub.close)
        else:
            await self.sub.close()


@pytest.fixture(params=["sync", "async"])
def kind(request) -> str:
    return request.param


@pytest.fixture
async def kits():
    made: list[Kit] = []

    def make(kind: str, **kwargs: Any) -> Kit:
        k = Kit(kind, **kwargs)
        made.append(k)
        return k

    yield make
    for k in made:
        await k.close()


def partition_rooms(admin: msgmesh.MsgMesh, topic: str, partitions: int) -> dict[int, str]:
    """A room per partition, found by publishing a probe into candidate rooms."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < partitions and i < 200:
        room = f"room-{i}"
        p = int(admin.publish(topic, {"probe": room}, room=room).cursor.split("-")[0])
        found.setdefault(p, room)
        i += 1
    assert len(found) == partitions
    return found


@pytest.fixture(autouse=True)
def no_lost_background_failures(caplog):
    """No "Task exception was never retrieved", no task destroyed while
    pending: a background failure is handled or surfaced, never dropped."""
    caplog.set_level("WARNING", logger="asyncio")
    yield
    bad = [r.getMessage() for r in caplog.records if r.name == "asyncio" and (
        "never retrieved" in r.getMessage() or "destroyed but it is pending" in r.getMessage())]
    assert not bad, bad
