"""``EngramModel``: the pydantic base of every public data type.

It turns pydantic's validation failures into Engram's own typed ``ValidationError`` so callers
catch one error tree, whatever layer rejected their input.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from engramdb.core.errors import ValidationError


def describe_pydantic_error(exc: PydanticValidationError) -> tuple[str, list[dict[str, Any]]]:
    """A one-line message and structured field errors for a pydantic failure."""
    fields = [
        {"field": ".".join(str(part) for part in err["loc"]) or "(root)", "problem": err["msg"]}
        for err in exc.errors(include_url=False, include_input=False)
    ]
    first = fields[0]
    more = f" (and {len(fields) - 1} more)" if len(fields) > 1 else ""
    return f"{exc.title}: {first['field']}: {first['problem']}{more}", fields


class EngramModel(BaseModel):
    """Base model whose validation errors are ``engramdb.ValidationError``.

    The conversion happens where validation is asked for (construction and the
    ``model_validate*`` class methods), not in a validator: a validator would run for every
    nested model on every write, and a nested failure keeps its full field path this way.
    """

    def __init__(self, /, **data: Any) -> None:
        try:  # not `with typed_errors()`: this runs on every write, a context manager costs
            super().__init__(**data)
        except PydanticValidationError as exc:
            message, fields = describe_pydantic_error(exc)
            raise ValidationError(message, fields=fields) from exc

    # Marks this __init__ as plain construction (as pydantic marks its own): nested models are
    # then validated by pydantic-core alone, without a Python call each.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def model_validate(cls, obj: Any, **options: Any) -> Self:
        with typed_errors():
            return super().model_validate(obj, **options)

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **options: Any) -> Self:
        with typed_errors():
            return super().model_validate_json(json_data, **options)

    @classmethod
    def model_validate_strings(cls, obj: Any, **options: Any) -> Self:
        with typed_errors():
            return super().model_validate_strings(obj, **options)


@contextmanager
def typed_errors() -> Iterator[None]:
    """Turn a pydantic failure inside the block into Engram's ``ValidationError``."""
    try:
        yield
    except PydanticValidationError as exc:
        message, fields = describe_pydantic_error(exc)
        raise ValidationError(message, fields=fields) from exc
