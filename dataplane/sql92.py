"""SQL92 message filters, as RocketMQ's: ``a > 10 AND b = 'x'`` over a message's properties.

Grammar (keywords are case-insensitive)::

    expr       := and_expr (OR and_expr)*
    and_expr   := not_expr (AND not_expr)*
    not_expr   := NOT not_expr | predicate
    predicate  := '(' expr ')' | TRUE | FALSE
                | value ( cmp_op value
                        | [NOT] IN '(' literal (',' literal)* ')'
                        | [NOT] BETWEEN value AND value
                        | IS [NOT] NULL
                        | [NOT] LIKE string [ESCAPE string]
                        | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string )
    value      := identifier | literal
    literal    := 'string' ('' escapes a quote) | [-]integer | [-]decimal | TRUE | FALSE
    cmp_op     := = | <> | != | > | >= | < | <=

Identifiers (``[A-Za-z_$][A-Za-z0-9_$.]*``) name message properties; property values are strings.
Three-valued logic: a missing property is NULL, any comparison with NULL is unknown, and only a
definitely true expression matches. Comparison rules: against a number both sides compare as
numbers (a property value that is not a number makes the comparison unknown); against TRUE/FALSE the
value must be ``true``/``false`` (any case); two strings compare as strings, except that ``<``,
``<=``, ``>``, ``>=`` compare numerically when both parse as numbers.

The text is compiled once into a tree of closures (no ``eval``); :func:`compile_sql` caches by text.
Errors raise :class:`FilterSyntaxError` with the 0-based position and what was expected.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping

__all__ = ("MAX_DEPTH", "MAX_LENGTH", "FilterSyntaxError", "SqlFilter", "compile_sql")

MAX_LENGTH = 4096
MAX_DEPTH = 64

Value = str | int | float | bool | None
Props = Mapping[str, str]
Expr = Callable[[Props], Value]  # a boolean expression yields True, False or None (unknown)


class FilterSyntaxError(ValueError):
    """An invalid SQL92 filter; ``position`` is the 0-based offset in the expression text."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at position {position}")
        self.message = message
        self.position = position


# Tokens

