"""The dashboard's guard: an ASGI middleware in front of every route.

Order of checks for a request (docs/dashboard.md, "Security model"):

1. A state-changing request (any method but GET, HEAD) must carry the token in
   the ``X-Stepscope-Token`` header; it is checked before anything else, so a
   request without it gets 401 (missing) or 403 (wrong) whatever its path or body.
   A cookie or a ``?token=`` never counts here: a cross-site form or ``fetch``
   cannot set a custom header, so it cannot trigger a control.
2. ``Host`` must name this server (defeats DNS rebinding; the names it answers to
   are :func:`._hosts.served_names`), and an ``Origin``, when sent, must be this
   server's own (no CORS: no ``Access-Control-*`` header is ever sent).
3. Beyond loopback, every request (viewing too) needs the token: in the header,
   in ``?token=`` (the URL printed at start), or in the ``stepscope_token`` cookie
   that a valid ``?token=`` sets (HttpOnly, SameSite=Strict, and Secure over TLS) so
   that scripts, styles and downloads load.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlsplit

# ASGI's scope and messages: dicts whose keys depend on their "type" (the ASGI spec).
# Values are read narrowed to the spec's types; a value of another type counts as absent.
Scope = MutableMapping[str, object]
Message = MutableMapping[str, object]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_HEADER = "x-stepscope-token"
COOKIE = "stepscope_token"
SAFE_METHODS = frozenset({"GET", "HEAD"})
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def new_token() -> str:
    """A fresh random token (32 URL-safe characters)."""
    return secrets.token_urlsafe(24)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    name = host.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    """Refuse to serve beyond loopback without a token (ValueError says how to fix it)."""
    if not is_loopback(host) and not token:
        raise ValueError(
            f"Refusing to serve on {host!r} without a token: beyond loopback every request "
            "must carry one. Give --token (at least 16 random characters), or bind 127.0.0.1."
        )
    if not token or len(token) < MIN_TOKEN_CHARS:
        raise ValueError(
            f"The token must have at least {MIN_TOKEN_CHARS} characters; "
            "leave --token out on loopback to get a random one."
        )


def header_pairs(message: Scope | Message) -> list[tuple[bytes, bytes]]:
    """The ``headers`` of an ASGI scope or message: (name, value) byte pairs."""
    found = message.get("headers")
    return list(found) if isinstance(found, list | tuple) else []


def _headers(scope: Scope) -> dict[str, str]:
    pairs = header_pairs(scope)
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in pairs}


def _hostname(value: str) -> str:
    """``example.org`` from ``example.org:8000`` or ``[::1]:80``."""
    return (urlsplit("//" + value).hostname or "").lower()


class Guard:
    """The middleware: token, host and origin checks (see the module docstring)."""

    def __init__(self, app: ASGIApp, host: str, token: str, extra_hosts: tuple[str, ...] = ()):
        check_binding(host, token)
        self.app, self.token, self.loopback = app, token, is_loopback(host)
        names = {host.lower().strip("[]"), *extra_hosts}
        if self.loopback:
            names |= {n.strip("[]") for n in LOOPBACK_NAMES}
        self.hosts = frozenset(names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _deny(send, *refusal)
            return
        if self._token_in_query(scope):
            secure = scope.get("scheme") == "https"
            await self.app(scope, receive, _with_cookie(send, self.token, secure))
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        if scope["method"] not in SAFE_METHODS:
            return self._header_token(headers) or self._same_origin(headers)
        refusal = self._same_origin(headers)
        if refusal is None and not self.loopback:
            refusal = self._any_token(scope, headers)
        return refusal

    def _header_token(self, headers: dict[str, str]) -> tuple[int, str] | None:
        given = headers.get(TOKEN_HEADER)
        if not given:
            return 401, "This request changes state: send the token as X-Stepscope-Token."
        if not secrets.compare_digest(given.encode(), self.token.encode()):
            return 403, "Wrong token in X-Stepscope-Token."
        return None

    def _same_origin(self, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        if _hostname(host) not in self.hosts:
            return 403, (f"Host {host!r} is not this server (DNS rebinding?). If it is, "
                         "restart `stepscope ui` with --allow-host NAME.")  # fmt: skip
        origin = headers.get("origin")
        if origin is not None and urlsplit(origin).netloc.lower() != host.lower():
            return 403, f"Cross-site request from origin {origin!r} refused."
        return None

    def _any_token(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        given = headers.get(TOKEN_HEADER) or _query_token(scope) or _cookie_token(headers)
        if not given:
            return 401, "This dashboard is served beyond loopback: open the URL with ?token=..."
        if not secrets.compare_digest(given.encode(), self.token.encode()):
            return 403, "Wrong token."
        return None

    def _token_in_query(self, scope: Scope) -> bool:
        given = _query_token(scope)
        return bool(given) and secrets.compare_digest(given.encode(), self.token.encode())


def _query_token(scope: Scope) -> str:
    raw = scope.get("query_string", b"")
    query = raw.decode("latin-1") if isinstance(raw, bytes) else ""
    values = parse_qs(query).get("token", [""])
    return values[0]


def _cookie_token(headers: dict[str, str]) -> str:
    cookie: SimpleCookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except Exception:
        return ""
    morsel = cookie.get(COOKIE)
    return morsel.value if morsel is not None else ""


def _with_cookie(send: Send, token: str, secure: bool) -> Send:
    """``send`` that adds the token cookie to the response start (Secure over TLS, so that
    the browser never sends it to a plain-HTTP service of the same host)."""
    value = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*header_pairs(message), (b"set-cookie", value.encode())]
        await send(message)

    return wrapped


async def _deny(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"error": detail, "status": status}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Token header="X-Stepscope-Token"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
