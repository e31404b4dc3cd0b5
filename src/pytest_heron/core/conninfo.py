"""A libpq connection string in the other forms tools ask for: its parts, and a URL.

Standard library only (an adapter's own environment may not have psycopg). ``parts`` reads the
``key=value`` form libpq and ``psycopg.conninfo.make_conninfo`` write (values in single quotes
when they need them, ``\\'`` and ``\\\\`` escaped); ``url`` writes the same connection as a
``postgresql://`` URL, with a Unix socket directory (a host that starts with ``/``) and its
port as query parameters, the form libpq, psycopg, psycopg2 and SQLAlchemy all accept.
"""

from __future__ import annotations

from urllib.parse import quote


class ConninfoError(ValueError):
    """A string that is not a libpq ``key=value`` connection string."""


def parts(conninfo: str) -> dict[str, str]:
    """The ``key=value`` pairs of a libpq connection string, in the order given.

    >>> parts("host=/tmp/pg port=5432 dbname=heron user=reader password='it\\\\'s'")
    {'host': '/tmp/pg', 'port': '5432', 'dbname': 'heron', 'user': 'reader', 'password': "it's"}
    """
    out: dict[str, str] = {}
    i, n = 0, len(conninfo)
    while True:
        while i < n and conninfo[i].isspace():
            i += 1
        if i == n:
            return out
        start = i
        while i < n and conninfo[i] not in "= \t\n\r\f\v":
            i += 1
        key = conninfo[start:i]
        while i < n and conninfo[i].isspace():
            i += 1
        if not key or i == n or conninfo[i] != "=":
            raise ConninfoError(f"expected key=value at character {start}: {conninfo[start:]!r}")
        i += 1
        while i < n and conninfo[i].isspace():
            i += 1
        value: list[str] = []
        if i < n and conninfo[i] == "'":
            i += 1
            while i < n and conninfo[i] != "'":
                if conninfo[i] == "\\" and i + 1 < n:
                    i += 1
                value.append(conninfo[i])
                i += 1
            if i == n:
                raise ConninfoError(f"unterminated quoted value of {key!r}")
            i += 1
        else:
            while i < n and not conninfo[i].isspace():
                if conninfo[i] == "\\" and i + 1 < n:
                    i += 1
                value.append(conninfo[i])
                i += 1
        out[key] = "".join(value)


def url(conninfo: str, scheme: str = "postgresql") -> str:
    """The connection as a URL: ``scheme://user:password@host:port/dbname?other=...``, every
    part percent-encoded; a socket directory (and then the port) goes in the query as
    ``host=`` (and ``port=``), since a path cannot be a URL's host. ``scheme`` may name a
    driver for SQLAlchemy (``postgresql+psycopg2``).

    >>> url("host=/tmp/pg port=5432 dbname=heron user=reader password=p@ss")
    'postgresql://reader:p%40ss@/heron?host=/tmp/pg&port=5432'
    >>> url("host=db.example port=6432 dbname=heron user=reader", "postgresql+psycopg2")
    'postgresql+psycopg2://reader@db.example:6432/heron'
    """
    p = parts(conninfo)
    auth = ""
    used = {"user", "password", "host", "port", "dbname"}
    if "user" in p:
        auth = _q(p["user"]) + (f":{_q(p['password'])}" if "password" in p else "") + "@"
    else:
        used.discard("password")  # no user to put it beside: a query parameter
    host, port = p.get("host", ""), p.get("port", "")
    query: list[tuple[str, str]] = []
    if host.startswith("/") or "," in host:
        netloc = ""
        query.append(("host", host))
        if port:
            query.append(("port", port))
    else:
        netloc = (f"[{host}]" if ":" in host else _q(host)) + (f":{port}" if port else "")
    query += [(k, v) for k, v in p.items() if k not in used]
    tail = "&".join(f"{_q(k)}={quote(v, safe='/')}" for k, v in query)
    return f"{scheme}://{auth}{netloc}/{_q(p.get('dbname', ''))}" + (f"?{tail}" if tail else "")


def _q(text: str) -> str:
    return quote(text, safe="")
