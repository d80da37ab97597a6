"""``BodyLimit``: refuses request bodies over the configured size with 413, before any
handler reads them — whether the client declares the size (``Content-Length``) or streams
the body in chunks."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engramdb.core.errors import ValueTooLargeError
from engramdb.service.errors import error_response


class BodyLimit:
    """ASGI middleware: at most ``max_bytes`` of request body."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self, size: int | None) -> ValueTooLargeError:
        return ValueTooLargeError(
            f"the request body is larger than {self.max_bytes} bytes",
            size=size,
            limit=self.max_bytes,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            size = int(declared) if declared.isdigit() else None
            await error_response(self._too_large(size))(scope, receive, send)
            return
        # Read the body here (at most max_bytes of it) and hand it on in one message.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await error_response(self._too_large(None))(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        whole: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([whole], receive), send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed
