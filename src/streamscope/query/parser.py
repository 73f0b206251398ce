"""Query text in, validated :class:`Query` values out; every failure is a :class:`QueryError`.

lark's exceptions are translated here into "expected X after Y, found Z" with line and column.
"""

from __future__ import annotations

import contextlib
import functools
from importlib import resources
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from streamscope.core.config import CACHE_DIR
from streamscope.core.errors import QueryError
from streamscope.query.ast import Query
from streamscope.query.metrics import METRIC_NAMES
from streamscope.query.semantics import TreeReader

__all__ = ["as_query", "parse_queries", "parse_query"]

_END = ("$END", "_NL")

#: How each terminal is named in "expected ..." messages.
_WORDS: dict[str, str] = {  # in the order they are listed
    "NAME": "a name",
    "STRING": "a quoted name",
    "NUMBER": "a number",
    "UNIT": "a unit (ns, us, ms, s or m)",
    "_ARROW": "'->'",
    "_PATH": "'~>'",
    "_DOTDOT": "'..'",
    "EQUAL": "'='",
    "LPAR": "'('",
    "LSQB": "'['",
    "COLON": "':'",
    "COMMA": "','",
    "RSQB": "']'",
    "RPAR": "')'",
    "_EVERY": "'every'",
}


@functools.cache
def _lark() -> Lark:
    """The query parser, its tables kept in the cache directory (``core.config.CACHE_DIR``:
    Lark checks they were made from this grammar by this Lark, else makes them again; where
    nothing can be kept it makes them each time, ~20 ms)."""
    grammar = resources.files("streamscope.query").joinpath("grammar.lark").read_text("utf-8")
    with contextlib.suppress(OSError):
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
    return Lark(
        grammar,
        parser="lalr",
        start=["file", "single"],
        propagate_positions=True,
        maybe_placeholders=False,
        cache=str(CACHE_DIR / "query-grammar.lark"),
    )


def parse_query(text: str, *, source: str = "query", line_offset: int = 0) -> Query:
    """One query (blank lines and ``#`` comments around it are allowed).

    ``line_offset`` is added to reported line numbers, for a query taken from a larger file.
    """
    tree = _parse(text, "single", source, line_offset)
    return TreeReader(text, source, line_offset).query(tree.children[0])


def parse_queries(text: str, *, source: str = "queries") -> list[Query]:
    """Every query in ``text``, one per line; blank lines and ``#`` comments are skipped."""
    tree = _parse(text, "file", source, 0)
    reader = TreeReader(text, source, 0)
    return [reader.query(child) for child in tree.children]


def as_query(query: Query | str, *, source: str = "query") -> Query:
    """``query`` itself when it is a :class:`Query`, else the query its text parses to."""
    return query if isinstance(query, Query) else parse_query(query, source=source)


def _parse(text: str, start: str, source: str, line_offset: int) -> Tree[Any]:
    interactive = _lark().parse_interactive(text, start=start)
    seen: list[Token] = []
    try:
        # One token at a time, so that on a failure ``seen`` holds what came before it.
        for token in interactive.iter_parse():
            seen.append(token)  # noqa: PERF402
        tree: Tree[Any] = interactive.feed_eof(seen[-1] if seen else None)  # type: ignore[no-untyped-call]
    except UnexpectedInput as e:
        message, line, column = _describe(e, seen, text)
        raise QueryError(
            message,
            text="\n" * line_offset + text,
            line=line + line_offset,
            column=column,
            source=source,
        ) from None
    return tree


def _describe(e: UnexpectedInput, seen: list[Token], text: str) -> tuple[str, int, int]:
    """(message, line, column) for a syntax error, naming what was found and what fits there."""
    if isinstance(e, UnexpectedToken):
        token = e.token
        if seen and seen[-1] is token:
            seen = seen[:-1]  # the parser rejected the token the lexer just handed it
        expected = set(e.expected)
        if token.type == "$END":
            found = "end of line"
            line, column = _end_of(seen)
        else:
            found = "end of line" if token.type == "_NL" else f"'{token.value}'"
            line, column = _start_of(token)
    elif isinstance(e, UnexpectedCharacters):
        expected = set(e.allowed or ())
        found = f"'{e.char}'"
        line, column = e.line, e.column
    else:  # pragma: no cover - LALR raises only the two above
        return f"cannot read this query: {e}", e.line or 1, e.column or 1
    prev = seen[-1] if seen else None
    if prev is not None and prev.type == "NAME" and prev.value == "every" and len(seen) > 1:
        # `every` right after ':' or ',' reads as an aggregation name; say what is missing.
        before = seen[-2]
        if before.type in ("COLON", "COMMA"):
            words = _expected_words({"NAME"}, before)
            return f"expected {words} after '{before.value}', found 'every'", *_start_of(prev)
    if prev is not None and prev.type == "_NL" and "NAME" not in expected:
        message = f"expected one query, found more from {found} on: use parse_queries for several"
        return message, line, column
    message = f"expected {_expected_words(expected, prev)}{_after(seen, text)}, found {found}"
    if found == "end of line" and all(t.type == "_NL" for t in seen):
        message = "empty query: expected METRIC(TARGET), e.g. occupancy(source -> server)"
    return message, line, column


def _start_of(token: Token) -> tuple[int, int]:
    return token.line or 1, token.column or 1


def _end_of(seen: list[Token]) -> tuple[int, int]:
    for token in reversed(seen):
        if token.type != "_NL":
            return token.end_line or 1, token.end_column or 1
    return 1, 1


def _expected_words(expected: set[str], prev: Token | None) -> str:
    if "NAME" in expected and (prev is None or prev.type == "_NL"):
        return f"a metric ({', '.join(METRIC_NAMES)})"
    if expected == {"NAME"}:
        return "an aggregation (count, sum, min, max, mean, duty, pNN, quantiles, histogram)"
    if prev is not None and prev.type == "_EVERY":
        return "a duration such as 500ms or 1s"
    words: list[str] = []
    if {"NAME", "STRING"} <= expected:
        words.append("a stage name")
        expected = expected - {"NAME", "STRING"}
    order = list(_WORDS)
    words += [_WORDS[t] for t in sorted(expected - set(_END), key=_order_key(order))]
    if expected & set(_END):
        words.append("end of line")
    if len(words) == 1:
        return words[0]
    return f"{', '.join(words[:-1])} or {words[-1]}"


def _order_key(order: list[str]) -> Any:
    return lambda t: (order.index(t) if t in order else len(order), t)


def _after(seen: list[Token], text: str) -> str:
    """`` after 'X'`` naming the last token read (a number and its unit read as one)."""
    tokens = [t for t in seen if t.type != "_NL"]
    if not tokens or seen[-1].type == "_NL":
        return ""
    last = tokens[-1]
    if last.type == "UNIT" and len(tokens) > 1 and tokens[-2].type == "NUMBER":
        start, end = tokens[-2].start_pos, last.end_pos
        if start is not None and end is not None:
            return f" after '{text[start:end]}'"
    return f" after '{last.value}'"
