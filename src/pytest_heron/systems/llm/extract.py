"""The SQL query in a language model's free-text answer (:func:`extract_sql`); pure, no I/O."""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_OPEN_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*)\Z", re.DOTALL)
_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.DOTALL | re.IGNORECASE)
_PREFIX = re.compile(r"^\s*(?:sql(?:\s+query)?|query|answer)\s*:\s*", re.IGNORECASE)
_STARTS_QUERY = re.compile(
    r"\A\s*(?:--[^\n]*\n\s*|/\*.*?\*/\s*)*\(?\s*(SELECT|WITH)\b", re.I | re.S
)
_QUERY_START = re.compile(
    r"(?:^|(?<=\n)|(?<=:)|(?<=;)|(?<=`))[ \t]*(?:sql\s*:\s*)?\(?\s*(SELECT|WITH)\b", re.IGNORECASE
)
_QUERY_ANYWHERE = re.compile(r"\b(SELECT|WITH)\b", re.IGNORECASE)
_SQL_TAGS = frozenset({"sql", "postgres", "postgresql", "psql", "pgsql", "plpgsql"})
_CONTINUES = re.compile(  # words that may open a line inside a query, after a blank line
    r"(?:select|with|from|where|join|inner|left|right|full|cross|natural|on|using|group|order"
    r"|having|limit|offset|union|intersect|except|window|and|or|as|case|when|then|else|end"
    r"|fetch|lateral|values|not|in|exists|is|between|like|ilike)\b",
    re.IGNORECASE,
)


def _clean(sql: str) -> str:
    text = _PREFIX.sub("", sql.strip()).strip()
    text = text.strip("`").strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    return text


def _statement_end(text: str, start: int) -> int:
    """Index just past the statement beginning at ``start``: the first ``;`` outside quotes and
    comments, or a paragraph break followed by prose, or the end of the text."""
    i, n = start, len(text)
    while i < n:
        ch = text[i]
        if ch in ("'", '"'):
            j = text.find(ch, i + 1)
            while j != -1 and j + 1 < n and text[j + 1] == ch:  # doubled quote inside
                j = text.find(ch, j + 2)
            i = n if j == -1 else j + 1
            continue
        if text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j == -1 else j + 1
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j == -1 else j + 2
            continue
        if ch == ";":
            return i
        if ch == "\n":
            rest = text[i + 1 :]
            stripped = rest.lstrip(" \t")
            if stripped.startswith("\n"):  # a blank line: does SQL continue after it?
                follow = rest.strip()
                continues = follow.startswith((")", "(", "--", ",")) or bool(
                    _CONTINUES.match(follow)
                )
                if not continues:
                    return i
        i += 1
    return n


def _parses(sql: str) -> bool:
    try:
        import sqlglot

        return sqlglot.parse_one(sql, read="postgres") is not None
    except Exception:
        return False


def extract_sql(text: str | None) -> str:
    """The SQL query in a model's answer; ``""`` when there is none. Never raises.

    Rules, in order:

    1. ``<think>...</think>`` reasoning is dropped.
    2. Closed fenced blocks (```sql, ```postgresql or bare ```): the last one whose body is a
       SELECT/WITH query; else the last one tagged as SQL; else the last one.
    3. An unclosed fence (output cut off): its body to the end of the text.
    4. No fence: every SELECT/WITH that starts a line (or follows a colon or ``;``) begins a
       candidate that runs to the first ``;`` outside quotes and comments, or to a blank line
       followed by prose (a query nested in an earlier candidate belongs to it). The last
       candidate that parses as PostgreSQL (sqlglot) wins; else the last parsing candidate
       starting at a SELECT/WITH anywhere in the text (``The answer is SELECT ...``); else the
       last line-start candidate.
    5. Otherwise there is no query: ``""``.

    The result has ``SQL:``-style prefixes, surrounding whitespace and trailing semicolons
    removed.

    >>> extract_sql("Here you go:\\n```sql\\nSELECT 1;\\n```\\nHope it helps.")
    'SELECT 1'
    >>> extract_sql("SQL: SELECT name FROM t WHERE x = 'a;b';")
    "SELECT name FROM t WHERE x = 'a;b'"
    """
    try:
        return _extract(text or "")
    except Exception:  # pragma: no cover - a safety net; the rules above do not raise
        return (text or "").strip()


def _extract(text: str) -> str:
    text = _THINK.sub("", text)
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    if blocks:
        queries = [body for _, body in blocks if _STARTS_QUERY.match(_PREFIX.sub("", body))]
        if queries:
            return _clean(queries[-1])
        tagged = [body for tag, body in blocks if tag in _SQL_TAGS]
        return _clean(tagged[-1] if tagged else blocks[-1][1])
    if "```" in text:
        opened = _OPEN_FENCE.search(text)
        if opened is not None:
            return _clean(opened.group(2))
    starts = _candidates(text, _QUERY_START)
    parsed = [c for c in starts if _parses(c)]
    if parsed:
        return parsed[-1]
    anywhere = [c for c in _candidates(text, _QUERY_ANYWHERE) if _parses(c)]
    if anywhere:
        return anywhere[-1]
    return starts[-1] if starts else ""


def _candidates(text: str, pattern: re.Pattern[str]) -> list[str]:
    """Non-overlapping statements starting where ``pattern`` finds SELECT/WITH (a query nested
    in an earlier candidate is part of it, not a candidate of its own)."""
    found: list[str] = []
    pos = 0
    while True:
        m = pattern.search(text, pos)
        if m is None:
            return found
        start = m.start(1)
        if text[:start].rstrip().endswith("("):  # keep a parenthesised query whole
            start = text.rfind("(", 0, start)
        end = _statement_end(text, start)
        cleaned = _clean(text[start:end])
        if cleaned:
            found.append(cleaned)
        pos = max(end, m.end())
