"""Where user callbacks run: never on the read loop.

The asyncio client runs them in a task of their own per subscription (a
slow ``async def`` callback does not stall reading); the sync client runs
them in a thread of their own per subscription. Both keep order (messages,
resyncs, errors and state changes in the order they happened) and apply
backpressure: when ``LIMIT`` items wait, the reader waits too (the server
then disconnects a reader that stays behind, and the SDK resumes from its
position).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import threading
from typing import Any, Callable, Optional

log = logging.getLogger("msgmesh")

LIMIT = 1024
_STOP = ("_stop", None)

Callback = Optional[Callable[[Any], Any]]


class _Callbacks:
    def __init__(self, on_message: Callback, on_resync: Callback, on_error: Callback,
                 on_state_change: Callback, on_end: Callback = None) -> None:
        if on_message is None or not callable(on_message):
            raise TypeError("on_message must be a callable")
        self.fns = {
            "message": on_message,
            "resync": on_resync,
            "error": on_error,
            "state": on_state_change,
            "end": on_end,
        }

    def report_unhandled(self, kind: str, payload: Any, exc: BaseException | None) -> None:
        if kind == "error":
            log.warning("msgmesh subscription error (pass on_error to handle it): %r", payload)
        if exc is not None:
            log.error("msgmesh %s callback raised", kind, exc_info=exc)


class AsyncDispatcher(_Callbacks):
    """Callbacks (plain or ``async def``) in a task of their own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._q: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="msgmesh-callbacks")

    async def put(self, kind: str, payload: Any) -> None:
        while kind == "message" and self._q.qsize() >= LIMIT and not self._task.done():
            await asyncio.sleep(0.01)
        self._q.put_nowait((kind, payload))

    async def _loop(self) -> None:
        while True:
            kind, payload = await self._q.get()
            if kind == "_stop":
                return
            await self._call(kind, payload)

    async def _call(self, kind: str, payload: Any) -> None:
        fn = self.fns.get(kind)
        if fn is None:
            self.report_unhandled(kind, payload, None)
            return
        try:
            r = fn(payload)
            if inspect.isawaitable(r):
                await r
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a callback's failure is reported, never kills the subscription
            await self._callback_failed(kind, e)

    async def _callback_failed(self, kind: str, e: Exception) -> None:
        on_error = self.fns.get("error")
        if kind in ("error", "end") or on_error is None:
            self.report_unhandled(kind, None, e)
            return
        try:
            r = on_error(e)
            if inspect.isawaitable(r):
                await r
        except Exception as e2:
            self.report_unhandled("error", None, e2)

    async def aclose(self, timeout: float = 5.0) -> None:
        self._q.put_nowait(_STOP)
        if asyncio.current_task() is self._task:
            return  # closed from inside a callback: the loop ends after it
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            self._task.cancel()


class ThreadDispatcher(_Callbacks):
    """Callbacks in a thread of their own (the sync client)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._q: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="msgmesh-callbacks", daemon=True)
        self._thread.start()

    async def put(self, kind: str, payload: Any) -> None:
        while kind == "message" and self._q.qsize() >= LIMIT and self._thread.is_alive():
            await asyncio.sleep(0.01)
        self._q.put_nowait((kind, payload))

    def _loop(self) -> None:
        while True:
            kind, payload = self._q.get()
            if kind == "_stop":
                return
            fn = self.fns.get(kind)
            if fn is None:
                self.report_unhandled(kind, payload, None)
                continue
            try:
                fn(payload)
            except Exception as e:
                on_error = self.fns.get("error")
                if kind in ("error", "end") or on_error is None:
                    self.report_unhandled(kind, None, e)
                    continue
                try:
                    on_error(e)
                except Exception as e2:
                    self.report_unhandled("error", None, e2)

    async def aclose(self, timeout: float = 5.0) -> None:
        self._q.put_nowait(_STOP)

    def join(self, timeout: float = 5.0) -> None:
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
