"""What every answer of the web app shares: JSON encoding (numpy values, NaN as null),
the one-line error answer, the Content-Security-Policies, and :class:`Guard`, the
middleware that checks the ``Host`` header and puts the security headers on."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.responses import Response

from aifabric.errors import SpecError

__all__ = ["CONTROL", "FILE_CSP", "PAGE_CSP", "Guard", "NotFound", "encode", "error_response",
           "json_response"]

#: the page's Content-Security-Policy (also in index.html's <meta>): this origin only
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; "
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
#: a file of the run folder or the API page: no script at all
FILE_CSP = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox"
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
