"""Tag filter expressions: ``*`` (everything) or ``a||b||c``; SQL92 is not supported yet."""

from __future__ import annotations

from dataplane.errors import IllegalFilterExpression, NotImplementedYet
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb

__all__ = ("matches", "parse_filter", "parse_tag_expression")

_MAX_EXPRESSION = 1024


def parse_tag_expression(expression: str) -> frozenset[str] | None:
    """None means "every message"; otherwise the set of accepted tags."""
    text = expression.strip()
    if not text or text == "*":
        return None
    if len(text) > _MAX_EXPRESSION:
        raise IllegalFilterExpression(f"tag expression longer than {_MAX_EXPRESSION} characters")
    tags = frozenset(part.strip() for part in text.split("||") if part.strip())
    if not tags:
        raise IllegalFilterExpression(f"illegal tag expression {expression!r}")
    if "*" in tags:
        return None
    return tags


def parse_filter(expression: pb.FilterExpression | None) -> frozenset[str] | None:
    if expression is None:
        return None
    if expression.type == pb.FilterType.SQL:
        raise NotImplementedYet("SQL92 filters are not supported yet; use TAG expressions")
    return parse_tag_expression(expression.expression)


def matches(tags: frozenset[str] | None, tag: str | None) -> bool:
    return tags is None or (tag is not None and tag in tags)
