"""``Utf8Url``: refuses a request whose path or query string is not UTF-8 once its percent
escapes are decoded (``%ED%A0%80``, a lone surrogate; ``%FF``), with 422 ``invalid_value``.

The server decodes such bytes to U+FFFD replacement characters, so without this check a key,
plan or query holding them would be stored or searched as another, silently; a body's JSON
escapes of the same characters are refused as ``invalid_value`` too, so every part of a
request gets the same answer.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

from engramdb.core.errors import InvalidValueError
from engramdb.service.errors import error_response


def is_utf8(escaped: bytes) -> bool:
    """Whether percent-escaped ``escaped`` decodes to UTF-8 text (``+`` is a space)."""
    try:
        unquote_to_bytes(escaped.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class Utf8Url:
    """ASGI middleware: a path and a query string of UTF-8 text only."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for part, raw in (("path", scope.get("raw_path")), ("query", scope["query_string"])):
                if raw is not None and not is_utf8(raw):
                    refused = InvalidValueError(
                        f"the request {part} is not UTF-8 text (a lone surrogate, or bytes "
                        "that are no character)",
                        field=part,
                    )
                    await error_response(refused)(scope, receive, send)
                    return
        await self.app(scope, receive, send)
