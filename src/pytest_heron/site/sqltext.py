"""SQL shown to people: laid out, coloured, and compared line by line with gold. Pure.

- :func:`layout` keeps SQL that already has line breaks as it was written (an author's or a
  tool's layout says something) and lays out one-line SQL longer than :data:`ONE_LINE` with
  sqlglot's pretty printer; SQL that sqlglot cannot read is kept as written.
- :func:`highlight` gives HTML (escaped) with keywords, strings, numbers and comments wrapped in
  ``<span class="k|s|n|c">``.
- :func:`diff` compares two statements after both are laid out by sqlglot (so that layout alone
  never shows as a difference) and gives ``(mark, line)`` pairs: ``" "`` same, ``"-"`` only in
  the first (gold), ``"+"`` only in the second (the prediction).

>>> layout("SELECT 1")
'SELECT 1'
>>> str(highlight("SELECT 'a<b' -- x"))
'<span class="k">SELECT</span> <span class="s">&#39;a&lt;b&#39;</span> <span class="c">-- x</span>'
>>> diff("SELECT a FROM t", "SELECT b FROM t")
[(' ', 'SELECT'), ('-', '  a'), ('+', '  b'), (' ', 'FROM t')]
"""

from __future__ import annotations

import difflib
import functools
import re

from markupsafe import Markup, escape

from pytest_heron.core.safe_text import printable

ONE_LINE = 100  # one-line SQL longer than this is laid out by sqlglot

KEYWORDS = frozenset(
    """
    all and any array as asc between by case cast coalesce count cross current_date
    current_timestamp date_trunc default desc distinct else end except exists extract false
    fetch filter first following from full group having ilike in inner intersect interval is
    join lateral left like limit not null nulls offset on or order outer over partition
    preceding range right row rows select some table then true union unbounded using values
    when where window with within
    """.split()  # noqa: SIM905  (a word list reads better as text)
)

_TOKEN = re.compile(
    r"(?P<c>--[^\n]*|/\*.*?(?:\*/|$))"
    r"|(?P<s>'(?:[^']|'')*(?:'|$))"
    r"|(?P<q>\"(?:[^\"]|\"\")*(?:\"|$))"
    r"|(?P<n>\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b)"
    r"|(?P<w>[A-Za-z_][A-Za-z0-9_$]*)",
    re.S | re.I,
)


@functools.lru_cache(maxsize=4096)  # gold is laid out once per run on the site
def _pretty(sql: str) -> str | None:
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        trees = sqlglot.parse(sql, read="postgres")
        if len(trees) != 1 or trees[0] is None:
            return None
        return trees[0].sql(dialect="postgres", pretty=True)
    except (SqlglotError, RecursionError, ValueError):
        return None


def layout(sql: str) -> str:
    """``sql`` for reading: as written if it has line breaks or is short, else pretty-printed
    (see the module docstring). Control characters are shown as ``\\xNN``."""
    text = printable(sql.strip())
    if "\n" in text or len(text) <= ONE_LINE:
        return text
    return _pretty(text) or text


def highlight(sql: str) -> Markup:
    """``sql`` as escaped HTML with its tokens classed (see the module docstring)."""
    out: list[str] = []
    pos = 0
    for m in _TOKEN.finditer(sql):
        out.append(str(escape(sql[pos : m.start()])))
        kind = m.lastgroup
        text = str(escape(m.group()))
        if kind == "w":
            out.append(f'<span class="k">{text}</span>' if m.group().lower() in KEYWORDS else text)
        elif kind == "q":
            out.append(text)
        else:
            out.append(f'<span class="{kind}">{text}</span>')
        pos = m.end()
    out.append(str(escape(sql[pos:])))
    return Markup("".join(out))


def diff(gold: str, predicted: str) -> list[tuple[str, str]]:
    """Line diff of ``gold`` against ``predicted``, both laid out by sqlglot when it can."""
    if gold.strip() == predicted.strip():  # the common case needs no parsing
        return [(" ", line) for line in printable(gold.strip()).splitlines()]
    a = (_pretty(printable(gold)) or printable(gold)).splitlines()
    b = (_pretty(printable(predicted)) or printable(predicted)).splitlines()
    out: list[tuple[str, str]] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out += [(" ", line) for line in a[i1:i2]]
        else:
            out += [("-", line) for line in a[i1:i2]]
            out += [("+", line) for line in b[j1:j2]]
    return out
