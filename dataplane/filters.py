"""Subscription filters: TAG expressions (``*`` or ``a||b||c``) and SQL92 over message properties."""

from __future__ import annotations

from collections.abc import Mapping

from dataplane.errors import IllegalFilterExpression, NotImplementedYet
from dataplane.sql92 import FilterSyntaxError, SqlFilter, compile_sql
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb

__all__ = (
    "TAGS_PROPERTY",
    "MessageFilter",
    "compile_filter",
    "matches",
    "parse_filter",
    "parse_sql",
    "parse_tag_expression",
)

_MAX_EXPRESSION = 1024
TAGS_PROPERTY = "TAGS"  # the store property that holds the tag (produce.P_TAGS)


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


def parse_sql(expression: str) -> SqlFilter:
    """Compile a SQL92 filter; a syntax error is ILLEGAL_FILTER_EXPRESSION with the parser's message."""
    try:
        return compile_sql(expression)
    except FilterSyntaxError as exc:
        raise IllegalFilterExpression(f"illegal SQL92 filter expression: {exc}") from None


def parse_filter(expression: pb.FilterExpression | None) -> frozenset[str] | None:
    """Tag filters only (PullMessage); a SQL filter is validated, then NOT_IMPLEMENTED."""
    if expression is None:
        return None
    if expression.type == pb.FilterType.SQL:
        parse_sql(expression.expression)
        raise NotImplementedYet("SQL92 filters are supported by ReceiveMessage only; use TAG expressions")
    return parse_tag_expression(expression.expression)


class MessageFilter:
    """A compiled subscription filter.

    ``tags`` goes to the store as its tag pre-filter (None: every tag). ``sql`` is None for tag
    filters; otherwise ``accepts(properties)`` must be asked of each message the store returns.
    """

    __slots__ = ("sql", "tags")

    def __init__(self, tags: frozenset[str] | None, sql: SqlFilter | None = None) -> None:
        self.tags = tags
        self.sql = sql

    def accepts(self, properties: Mapping[str, str]) -> bool:
        if self.sql is not None:
            return self.sql.matches(properties)
        return matches(self.tags, properties.get(TAGS_PROPERTY))


EVERYTHING = MessageFilter(None)


def compile_filter(expression: pb.FilterExpression | None) -> MessageFilter:
    """TAG (or no expression) → tag set; SQL → compiled SQL92 (ILLEGAL_FILTER_EXPRESSION if invalid)."""
    if expression is None:
        return EVERYTHING
    if expression.type == pb.FilterType.SQL:
        return MessageFilter(None, parse_sql(expression.expression))
    tags = parse_tag_expression(expression.expression)
    return EVERYTHING if tags is None else MessageFilter(tags)


def matches(tags: frozenset[str] | None, tag: str | None) -> bool:
    return tags is None or (tag is not None and tag in tags)
