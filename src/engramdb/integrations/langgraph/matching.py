"""The pure rules of a store search and a namespace listing: value filters (exact and
nested matches, ``$eq`` ``$ne`` ``$gt`` ``$gte`` ``$lt`` ``$lte``, as LangGraph's stores
compare JSON values) and namespace match conditions (prefix or suffix, ``*`` any label)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from engramdb.core.errors import ValidationError

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def check_filter(conditions: Mapping[str, Any] | None) -> None:
    """Raise ``ValidationError`` if ``conditions`` names an operator no store knows."""
    for condition in (conditions or {}).values():
        if isinstance(condition, Mapping):
            for name, nested in condition.items():
                if name.startswith("$") and name not in OPERATORS:
                    raise ValidationError(
                        f"unsupported filter operator {name!r}; use one of {', '.join(OPERATORS)}",
                        operator=name,
                    )
                if not name.startswith("$"):
                    check_filter({name: nested})


def matches(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    """Whether an item's ``value`` satisfies every condition of the filter."""
    return all(_compare(value.get(name), wanted) for name, wanted in (conditions or {}).items())


def _compare(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(name.startswith("$") for name in wanted):
            return all(_apply(found, name, operand) for name, operand in wanted.items())
        return isinstance(found, Mapping) and all(
            _compare(found.get(name), nested) for name, nested in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(found, list | tuple)
            and len(found) == len(wanted)
            and all(_compare(f, w) for f, w in zip(found, wanted, strict=True))
        )
    return bool(found == wanted)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _apply(found: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(found == operand)
    if operator == "$ne":
        return bool(found != operand)
    left, right = _number(found), _number(operand)
    if left is None or right is None:
        return False  # an ordering of a missing or non-numeric value holds for nothing
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    return left <= right


def namespace_matches(
    namespace: Sequence[str], kind: Literal["prefix", "suffix"], path: Sequence[str]
) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) with ``path``, a ``*``
    label matching any label."""
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if kind == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    return all(wanted in ("*", label) for label, wanted in pairs)
