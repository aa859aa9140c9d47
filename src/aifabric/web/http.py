"""What every answer of the web app shares: JSON encoding (numpy values, NaN as null),
the one-line error answer, the Content-Security-Policies, :class:`Guard`, the
middleware that checks the ``Host`` header and puts the security headers on, and
:class:`BodyLimit`, the middleware that refuses a request body over
:data:`MAX_BODY_BYTES` (413) while it streams in, before anything parses it."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.responses import Response

from aifabric.errors import SpecError

__all__ = ["CONTROL", "FILE_CSP", "MAX_BODY_BYTES", "PAGE_CSP", "BodyLimit", "Guard",
           "NotFound", "encode", "error_response", "json_response"]

#: the page's Content-Security-Policy (also in index.html's <meta>): this origin only
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
#: a file of the run folder or the API page: no script at all
FILE_CSP = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox"
#: the largest request body accepted by default (``aifabric serve --max-body``): the API's
#: bodies are a what-if's failure names (at most 1,024 of 200 characters: ~210 KB as
#: JSON), under this
MAX_BODY_BYTES = 1 << 20
#: C0 control characters and DEL: never in a name, a path or an error line
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars/arrays as Python ones and NaN/inf as null (JSON has
    neither); only called when the fast encoding failed."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def _default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def encode(data: Any) -> bytes:
    try:
        text = json.dumps(data, default=_default, allow_nan=False, ensure_ascii=False,
                          separators=(",", ":"))
    except ValueError:  # a NaN or inf somewhere: walk once and replace them by null
        text = json.dumps(_plain(data), default=_default, allow_nan=False,
                          ensure_ascii=False, separators=(",", ":"))
    return text.encode()


def json_response(data: Any, status: int = 200) -> Response:
    return Response(encode(data), status_code=status, media_type="application/json")


def error_response(message: str, status: int) -> Response:
    line = CONTROL.sub(" ", message).strip() or "error"
    return json_response({"error": line}, status)


class NotFound(SpecError):
    """Bad input naming something that is not there (answered 404)."""



class Guard:
    """Pure ASGI middleware: refuses a request whose ``Host`` header is not allowed (when
    a list is given), and puts security headers on every answer (nosniff, no referrer, no
    framing, no caching; the page's CSP unless the answer has its own)."""

    def __init__(self, app: Any, allowed_hosts: list[str] | None = None) -> None:
        self.app = app
        self.allowed = {h.lower() for h in allowed_hosts} if allowed_hosts else None

    def host_ok(self, scope: Any) -> bool:
        if self.allowed is None:
            return True
        raw = dict(scope.get("headers") or ()).get(b"host", b"").decode("latin-1").lower()
        host = raw[: raw.index("]") + 1] if raw.startswith("[") and "]" in raw else \
            raw.rsplit(":", 1)[0] if raw.count(":") == 1 else raw
        return host in self.allowed

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def add(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                extra = [(b"x-content-type-options", b"nosniff"),
                         (b"referrer-policy", b"no-referrer"),
                         (b"x-frame-options", b"DENY"),
                         (b"cache-control", b"no-store"),
                         (b"content-security-policy", PAGE_CSP.encode())]
                headers += [(k, v) for k, v in extra if k not in names]
                message = {**message, "headers": headers}
            await send(message)

        if not self.host_ok(scope):
            await error_response("host: this server answers only to its loopback address "
                         "(127.0.0.1, localhost, [::1])", 400)(scope, receive, add)
            return
        await self.app(scope, receive, add)


class BodyLimit:
    """Pure ASGI middleware: a request body over ``max_body_bytes`` answers 413 (one line
    of JSON) before the application sees any of it.

    A ``Content-Length`` over the limit is refused at once, unread. Otherwise the body
    is read here as it streams in (``http.request`` messages, chunked or not), counting
    bytes, and refused the moment the count passes the limit, so at most the limit
    plus one message is ever held; a body within the limit is handed on unchanged. What
    the client still sends after the 413 is discarded by the server as it arrives.
    """

    def __init__(self, app: Any, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = int(max_body_bytes)

    def _too_large(self, got: str) -> Response:
        return error_response(f"body: {got}; allowed: at most {self.limit} bytes "
                              "(aifabric serve --max-body)", 413)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None:
            text = length.decode("latin-1").strip()
            if not text.isdigit():
                await error_response("content-length: not a number of bytes", 400)(
                    scope, receive, send)
                return
            if int(text) > self.limit:
                await self._too_large(f"{int(text)} bytes (content-length)")(
                    scope, receive, send)
                return
        held: list[Any] = []
        size = 0
        while True:
            message = await receive()
            held.append(message)
            if message["type"] != "http.request":
                break  # a disconnect: the application sees it as it would have
            size += len(message.get("body", b""))
            if size > self.limit:
                await self._too_large(f"more than {self.limit} bytes")(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Any:
            return held.pop(0) if held else await receive()

        await self.app(scope, replay, send)
