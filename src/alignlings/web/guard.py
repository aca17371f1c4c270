"""Serving safely: the access token, the request-body limit and the bounded grading queue.

Both middlewares are plain ASGI so that they run before FastAPI parses anything.

Token: when the app has one, *every* HTTP request needs it (pages, API, static files, the
OpenAPI docs), given as ``?token=`` (which also sets the ``alignlings_token`` cookie, so links and
scripts inside the app keep working), an ``Authorization: Bearer`` header, an
``X-Alignlings-Token`` header, or the cookie. Missing: 401; wrong: 403.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool

TOKEN_COOKIE = "alignlings_token"


def _headers(scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _wants_json(scope) -> bool:
    path = scope.get("path", "")
    return path.startswith("/api") or path.startswith("/openapi") or \
        "application/json" in _headers(scope).get("accept", "")


async def _send_error(scope, send, status: int, detail: str, html_body: str | None = None) -> None:
    if _wants_json(scope) or html_body is None:
        body = json.dumps({"detail": detail}).encode()
        ctype = b"application/json"
    else:
        body = html_body.encode()
        ctype = b"text/html; charset=utf-8"
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class TokenMiddleware:
    def __init__(self, app, token: str | None):
        self.app, self.token = app, token

    def _given(self, scope) -> tuple[str | None, bool]:
        """The token this request carries, and whether it came from the query string."""
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if query.get("token"):
            return query["token"][0], True
        headers = _headers(scope)
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip(), False
        if headers.get("x-alignlings-token"):
            return headers["x-alignlings-token"], False
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # noqa: BLE001 - a malformed cookie header is just "no token"
            return None, False
        morsel = cookie.get(TOKEN_COOKIE)
        return (morsel.value if morsel else None), False

    async def __call__(self, scope, receive, send):
        if self.token is None or scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        given, from_query = self._given(scope)
        if not given:
            return await _send_error(
                scope, send, 401,
                "a token is required: open the URL printed by `alignlings serve` (it ends in ?token=...)",
                _page(401, "Token required",
                      "Open the URL printed by <code>alignlings serve</code>; it ends in <code>?token=…</code>."))
        if not secrets.compare_digest(given.encode(), self.token.encode()):
            return await _send_error(scope, send, 403, "wrong token", _page(403, "Wrong token",
                                     "The token in this URL does not match the server's."))
        if not from_query:
            return await self.app(scope, receive, send)

        async def send_with_cookie(message):
            if message["type"] == "http.response.start":
                cookie = f"{TOKEN_COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie.encode())]}
            await send(message)

        return await self.app(scope, receive, send_with_cookie)


def _page(status: int, title: str, text: str) -> str:
    return (f"<!doctype html><meta charset=utf-8><title>{status} {title}</title>"
            f"<body style='font-family:sans-serif;margin:3em'><h1>{title}</h1><p>{text}</p>")


class BodyLimitMiddleware:
    """Refuse request bodies over ``max_bytes`` with 413, by Content-Length or while reading.

    The body is buffered here (it is at most ``max_bytes``) and replayed to the app, so a client
    that lies about or omits Content-Length is still cut off.
    """

    def __init__(self, app, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        length = _headers(scope).get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            return await _send_error(scope, send, 413, f"request body over {self.max_bytes} bytes")
        chunks, total = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            total += len(body)
            if total > self.max_bytes:
                return await _send_error(scope, send, 413, f"request body over {self.max_bytes} bytes")
            chunks.append(body)
            if not message.get("more_body"):
                break
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


class QueueFull(Exception):
    """The grading queue is full (or a request waited too long): answer 429."""


class CheckQueue:
    """At most ``max_concurrent`` gradings run at once and ``max_queue`` wait; more are refused.

    Admission is decided immediately (never a hang): a request that finds the queue full gets
    :class:`QueueFull` at once; one that waits longer than ``wait_seconds`` for a slot too.
    Thread-based, so it works whatever event loop serves the app.
    """

    def __init__(self, max_concurrent: int = 2, max_queue: int = 8, wait_seconds: float = 120.0):
        if max_concurrent < 1 or max_queue < 0:
            raise ValueError("max_concurrent_checks must be >= 1 and max_queue >= 0")
        self.max_concurrent, self.max_queue, self.wait_seconds = max_concurrent, max_queue, wait_seconds
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._admitted = 0
        self._running = 0

    @property
    def capacity(self) -> int:
        return self.max_concurrent + self.max_queue

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"running": self._running, "waiting": self._admitted - self._running,
                    "max_concurrent": self.max_concurrent, "max_queue": self.max_queue}

    async def run(self, fn: Callable[[], Any]) -> Any:
        with self._lock:
            if self._admitted >= self.capacity:
                raise QueueFull(f"{self._admitted} gradings running or waiting (limit {self.capacity})")
            self._admitted += 1
        try:
            return await run_in_threadpool(self._run, fn)
        finally:
            with self._lock:
                self._admitted -= 1

    def _run(self, fn):
        if not self._slots.acquire(timeout=self.wait_seconds):
            raise QueueFull(f"waited over {self.wait_seconds:.0f} s for a grading slot")
        with self._lock:
            self._running += 1
        try:
            return fn()
        finally:
            with self._lock:
                self._running -= 1
            self._slots.release()
