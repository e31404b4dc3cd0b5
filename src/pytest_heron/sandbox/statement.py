"""What a predicted statement is and reads: the guard that accepts exactly one read-only query.

PostgreSQL's own parser (libpg_query for PostgreSQL 16, through ``pglast``) decides how many
statements there are, what kind each is, and whether a clause could write or lock (``INTO``,
``FOR UPDATE``/``SHARE``, a data-modifying ``WITH``): where comments end, how strings and dollar
quotes close, is then what the server does, not what a hand tokeniser guesses. sqlglot parses
the statement too (the checks below are applied to its tree as well, and the exact-match and
table-set figures use it), so a statement either parser refuses is rejected.

The guard never raises: whatever text it is given (truncated strings, dollar quotes or comments,
deep nesting, lone surrogates, tens of megabytes), the answer is None or the reason for a
rejection. Length, NUL bytes and encoding are checked before parsing; the parse itself runs on
a step budget (Python calls counted by a profile hook), so input that makes sqlglot recurse or
backtrack without end is rejected in bounded time, the same way on every machine.
"""

from __future__ import annotations

import re
import sys
from types import FrameType
from typing import Any, cast

import sqlglot
from pglast.parser import ParseError as PgParseError
from pglast.parser import parse_sql_json
from pglast.parser import split as pg_split
from sqlglot import exp

MAX_SQL_CHARS = 100_000
"""The longest prediction the guard parses; anything longer is rejected unread."""

PARSE_STEPS_BASE = 250_000
PARSE_STEPS_PER_CHAR = 50
"""A parse may take ``PARSE_STEPS_BASE + PARSE_STEPS_PER_CHAR * len(sql)`` profile events
(Python and C calls and returns). Real queries take 16-30 per character (sqlglot's first call
~50,000 more), so every query up to MAX_SQL_CHARS fits; nested ``ARRAY[``, which makes sqlglot
backtrack exponentially, is stopped after a few hundred thousand."""

_WRITES = (
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Merge,
    exp.Create,
    exp.Drop,
    exp.Alter,
    exp.Command,
    exp.Into,
    exp.Lock,
    exp.Set,
)


_QUERIES = (exp.Select, exp.SetOperation, exp.Values, exp.Subquery)


class _OutOfSteps(BaseException):
    """Raised by the profile hook; a BaseException so no ``except Exception`` in sqlglot eats it."""


def _parse_within(sql_text: str, steps: int) -> list[Any]:
    """``sqlglot.parse`` that raises _OutOfSteps after ``steps`` profile events."""
    left = steps

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal left
        left -= 1
        if left < 0:
            raise _OutOfSteps

    previous = sys.getprofile()
    if previous is not None:  # someone is profiling: leave their hook alone, parse unbounded
        return sqlglot.parse(sql_text, read="postgres")
    sys.setprofile(hook)
    try:
        return sqlglot.parse(sql_text, read="postgres")
    finally:
        sys.setprofile(None)


def _steps(sql_text: str) -> int:
    return PARSE_STEPS_BASE + PARSE_STEPS_PER_CHAR * len(sql_text)


def _first_line(exc: BaseException, default: str) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else default)[:300]


def _check_text(sql_text: object) -> str | None:
    """What is refused before any parsing: not text, too long, a NUL byte, not UTF-8."""
    if not isinstance(sql_text, str):
        return f"the SQL is not text but {type(sql_text).__name__}"
    if len(sql_text) > MAX_SQL_CHARS:
        return (
            f"the SQL is {len(sql_text):,} characters long, over the limit of"
            f" {MAX_SQL_CHARS:,}; it was not parsed"
        )
    if "\x00" in sql_text:
        return "the SQL contains a NUL byte"
    try:
        sql_text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"the SQL is not valid Unicode text (code point U+{ord(sql_text[exc.start]):04X}"
            f" at character {exc.start:,} cannot be encoded as UTF-8)"
        )
    return None


def check_statement(sql_text: str) -> str | None:
    """None if ``sql_text`` is exactly one read-only query; else why it is rejected. Never
    raises (a comment after the final ``;`` is part of the one statement)."""
    reason = _check_text(sql_text)
    if reason is not None:
        return reason
    try:
        return _check_parsed(sql_text)
    except _OutOfSteps:
        steps = _steps(sql_text)
        return f"the SQL is too complex to check: parsing it took more than {steps:,} steps"
    except RecursionError:
        return "the SQL is nested too deeply to parse"
    except sqlglot.errors.TokenError as exc:
        return (
            "the SQL does not tokenize as PostgreSQL (an unterminated string, quoted name,"
            f" dollar quote or comment?): {_first_line(exc, 'token error')}"
        )
    except sqlglot.errors.ParseError as exc:
        return f"the SQL does not parse as PostgreSQL: {_first_line(exc, 'parse error')}"
    except Exception as exc:  # sqlglot bugs on odd input are rejections, not crashes
        return f"the SQL could not be parsed ({type(exc).__name__}: {_first_line(exc, '')})"


