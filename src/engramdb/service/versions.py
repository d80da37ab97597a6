"""Record versions over HTTP: a resource's version is its ``ETag`` (``"3"``), and a write that
sends ``If-Match`` with it changes only that version (``409 version_conflict`` otherwise).

``If-Match: *`` asks only that the resource exists; ``If-None-Match: *`` (plan state) that
nothing is there yet. A weak tag (``W/"3"``) is taken as its
version too: versions are exact, so there is nothing weaker to compare.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from fastapi import Header, Response

from engramdb.core.errors import ValidationError

#: The ``If-Match`` header of a write: the version the caller read.
IfMatch = Annotated[
    str | None,
    Header(
        alias="If-Match",
        max_length=64,
        description='Write only over this version of the resource (its ETag, e.g. "3")',
    ),
]
#: ``If-None-Match: *`` on a write: only if there is nothing yet.
IfNoneMatch = Annotated[
    Literal["*"] | None,
    Header(alias="If-None-Match", description="`*`: write only if nothing is there yet"),
]
_TAG = re.compile(r'^(?:W/)?"?([1-9][0-9]{0,17})"?$')


def expected_version(if_match: str | None) -> int | None:
    """The version an ``If-Match`` header names (``None``: none, or ``*``).

    Raises:
        ValidationError: the header is not one version tag.
    """
    if if_match is None or if_match.strip() == "*":
        return None
    found = _TAG.match(if_match.strip())
    if found is None:
        raise ValidationError(
            'If-Match must be one version tag such as "3" (the ETag of a read)',
            header="If-Match",
        )
    return int(found.group(1))


def set_etag(response: Response, version: int | None) -> None:
    """Answer with the resource's version as its ``ETag``."""
    if version is not None:
        response.headers["ETag"] = f'"{version}"'
