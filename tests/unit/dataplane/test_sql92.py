"""SQL92 filter expressions: parsing, three-valued evaluation, errors with positions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.sql92 import MAX_DEPTH, FilterSyntaxError, compile_sql

PROPS = {"a": "15", "b": "x", "c": "3.5", "flag": "TRUE", "name": "order_100%", "TAGS": "TagA", "neg": "-4"}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        pytest.param("a > 10 AND b = 'x'", True, id="and"),
        pytest.param("a > 20 OR b = 'x'", True, id="or"),
        pytest.param("a > 20 OR b = 'y'", False, id="or-false"),
        pytest.param("NOT a > 20", True, id="not"),
        pytest.param("not (a > 10 and b = 'x')", False, id="not-parens-lowercase"),
        pytest.param("a = 15", True, id="eq-number"),
        pytest.param("a = 15.0", True, id="eq-decimal"),
        pytest.param("a <> 15", False, id="ne"),
        pytest.param("a != 16", True, id="ne-bang"),
        pytest.param("a >= 15 AND a <= 15", True, id="ge-le"),
        pytest.param("a < 100", True, id="numeric-not-lexicographic"),
        pytest.param("c > 3 AND c < 4", True, id="decimal-property"),
        pytest.param("neg < -3", True, id="negative-literal"),
        pytest.param("b = 'x'", True, id="string-eq"),
        pytest.param("b > 'a'", True, id="string-order"),
        pytest.param("b > 10", False, id="string-vs-number-unknown"),
        pytest.param("a = '15'", True, id="string-literal-eq"),
        pytest.param("flag = TRUE", True, id="bool"),
        pytest.param("flag = FALSE", False, id="bool-false"),
        pytest.param("TRUE", True, id="bare-true"),
        pytest.param("FALSE OR a = 15", True, id="bare-false-or"),
        pytest.param("b IN ('x', 'y')", True, id="in"),
        pytest.param("b NOT IN ('x', 'y')", False, id="not-in"),
        pytest.param("a IN (1, 15)", True, id="in-numbers"),
        pytest.param("a BETWEEN 10 AND 20", True, id="between"),
        pytest.param("a BETWEEN 16 AND 20", False, id="between-out"),
        pytest.param("a NOT BETWEEN 16 AND 20", True, id="not-between"),
        pytest.param("missing IS NULL", True, id="is-null"),
        pytest.param("a IS NULL", False, id="is-null-present"),
        pytest.param("a IS NOT NULL", True, id="is-not-null"),
        pytest.param("name LIKE 'order%'", True, id="like-percent"),
        pytest.param("name LIKE 'order_1__%'", True, id="like-underscore"),
        pytest.param("name LIKE 'order'", False, id="like-whole-string"),
        pytest.param("name NOT LIKE 'x%'", True, id="not-like"),
        pytest.param("name LIKE '%!%' ESCAPE '!'", True, id="like-escape"),
        pytest.param("b LIKE '%!%' ESCAPE '!'", False, id="like-escape-no-match"),
        pytest.param("name CONTAINS '_10'", True, id="contains"),
        pytest.param("name STARTSWITH 'order'", True, id="startswith"),
        pytest.param("name ENDSWITH '%'", True, id="endswith"),
        pytest.param("name NOT CONTAINS 'zz'", True, id="not-contains"),
        pytest.param("TAGS = 'TagA'", True, id="tags"),
        pytest.param("missing > 1", False, id="null-compare"),
        pytest.param("NOT missing > 1", False, id="not-null-stays-unknown"),
        pytest.param("missing > 1 OR a = 15", True, id="unknown-or-true"),
        pytest.param("missing > 1 AND a = 15", False, id="unknown-and-true"),
        pytest.param("missing IN ('x')", False, id="null-in"),
        pytest.param("missing NOT IN ('x')", False, id="null-not-in"),
        pytest.param("missing LIKE '%'", False, id="null-like"),
        pytest.param("((a > 10))", True, id="nested-parens"),
        pytest.param("b = 'it''s'", False, id="quote-escape"),
    ],
)
def test_evaluate(expression: str, expected: bool) -> None:
    assert compile_sql(expression).matches(PROPS) is expected


def test_quote_escape_value() -> None:
    assert compile_sql("q = 'it''s'").matches({"q": "it's"})


def test_compile_cache() -> None:
    assert compile_sql("a > 1") is compile_sql("a > 1")


@pytest.mark.parametrize(
    ("expression", "position", "fragment"),
    [
        pytest.param("", 0, "expected an expression", id="empty"),
        pytest.param("a >", 3, "expected a property name or a literal", id="missing-operand"),
        pytest.param("a > 10 AND", 10, "expected a property name or a literal", id="dangling-and"),
        pytest.param("a 10", 2, "expected a comparison operator", id="missing-operator"),
        pytest.param("(a > 1", 6, "expected ')'", id="unclosed-paren"),
        pytest.param("a > 1)", 5, "expected AND, OR or end of expression", id="extra-paren"),
        pytest.param("b = 'x", 4, "unterminated string literal", id="unterminated"),
        pytest.param("a # 1", 2, "unexpected character '#'", id="bad-char"),
        pytest.param("a IN ()", 6, "expected a literal", id="empty-in"),
        pytest.param("a IN (b)", 6, "expected a literal", id="in-identifier"),
        pytest.param("a BETWEEN 1 OR 2", 12, "expected AND", id="between-without-and"),
        pytest.param("a IS 1", 5, "expected NULL", id="is-not-null-literal"),
        pytest.param("a LIKE b", 7, "expected a string literal", id="like-identifier"),
        pytest.param("a LIKE 'x' ESCAPE 'ab'", 18, "exactly one character", id="escape-too-long"),
        pytest.param("a NOT = 1", 6, "after NOT", id="not-then-operator"),
        pytest.param("10abc = 1", 0, "malformed number", id="malformed-number"),
        pytest.param("a > 10 b = 1", 7, "expected AND, OR", id="missing-conjunction"),
    ],
)
def test_errors(expression: str, position: int, fragment: str) -> None:
    with pytest.raises(FilterSyntaxError) as err:
        compile_sql(expression)
    assert err.value.position == position
    assert fragment in str(err.value)


def test_depth_limit() -> None:
    with pytest.raises(FilterSyntaxError, match="nested deeper"):
        compile_sql("(" * (MAX_DEPTH + 1) + "a = 1" + ")" * (MAX_DEPTH + 1))
    with pytest.raises(FilterSyntaxError, match="nested deeper"):
        compile_sql("NOT " * (MAX_DEPTH + 1) + "a = 1")
    assert compile_sql("(" * 10 + "a = 15" + ")" * 10).matches(PROPS)


def test_long_flat_expression() -> None:
    text = " OR ".join(f"a = {i}" for i in range(300))
    assert compile_sql(text).matches({"a": "299"})


_WORDS = [
    *("AND", "OR", "NOT", "IN", "IS", "NULL", "LIKE", "ESCAPE", "BETWEEN", "TRUE", "CONTAINS"),
    *(" a ", " 'x' "),
]
_ALPHABET = st.sampled_from([*"ab1 0'().,-=<>!%_$#\t", *_WORDS])


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(_ALPHABET, max_size=30).map("".join)))
def test_random_text_only_raises_syntax_errors(text: str) -> None:
    try:
        f = compile_sql(text)
    except FilterSyntaxError as exc:
        assert 0 <= exc.position <= max(len(text), 0) or exc.position == len(text)
        return
    for props in ({}, {"a": "1", "b": "x"}, {"a": "abc", "b": "1e3"}):
        assert f.matches(props) in (True, False)
