"""Serving safely: the access token, same-origin writes, the request-body limit, response headers
and the bounded grading queue.

The middlewares are plain ASGI so that they run before FastAPI parses anything.

Token: when the app has one, *every* HTTP request needs it (pages, API, static files, the
OpenAPI docs), given as ``?token=``, an ``Authorization: Bearer`` header, an
``X-Alignlings-Token`` header, or the ``alignlings_token`` cookie. Missing: 401; wrong: 403.
A GET or HEAD with the right ``?token=`` sets the cookie (``HttpOnly; SameSite=Strict``, and
``Secure`` when served over https) and redirects (307) to the same URL without the token, so it
does not stay in the address bar, the history or a bookmark; scripts should send the header.

Same origin (:class:`SameOriginMiddleware`, on when the server has no token, i.e. loopback mode):
a request that changes state (POST, PUT, PATCH, DELETE) must not come from another site.
A browser marks every such request with ``Origin`` (and ``Sec-Fetch-Site``); these must name this
server, or the request gets 403. Its body must be ``Content-Type: application/json`` (415
otherwise), which an HTML form cannot send and which a cross-site script cannot send without a
CORS preflight that this server never grants. A request with neither header is from a
non-browser client (curl, a script, the tests) and is allowed: such a client could as well read
the progress database directly. Only a body-less one may omit the Content-Type. One HTML form is
allowed, with the browser's proof that it comes from this origin: a predict item's commit. So a cross-site
form or ``fetch`` cannot check, reveal, take hints, answer, import or start runs.

Every response carries ``Referrer-Policy: no-referrer`` (:class:`SecurityHeadersMiddleware`).
"""

from __future__ import annotations

import json
import secrets
from http.cookies import SimpleCookie

from alignlings.web.checkqueue import CheckQueue, QueueFull, client_key  # noqa: F401 - re-exported
from urllib.parse import parse_qs, urlencode, urlsplit


TOKEN_COOKIE = "alignlings_token"


def _headers(scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _is_https(scope) -> bool:
    """Served over https: the ASGI scheme, or the first ``X-Forwarded-Proto`` of a TLS proxy.

    Trusting the header costs nothing here: all it changes is that the cookie gets ``Secure``.
    """
    forwarded = _headers(scope).get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return scope.get("scheme") in ("https", "wss") or forwarded == "https"


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
        cookie = (f"{TOKEN_COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                  + ("; Secure" if _is_https(scope) else "")).encode()
        if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD"):
            await send({"type": "http.response.start", "status": 307,
                        "headers": [(b"location", _without_token(scope).encode("latin-1")), (b"set-cookie", cookie),
                                    (b"content-length", b"0"), (b"cache-control", b"no-store")]})
            return await send({"type": "http.response.body", "body": b""})

        async def send_with_cookie(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie)]}
            await send(message)

        return await self.app(scope, receive, send_with_cookie)


def _without_token(scope) -> str:
    """This request's path and query, less every ``token`` parameter (a relative URL)."""
    pairs = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
    query = urlencode([(k, v) for k, values in pairs.items() if k != "token" for v in values])
    path = scope.get("raw_path") or scope.get("path", "/").encode()
    path = path.decode("latin-1") if isinstance(path, bytes) else path
    if not path.startswith("/") or path.startswith("//"):  # never an off-site ("//host") location
        path = "/" + path.lstrip("/")
    return path + ("?" + query if query else "")


class SameOriginMiddleware:
    """Loopback mode: state-changing requests only from this server's own pages (see the module doc)."""

    UNSAFE = ("POST", "PUT", "PATCH", "DELETE")

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") not in self.UNSAFE:
            return await self.app(scope, receive, send)
        headers = _headers(scope)
        origin, site = headers.get("origin"), headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return await _send_error(scope, send, 403, f"cross-site request refused (Sec-Fetch-Site: {site})")
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        own_form = self._own_form(scope, ctype, origin, site, headers)
        if origin is not None and not _same_origin(origin, scope, headers) and not own_form:
            return await _send_error(scope, send, 403, f"cross-origin request refused (Origin: {origin[:100]})")
        bodyless = "content-type" not in headers and headers.get("content-length", "0") == "0" \
            and "transfer-encoding" not in headers and origin is None and site is None
        if ctype != "application/json" and not bodyless and not own_form:
            return await _send_error(scope, send, 415, "expected Content-Type: application/json")
        return await self.app(scope, receive, send)

    @staticmethod
    def _own_form(scope, ctype: str, origin: str | None, site: str | None, headers: dict[str, str]) -> bool:
        """An HTML form of this server's own pages that works without JavaScript (a predict item's
        commit, ``POST /exercises/ID/predict``): allowed only when the browser proves it comes from
        this origin: ``Sec-Fetch-Site: same-origin`` (a header no page can set), or an ``Origin``
        naming this server. (Under ``Referrer-Policy: no-referrer`` a form's ``Origin`` is "null".)"""
        path = scope.get("path", "")
        if ctype != "application/x-www-form-urlencoded" or not path.startswith("/exercises/") \
                or not path.endswith("/predict"):
            return False
        if site is not None:
            return site == "same-origin"
        return origin is not None and _same_origin(origin, scope, headers)


def _same_origin(origin: str, scope, headers: dict[str, str]) -> bool:
    """Whether ``Origin`` names the scheme, host and port this request was sent to (its Host header)."""
    try:
        o = urlsplit(origin)
        h = urlsplit("//" + headers.get("host", ""))
        o_port, h_port = o.port, h.port
    except ValueError:  # "null", a malformed port
        return False
    scheme = "https" if _is_https(scope) else "http"
    default = 443 if scheme == "https" else 80
    return bool(o.hostname) and o.scheme == scheme and o.hostname == h.hostname and not o.path \
        and (o_port or default) == (h_port or default)


class SecurityHeadersMiddleware:
    """Adds ``Referrer-Policy: no-referrer`` to every response, errors of other middlewares included."""

    HEADERS = [(b"referrer-policy", b"no-referrer")]

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in self.HEADERS if k not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        return await self.app(scope, receive, send_with_headers)


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


class RateLimiter:
    """At most ``limit`` events per ``window_s`` seconds per key (a remote address): a sliding
    window, thread-safe, with memory bounded by the keys seen within one window.

    ``hit(key)`` records an event and returns 0.0, or, when the key is over its limit, records
    nothing and returns the seconds until it may try again."""

    def __init__(self, limit: int, window_s: float, clock=None):
        import threading
        import time

        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"limit: expected a whole number >= 1, got {limit!r}")
        if not window_s > 0:
            raise ValueError(f"window_s: expected seconds > 0, got {window_s!r}")
        self.limit, self.window_s = limit, float(window_s)
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._events: dict[str, list[float]] = {}

    def hit(self, key: str) -> float:
        now = self._clock()
        with self._lock:
            if len(self._events) > 10_000:  # forget every key with nothing inside the window
                self._events = {k: v for k, v in self._events.items() if v and v[-1] > now - self.window_s}
            times = [t for t in self._events.get(key, []) if t > now - self.window_s]
            if len(times) >= self.limit:
                self._events[key] = times
                return max(0.001, times[0] + self.window_s - now)
            times.append(now)
            self._events[key] = times
            return 0.0