_PG_WRITES = {  # keys of PostgreSQL's parse tree (as JSON) that write or lock, anywhere
    "InsertStmt": "INSERT",
    "UpdateStmt": "UPDATE",
    "DeleteStmt": "DELETE",
    "MergeStmt": "MERGE",
    "intoClause": "INTO",
    "lockingClause": "FOR UPDATE/SHARE",
}
# A key in the JSON text: inside a JSON string a quote is escaped, so `"name":` cannot come from
# a string literal of the SQL. The text is searched, not loaded: 2,000 UNION ALLs nest too deep
# for json.loads.
_PG_WRITE_KEY = re.compile('"(' + "|".join(_PG_WRITES) + ')":')
_PG_FIRST_KIND = re.compile(r'\{"version":\d+,"stmts":\[\{"stmt":\{"(\w+)":')


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _pg_parse(sql_text: str) -> tuple[tuple[str, ...], str]:
    """The statements and the JSON parse tree of libpg_query, or its :class:`PgParseError`.

    PostgreSQL's scanner can quote the token at an error cut inside a multi-byte character
    (``SELECT 1é``: trailing junk "1" plus the first byte of "é"), and pglast then fails to
    decode its own message (UnicodeDecodeError). That error is raised here as the parse error
    it is, worded as pglast words its others and the browser's guard words this one: the
    message's bytes decoded with replacement characters, and the index pglast derives from
    PostgreSQL's cursor (which counts characters, while pglast takes it for a byte offset and
    gives the index of the character holding that byte). The cursor comes from the same text
    with every non-ASCII character made an ASCII letter: the same character positions and
    the same tokens, as the scanner takes both for identifier characters."""
    try:
        return tuple(pg_split(sql_text, with_parser=True)), parse_sql_json(sql_text)
    except UnicodeDecodeError as exc:
        message = bytes(exc.object).decode("utf-8", "replace")
        try:
            parse_sql_json(_NON_ASCII.sub("q", sql_text))
        except PgParseError as plain:
            cursor = plain.args[1] if len(plain.args) > 1 else None
            at = _char_holding_byte(sql_text, cursor) if isinstance(cursor, int) else None
            raise (PgParseError(message) if at is None else PgParseError(message, at)) from None
        raise PgParseError(message) from None


def _char_holding_byte(text: str, offset: int) -> int | None:
    """The index of the character of ``text`` whose UTF-8 bytes include byte ``offset``, or
    None outside the text (pglast's reading of an error cursor).

    >>> _char_holding_byte("é1", 1), _char_holding_byte("é1", 2), _char_holding_byte("é1", 3)
    (0, 1, None)
    """
    if offset < 0:
        return None
    end = 0
    for index, char in enumerate(text):
        end += len(char.encode())
        if offset < end:
            return index
    return None


def _check_postgres(sql_text: str) -> str | None:
    """The verdict of PostgreSQL's own parser (see the module docstring)."""
    try:
        statements, tree = _pg_parse(sql_text)
    except PgParseError as exc:
        text = _first_line(exc, "syntax error")
        if "unterminated" in text:
            return (
                "the SQL does not tokenize as PostgreSQL (an unterminated string, quoted name,"
                f" dollar quote or comment?): {text}"
            )
        if "stack depth" in text:
            return "the SQL is nested too deeply to parse"
        return f"the SQL does not parse as PostgreSQL: {text}"
    if len(statements) != 1:
        return f"expected exactly one statement, got {len(statements)}"
    first = _PG_FIRST_KIND.match(tree)
    kind = first.group(1) if first else ""
    if kind != "SelectStmt":
        name = kind.removesuffix("Stmt").upper() or "an unknown statement"
        return f"only a SELECT, WITH, VALUES or set operation is accepted, not {name}"
    found = _PG_WRITE_KEY.search(tree)
    if found is not None:
        clause = _PG_WRITES[found.group(1)]
        return f"the query contains a {clause} clause, which could change data"
    return None


def check_with_postgres(sql_text: str) -> str | None:
    """The verdict of PostgreSQL's parser alone, without sqlglot's: what the browser runner's
    guard (browser/assets/guard.js, on the same parser in WebAssembly) decides, word for word.
    A statement it accepts may still be refused by :func:`check_statement`."""
    return _check_text(sql_text) or _check_postgres(sql_text)


def _check_parsed(sql_text: str) -> str | None:
    reason = _check_postgres(sql_text)
    if reason is not None:
        return reason
    # sqlglot gives None for an empty statement (";;") and a bare Semicolon for a statement
    # that is only a comment ("SELECT 1; -- done"): neither is a statement PostgreSQL runs.
    statements = [
        s
        for s in _parse_within(sql_text, _steps(sql_text))
        if s is not None and not isinstance(s, exp.Semicolon)
    ]
    if len(statements) != 1:
        return f"expected exactly one statement, got {len(statements)}"
    tree = statements[0]
    if not isinstance(tree, _QUERIES):
        return f"only a SELECT, WITH, VALUES or set operation is accepted, not {tree.key.upper()}"
    for node in tree.walk():
        if isinstance(node, _WRITES):
            return f"the query contains a {node.key.upper()} clause, which could change data"
    return None


def parse_sql(sql: str) -> exp.Expression:
    return cast(exp.Expression, sqlglot.parse_one(sql, read="postgres"))


def tables_read(sql: str) -> set[str]:
    """Schema-qualified tables a query reads (CTE names excluded)."""
    tree = parse_sql(sql)
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    out = set()
    for t in tree.find_all(exp.Table):
        if not t.name or (not t.db and t.name in ctes):
            continue
        out.add(f"{t.db}.{t.name}" if t.db else t.name)
    return out
