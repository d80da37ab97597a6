"""How the client turns an error answer back into the error the service raised.

The service answers every error as ``{"error": code, "message": …, "details": {…}}`` with
the ``code`` of an ``EngramError`` class; the client raises that class (found by its code in
the error tree), so callers catch the same errors remotely as in process. An unknown code
falls back by status: 4xx → ``UsageError``, else ``EngramRuntimeError``. A service that
cannot be reached is ``ServiceUnavailableError``.
"""

from __future__ import annotations

from typing import Any

import httpx

from engramdb.core.errors import EngramError, EngramRuntimeError, UsageError


class ServiceUnavailableError(EngramRuntimeError):
    """The service could not be reached, or did not answer in time."""

    code = "service_unavailable"


def _tree(root: type[EngramError]) -> dict[str, type[EngramError]]:
    found = {root.code: root}
    for sub in root.__subclasses__():
        for code, kind in _tree(sub).items():
            found.setdefault(code, kind)
    return found


def error_class(code: str, status: int) -> type[EngramError]:
    """The error class of ``code`` (or of ``status`` when the code is unknown)."""
    known = _tree(EngramError)
    if code in known:
        return known[code]
    return UsageError if 400 <= status < 500 else EngramRuntimeError


def raise_for_answer(response: httpx.Response) -> None:
    """Raise the typed error an error answer stands for; nothing for a success."""
    if response.status_code < 400:
        return
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"message": response.text[:300] or response.reason_phrase}
    details = body.get("details") if isinstance(body.get("details"), dict) else {}
    kind = error_class(str(body.get("error", "")), response.status_code)
    # The root's constructor, not the class's own: a subclass may take other arguments
    # (``ForgetInstructionError(instruction, reason)``), the answer has the message made.
    error = kind.__new__(kind)
    EngramError.__init__(error, str(body.get("message", "")), **details)
    error.details.setdefault("status_code", response.status_code)
    raise error