_KEYWORDS = frozenset(
    {
        "AND",
        "OR",
        "NOT",
        "IN",
        "BETWEEN",
        "IS",
        "NULL",
        "LIKE",
        "ESCAPE",
        "TRUE",
        "FALSE",
        "CONTAINS",
        "STARTSWITH",
        "ENDSWITH",
    }
)
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_$][A-Za-z0-9_$.]*)
  | (?P<str>'(?:[^']|'')*')
  | (?P<op><>|!=|>=|<=|=|>|<|\(|\)|,|-)
    """,
    re.VERBOSE,
)
_NUMBER = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")


class _Token:
    __slots__ = ("kind", "pos", "text", "value")

    def __init__(self, kind: str, text: str, pos: int, value: Value = None) -> None:
        # kind: "ident", "str", "num", "op" (text is the operator), "kw" (text upper-cased), "end"
        self.kind, self.text, self.pos, self.value = kind, text, pos, value

    def describe(self) -> str:
        return "end of expression" if self.kind == "end" else repr(self.text)


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos] == "'":
                raise FilterSyntaxError("unterminated string literal", pos)
            raise FilterSyntaxError(f"unexpected character {text[pos]!r}", pos)
        kind = m.lastgroup
        raw = m.group()
        if kind == "num":
            if pos + len(raw) < n and (text[pos + len(raw)].isalpha() or text[pos + len(raw)] in "_$"):
                raise FilterSyntaxError(f"malformed number {raw + text[pos + len(raw)]!r}", pos)
            tokens.append(_Token("num", raw, pos, _to_number(raw)))
        elif kind == "ident":
            upper = raw.upper()
            if upper in _KEYWORDS:
                tokens.append(_Token("kw", upper, pos))
            else:
                tokens.append(_Token("ident", raw, pos, raw))
        elif kind == "str":
            tokens.append(_Token("str", raw, pos, raw[1:-1].replace("''", "'")))
        elif kind == "op":
            tokens.append(_Token("op", raw, pos))
        pos = m.end()
    tokens.append(_Token("end", "", n))
    return tokens


def _to_number(text: str) -> int | float:
    return int(text) if _INTEGER.fullmatch(text) else float(text)


def _as_number(value: Value) -> int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        return _to_number(value.strip())
    return None


# Evaluation helpers (three-valued logic: None is "unknown")


def _comparable(left: Value, right: Value, ordering: bool) -> tuple[object, object] | None:
    if left is None or right is None:
        return None
    if isinstance(left, bool) or isinstance(right, bool):
        lb, rb = _as_bool(left), _as_bool(right)
        if lb is None or rb is None or ordering:
            return None
        return lb, rb
    if isinstance(left, str) and isinstance(right, str):
        if ordering:
            ln, rn = _as_number(left), _as_number(right)
            if ln is not None and rn is not None:
                return ln, rn
        return left, right
    ln, rn = _as_number(left), _as_number(right)
    if ln is None or rn is None:
        return None
    return ln, rn


def _as_bool(value: Value) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered == "true":
            return True
        if lowered == "false":
            return False
    return None


_COMPARE: dict[str, Callable[[object, object], bool]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "!=": lambda a, b: a != b,
    ">": lambda a, b: a > b,  # type: ignore[operator]
    ">=": lambda a, b: a >= b,  # type: ignore[operator]
    "<": lambda a, b: a < b,  # type: ignore[operator]
    "<=": lambda a, b: a <= b,  # type: ignore[operator]
}


def _compare(op: str, left: Expr, right: Expr) -> Expr:
    fn = _COMPARE[op]
    ordering = op not in ("=", "<>", "!=")

    def compare(props: Props) -> Value:
        pair = _comparable(left(props), right(props), ordering)
        return None if pair is None else fn(pair[0], pair[1])

    return compare


def _negate(expr: Expr) -> Expr:
    def negate(props: Props) -> Value:
        v = expr(props)
        return None if v is None else not v

    return negate


def _all(parts: list[Expr]) -> Expr:
    def conjunction(props: Props) -> Value:
        unknown = False
        for part in parts:
            v = part(props)
            if v is False:
                return False
            if v is None:
                unknown = True
        return None if unknown else True

    return conjunction


def _any(parts: list[Expr]) -> Expr:
    def disjunction(props: Props) -> Value:
        unknown = False
        for part in parts:
            v = part(props)
            if v is True:
                return True
            if v is None:
                unknown = True
        return None if unknown else False

    return disjunction


def _like_regex(pattern: str, escape: str | None) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


# Parser (recursive descent; the precedence levels are the grammar's productions)


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0

    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def _next(self) -> _Token:
        tok = self.tokens[self.i]
        if tok.kind != "end":
            self.i += 1
        return tok

    def _error(self, expected: str) -> FilterSyntaxError:
        return FilterSyntaxError(f"expected {expected}, found {self.tok.describe()}", self.tok.pos)

    def _is_kw(self, *words: str) -> bool:
        return self.tok.kind == "kw" and self.tok.text in words

    def _is_op(self, *ops: str) -> bool:
        return self.tok.kind == "op" and self.tok.text in ops

    def _expect_kw(self, word: str) -> None:
        if not self._is_kw(word):
            raise self._error(word)
        self._next()

    def _expect_op(self, op: str) -> None:
        if not self._is_op(op):
            raise self._error(repr(op))
        self._next()

    def parse(self) -> Expr:
        if self.tok.kind == "end":
            raise self._error("an expression")
        expr = self._or()
        if self.tok.kind != "end":
            raise self._error("AND, OR or end of expression")
        return expr

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise FilterSyntaxError(f"expression nested deeper than {MAX_DEPTH} levels", self.tok.pos)

    def _or(self) -> Expr:
        parts = [self._and()]
        while self._is_kw("OR"):
            self._next()
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else _any(parts)

    def _and(self) -> Expr:
        parts = [self._not()]
        while self._is_kw("AND"):
            self._next()
            parts.append(self._not())
        return parts[0] if len(parts) == 1 else _all(parts)

    def _not(self) -> Expr:
        if self._is_kw("NOT"):
            self._next()
            self._enter()
            inner = self._not()
            self.depth -= 1
            return _negate(inner)
        return self._predicate()

    def _predicate(self) -> Expr:
        if self._is_op("("):
            self._next()
            self._enter()
            expr = self._or()
            self.depth -= 1
            self._expect_op(")")
            return expr
        if self._is_kw("TRUE", "FALSE"):
            after = self.tokens[self.i + 1]
            if not (after.kind == "op" and after.text in _COMPARE) and not (
                after.kind == "kw" and after.text in ("IN", "NOT", "BETWEEN", "IS", "LIKE")
            ):
                constant = self._next().text == "TRUE"
                return lambda props: constant
        left = self._value()
        tok = self.tok
        if tok.kind == "op" and tok.text in _COMPARE:
            self._next()
            return _compare(tok.text, left, self._value())
        if self._is_kw("IS"):
            self._next()
            negated = self._is_kw("NOT")
            if negated:
                self._next()
            self._expect_kw("NULL")
            if negated:
                return lambda props: left(props) is not None
            return lambda props: left(props) is None
        negated = self._is_kw("NOT")
        if negated:
            self._next()
        if self._is_kw("IN"):
            expr = self._in(left)
        elif self._is_kw("BETWEEN"):
            expr = self._between(left)
        elif self._is_kw("LIKE"):
            expr = self._like(left)
        elif self._is_kw("CONTAINS", "STARTSWITH", "ENDSWITH"):
            expr = self._string_test(left)
        elif negated:
            raise self._error("IN, BETWEEN, LIKE, CONTAINS, STARTSWITH or ENDSWITH after NOT")
        else:
            raise self._error(
                "a comparison operator, IN, BETWEEN, IS, LIKE, CONTAINS, STARTSWITH or ENDSWITH"
            )
        return _negate(expr) if negated else expr

    def _value(self) -> Expr:
        tok = self.tok
        if tok.kind == "ident":
            self._next()
            name = tok.text
            return lambda props: props.get(name)
        value = self._literal("a property name or a literal")
        return lambda props: value

    def _literal(self, expected: str) -> Value:
        tok = self.tok
        if tok.kind in ("str", "num"):
            self._next()
            return tok.value
        if self._is_kw("TRUE", "FALSE"):
            self._next()
            return tok.text == "TRUE"
        if self._is_op("-") and self.tokens[self.i + 1].kind == "num":
            self._next()
            number = self._next().value
            assert isinstance(number, int | float)
            return -number
        raise self._error(expected)

    def _string(self, what: str) -> str:
        tok = self.tok
        if tok.kind != "str":
            raise self._error(f"a string literal ({what})")
        self._next()
        assert isinstance(tok.value, str)
        return tok.value

    def _in(self, left: Expr) -> Expr:
        self._next()
        self._expect_op("(")
        values = [self._literal("a literal")]
        while self._is_op(","):
            self._next()
            values.append(self._literal("a literal"))
        self._expect_op(")")

        def member(props: Props) -> Value:
            v = left(props)
            if v is None:
                return None
            for candidate in values:
                pair = _comparable(v, candidate, False)
                if pair is not None and pair[0] == pair[1]:
                    return True
            return False

        return member

    def _between(self, left: Expr) -> Expr:
        self._next()
        low = self._value()
        self._expect_kw("AND")
        high = self._value()
        return _all([_compare(">=", left, low), _compare("<=", left, high)])

    def _like(self, left: Expr) -> Expr:
        self._next()
        pattern = self._string("the LIKE pattern")
        escape: str | None = None
        if self._is_kw("ESCAPE"):
            self._next()
            pos = self.tok.pos
            escape = self._string("the escape character")
            if len(escape) != 1:
                raise FilterSyntaxError("ESCAPE takes exactly one character", pos)
        regex = _like_regex(pattern, escape)

        def like(props: Props) -> Value:
            v = left(props)
            return None if v is None else regex.fullmatch(v if isinstance(v, str) else str(v)) is not None

        return like

    def _string_test(self, left: Expr) -> Expr:
        op = self._next().text
        needle = self._string(op)

        def test(props: Props) -> Value:
            v = left(props)
            if not isinstance(v, str):
                return None
            if op == "CONTAINS":
                return needle in v
            return v.startswith(needle) if op == "STARTSWITH" else v.endswith(needle)

        return test


class SqlFilter:
    """A compiled SQL92 filter; ``matches(properties)`` is True only when the expression is true."""

    __slots__ = ("_expr", "text")

    def __init__(self, text: str, expr: Expr) -> None:
        self.text = text
        self._expr = expr

    def matches(self, properties: Props) -> bool:
        return self._expr(properties) is True

    def __repr__(self) -> str:
        return f"SqlFilter({self.text!r})"


@functools.lru_cache(maxsize=1024)
def compile_sql(text: str) -> SqlFilter:
    """Compile (cached by text); raises :class:`FilterSyntaxError`."""
    if len(text) > MAX_LENGTH:
        raise FilterSyntaxError(f"expression longer than {MAX_LENGTH} characters", MAX_LENGTH)
    return SqlFilter(text, _Parser(text).parse())
