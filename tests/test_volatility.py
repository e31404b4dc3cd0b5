"""Verdicts no coin decides (issue 40, items 1 and 2): volatility is decided on PostgreSQL's parse
tree and the catalog, and what varies per connection or server is taken away from the roles.

On 7d9ee0b an answer gated on a 0.9 coin was scored right 3 to 6 times in 10 when the coin hid
behind aliases with ``$`` (the regex took ``a$$ ... b$$`` for a dollar quote), behind
``U&"\\0072andom"()``, behind ``'now'::timestamptz``, or came from
``pg_stat_activity.backend_start``, ``pg_backend_pid()`` or ``pg_postmaster_start_time()``. Each
is scored ten times here through the vendor kit's ``heron_score`` (``Scorer``) and ten times
through the verifier's own path (``_reproduce_question``), and must be wrong every time with a
reason naming it. The pure part (the tree walk and the judgement on a given catalog) is
property-tested with generated coin-gated answers.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_heron import sandbox
from pytest_heron.board.checks import Entry
from pytest_heron.database.states import reader_role
from pytest_heron.dataset import load_questions
from pytest_heron.dataset.questions import GoldQuestion, builtin_dir
from pytest_heron.options import Settings
from pytest_heron.run.kit import Kit, Scorer
from pytest_heron.sandbox import per_session
from pytest_heron.sandbox.uses import sql_uses
from pytest_heron.scoring.score import StateRef, score_sql
from pytest_heron.scoring.volatility import (
    FALLBACK,
    Catalog,
    read_catalog,
    volatile_calls,
    volatile_reason,
)

verifier = importlib.import_module("pytest_heron.board.verifier")


def _q001() -> GoldQuestion:
    return next(q for q in load_questions(builtin_dir()) if q.id == "q001")


def _gated(gate: str, source: str = "") -> str:
    """q001's gold answer when ``gate`` holds, a wrong count otherwise."""
    return f"SELECT CASE WHEN {gate} THEN ({_q001().gold_sql}) ELSE -1 END AS customers {source}"


# -- the pure part: the tree and a given catalog -----------------------------------------------

# the coins of the issue, each with what its reason must name
COINS = {
    "dollar_aliases": (
        _gated("c.r < 0.9", "FROM (SELECT 1 AS a$$, random() AS r, 1 AS b$$) c"),
        "calls random()",
    ),
    "unicode_escape": (_gated('U&"\\0072andom"() < 0.9'), "calls random()"),
    "now_literal": (
        _gated("extract(microseconds FROM 'now'::timestamptz)::bigint % 10 <> 0"),
        "the literal 'now'",
    ),
    "backend_start": (
        _gated(
            "(SELECT max(extract(microseconds FROM backend_start))::bigint % 10"
            " FROM pg_stat_activity) <> 0"
        ),
        "through view pg_catalog.pg_stat_activity",
    ),
    "backend_pid": (_gated("pg_backend_pid() % 10 <> 0"), "calls pg_backend_pid()"),
    "postmaster_start": (
        _gated("extract(microseconds FROM pg_postmaster_start_time())::bigint % 10 <> 0"),
        "calls pg_postmaster_start_time()",
    ),
}


def _unicode_name(name: str, escaped: list[bool], escape: str) -> str:
    """``name`` as a U& quoted identifier, the letters picked by ``escaped`` written as
    code-point escapes (with ``escape`` as the escape character)."""
    body = "".join(
        f"{escape}{ord(c):04X}" if pick else c for c, pick in zip(name, escaped, strict=True)
    )
    tail = "" if escape == "\\" else f" UESCAPE '{escape}'"
    return f'U&"{body}"{tail}'


# the coin functions the property tests hide, with the phrase the fallback catalog gives each
COIN_FUNCTIONS = {
    "random": "calls random()",
    "clock_timestamp": "calls clock_timestamp()",
    "pg_backend_pid": "calls pg_backend_pid(), which reads the server's statistics",
    "pg_postmaster_start_time": (
        "calls pg_postmaster_start_time(), whose value depends on the connection or the server"
    ),
    "now": "calls now(), which reads the clock",
}


@st.composite
def hidden_call(draw: st.DrawFn, name: str) -> str:
    """A call of ``name()`` written one of the ways PostgreSQL resolves to it."""
    how = draw(st.sampled_from(["plain", "quoted", "qualified", "unicode", "mixed_case"]))
    if how == "plain":
        return f"{name}()"
    if how == "quoted":
        return f'"{name}"()'
    if how == "qualified":
        return draw(st.sampled_from([f"pg_catalog.{name}()", f'"pg_catalog"."{name}"()']))
    if how == "mixed_case":
        flips = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
        return "".join(c.upper() if f else c for c, f in zip(name, flips, strict=True)) + "()"
    escaped = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
    return _unicode_name(name, escaped, draw(st.sampled_from(["\\", "!", "#"]))) + "()"


dollar_alias = st.from_regex(r"\A[a-z][a-z0-9]{0,3}\$[$a-z0-9]{0,3}\Z")


@st.composite
def coin_gated(draw: st.DrawFn) -> tuple[str, str]:
    """An answer gated on a coin function (:data:`COIN_FUNCTIONS`), hidden behind aliases with
    $, casts, subqueries, CTEs, comments and string literals that mention other functions;
    returned with the function's name."""
    name = draw(st.sampled_from(sorted(COIN_FUNCTIONS)))
    call = draw(hidden_call(name))
    value = draw(st.sampled_from(["{c}", "({c})::numeric", "CAST({c} AS float8)", "-{c}"]))
    value = value.format(c=call)
    noise = draw(st.sampled_from(["", "/* now() */", "-- clock_timestamp()\n"]))
    a1, a2 = draw(dollar_alias), draw(dollar_alias)
    inner = f"SELECT 1 AS {a1}, {value} {noise} AS r, 2 AS {a2}"
    shape = draw(st.sampled_from(["subquery", "cte", "scalar", "lateral", "union"]))
    if shape == "subquery":
        sql = f"SELECT CASE WHEN c.r < 0.9 THEN 1 ELSE 0 END FROM ({inner}) c"
    elif shape == "cte":
        sql = f"WITH c AS ({inner}) SELECT CASE WHEN r < 0.9 THEN 1 END FROM c"
    elif shape == "scalar":
        sql = f"SELECT 1 WHERE (SELECT r FROM ({inner}) x) < 0.9 AND 'random()' <> $q$x$q$"
    elif shape == "lateral":
        sql = f"SELECT x.r FROM (VALUES (1)) v(i), LATERAL ({inner}) x"
    else:
        sql = f"SELECT 1 AS r UNION ALL {inner}"
    return name, sql


@settings(max_examples=400, deadline=None)
@given(coin_gated())
def test_a_generated_coin_gated_answer_is_always_flagged(coin: tuple[str, str]) -> None:
    name, sql = coin
    assert sql_uses(sql) is not None, sql  # PostgreSQL parses every generated answer
    assert volatile_calls(sql) == [COIN_FUNCTIONS[name]], sql
    reason = volatile_reason(sql)
    assert reason is not None and reason.startswith(f"volatile result: {COIN_FUNCTIONS[name]}")


@st.composite
def harmless(draw: st.DrawFn) -> str:
    """An answer that names volatile functions only where PostgreSQL does not call them:
    comments, string and dollar-quoted literals, aliases, column and table names."""
    alias = draw(dollar_alias)
    mention = draw(st.sampled_from(["random()", "now()", "clock_timestamp()", "pg_backend_pid()"]))
    where = draw(st.sampled_from(["comment", "string", "dollar", "alias", "column"]))
    if where == "comment":
        return f"SELECT 1 AS {alias} /* {mention} */ -- {mention}\n FROM t"
    if where == "string":
        return f"SELECT '{mention}' AS {alias} FROM t WHERE x <> E'{mention}'"
    if where == "dollar":
        return f"SELECT $tag${mention}$tag$ AS {alias}"
    if where == "alias":
        return f'SELECT 1 AS "{mention}", random_id AS {alias} FROM t AS "random"'
    return f"SELECT random, now, system FROM s.random_values AS {alias}"


@settings(max_examples=200, deadline=None)
@given(harmless())
def test_a_name_that_is_not_called_is_never_flagged(sql: str) -> None:
    assert sql_uses(sql) is not None, sql
    assert volatile_calls(sql) == [], sql


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["now", "today", "tomorrow", "yesterday", "NOW", " Today ", "tomorrow 10:00"]),
    st.sampled_from(["'{w}'::timestamptz", "date '{w}'", "CAST('{w}' AS timestamp)", "'{w}'"]),
)
def test_a_date_time_word_read_from_the_clock_is_flagged_as_a_literal(word: str, form: str) -> None:
    sql = f"SELECT {form.format(w=word)} AS d"
    assert volatile_calls(sql) == [f"reads the clock with the literal '{word}'"]


def test_constants_among_the_special_date_words_are_not_flagged() -> None:
    sql = "SELECT 'epoch'::timestamptz, 'infinity'::date, 'allballs'::time, 'nowhere'"
    assert volatile_calls(sql) == []


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=1, max_value=4), st.sampled_from(["v", "f"]))
def test_views_and_sql_functions_are_judged_by_what_they_call(depth: int, kind: str) -> None:
    """A chain of views (or SQL functions) ``o1 -> o2 -> ... -> random()``: the answer reading
    the first is flagged, and the reason names the way there."""
    views: dict[tuple[str, str], str] = {}
    bodies: dict[tuple[str, str], tuple[str, ...]] = {}
    for i in range(1, depth + 1):
        inner = "random()" if i == depth else (f"s.o{i + 1}()" if kind == "f" else "r")
        source = f" FROM s.o{i + 1}" if kind == "v" and i < depth else ""
        if kind == "v":
            views[("s", f"o{i}")] = f"SELECT {inner} AS r{source}"
        else:
            bodies[("s", f"o{i}")] = (f"SELECT {inner}",)
    catalog = Catalog(FALLBACK.functions, bodies, views)
    sql = "SELECT r FROM s.o1" if kind == "v" else "SELECT s.o1()"
    word = "view" if kind == "v" else "function"
    parens = "" if kind == "v" else "()"
    way = ", then ".join(f"{word} s.o{i}{parens}" for i in range(1, depth + 1))
    assert volatile_calls(sql, catalog) == [f"calls random() through {way}"]


def test_a_view_reading_itself_does_not_loop() -> None:
    catalog = Catalog(
        FALLBACK.functions, {}, {("s", "a"): "SELECT * FROM s.b", ("s", "b"): "SELECT * FROM s.a"}
    )
    assert volatile_calls("SELECT * FROM s.a", catalog) == []


def test_tablesample_is_flagged_repeatable_or_not() -> None:
    for clause in ("SYSTEM (5)", "BERNOULLI (5) REPEATABLE (1)"):
        method = clause.split()[0]
        assert volatile_calls(f"SELECT * FROM s.t TABLESAMPLE {clause}") == [
            f"samples rows with TABLESAMPLE {method}"
        ]


def test_a_chain_too_deep_for_a_recursive_walk_is_still_read() -> None:
    sql = "SELECT 1" + " UNION ALL SELECT 1" * 3000 + " UNION ALL SELECT random()::int"
    assert volatile_calls(sql) == ["calls random()"]


# -- the catalog of the server ------------------------------------------------------------------


def test_the_gold_sql_of_every_question_is_not_volatile(tiny_state: Any) -> None:
    catalog = read_catalog(tiny_state.admin_dsn)
    assert catalog.functions["random"]["pg_catalog"] == "volatile"
    assert catalog.functions["pg_backend_pid"]["pg_catalog"] == "statistics"
    assert ("pg_catalog", "pg_stat_activity") in catalog.views
    flagged = {q.id: volatile_calls(q.gold_sql, catalog) for q in load_questions(builtin_dir())}
    assert {k: v for k, v in flagged.items() if v} == {}


def test_the_list_of_what_varies_per_session_comes_from_the_catalog(tiny_state: Any) -> None:
    with psycopg.connect(tiny_state.admin_dsn) as conn:
        functions = per_session.per_session_functions(conn)
        names = {name: why for _sig, name, why in functions}
        views = per_session.per_session_views(conn, list(names))
        # the whole statistics family, by its description, and no more than the rule says
        described = conn.execute(
            "SELECT count(*) FROM pg_proc WHERE obj_description(oid, 'pg_proc') LIKE 'statistics:%'"
        ).fetchone()
    assert described is not None
    assert sum(why == "statistics" for why in names.values()) == described[0]
    for name in ("pg_backend_pid", "pg_stat_get_activity", "pg_stat_get_numscans"):
        assert names[name] == "statistics", name
    for name in (
        "pg_postmaster_start_time",
        "pg_conf_load_time",
        "inet_client_addr",
        "inet_client_port",
        "inet_server_addr",
        "inet_server_port",
        "pg_show_all_settings",
    ):
        assert names[name] == "session", name
    # kept: the clock (named by the volatility check), constants, what information_schema calls
    kept = ("now", "json_build_object", "current_database", "pg_my_temp_schema", "version")
    for name in (*kept, "current_schema"):
        assert name not in names
    assert {"pg_stat_activity", "pg_stat_user_tables", "pg_settings"} <= set(views)
    assert "pg_tables" not in views and "pg_stats" not in views


def test_the_reader_cannot_run_what_varies_per_session_and_the_admin_can(tiny_state: Any) -> None:
    role = reader_role(tiny_state.database)
    with psycopg.connect(tiny_state.admin_dsn) as conn:
        functions = per_session.per_session_functions(conn)
        views = per_session.per_session_views(conn, [name for _s, name, _w in functions])
        allowed = conn.execute(
            "SELECT p FROM unnest(%s::text[]) p WHERE has_function_privilege(%s, p::regprocedure,"
            " 'EXECUTE') ORDER BY 1",
            ([sig for sig, _n, _w in functions], role),
        ).fetchall()
        readable = conn.execute(
            "SELECT v FROM unnest(%s::text[]) v WHERE has_table_privilege(%s,"
            " ('pg_catalog.' || quote_ident(v))::regclass, 'SELECT') ORDER BY 1",
            (views, role),
        ).fetchall()
        # the admin keeps all of it (the harness reads pg_stat_activity for its lock messages)
        admin = conn.execute(
            "SELECT pg_backend_pid(), pg_postmaster_start_time(), count(*) FROM pg_stat_activity"
        ).fetchone()
    assert allowed == [] and readable == []
    assert admin is not None and admin[2] >= 1
    for sql, name in [
        ("SELECT pg_backend_pid()", "function pg_backend_pid"),
        ("SELECT pg_postmaster_start_time()", "function pg_postmaster_start_time"),
        ("SELECT backend_start FROM pg_stat_activity", "view pg_stat_activity"),
        ("SELECT inet_server_port()", "function inet_server_port"),
    ]:
        got = sandbox.execute(tiny_state.reader_dsn, sql, timeout_s=10)
        assert got.error == f"permission denied for {name}", (sql, got.error)
    # what client libraries ask on connect still runs (SQLAlchemy: version(), current_schema())
    got = sandbox.execute(
        tiny_state.reader_dsn, "SELECT pg_catalog.version(), current_schema()", timeout_s=10
    )
    assert got.ok and got.rows[0][1] == "public", got.error
    # the schema is still explored through information_schema (it calls pg_my_temp_schema())
    got = sandbox.execute(
        tiny_state.reader_dsn,
        "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'orders'",
        timeout_s=10,
    )
    assert got.ok and got.rows[0][0] > 0


def test_every_run_is_a_fresh_connection(tiny_state: Any) -> None:
    """Repeats and timing runs go through sandbox.execute / execution_ms, which connect anew
    each time: two runs see two server processes (read as the admin, who may ask)."""
    pids = {
        sandbox.execute(tiny_state.admin_dsn, "SELECT pg_backend_pid()", timeout_s=10).rows[0][0]
        for _ in range(3)
    }
    assert len(pids) == 3


# -- each coin of the issue, ten scorings through the kit and ten through the verifier ----------


def _ref(state: Any) -> StateRef:
    return StateRef(state.seed, state.database, state.admin_dsn, state.reader_dsn)


@pytest.mark.parametrize("coin", sorted(COINS))
def test_each_coin_is_wrong_every_time_through_the_kit_and_the_verifier(
    tiny_state: Any, coin: str
) -> None:
    sql, named = COINS[coin]
    q = _q001()
    state = _ref(tiny_state)
    scorer = Scorer(Kit(Settings(adapter=None, scale="tiny"), states=[state]))
    entry = Entry("q001", 0, sql, None, None, None, None)
    for _ in range(10):
        kit_out = scorer("q001", sql)
        outcome, hidden_ok, _reasons = verifier._reproduce_question(
            q, (entry,), [state], state, 30.0, 1
        )
        for out in (kit_out, outcome):
            assert out.correct is False and out.correct_by_state == {"42": False}, out
            assert out.reason is not None and out.reason.startswith("volatile result: "), out
            assert named in out.reason, out.reason
        assert hidden_ok is False
    # gold through the same two paths stays right
    assert scorer("q001", q.gold_sql).correct
    gold = Entry("q001", 0, q.gold_sql, None, None, None, None)
    assert verifier._reproduce_question(q, (gold,), [state], state, 30.0, 1)[0].correct


def test_a_refused_call_is_wrong_with_the_database_error_and_the_reason(tiny_state: Any) -> None:
    out = score_sql(_q001(), COINS["backend_pid"][0], [_ref(tiny_state)], statement_timeout=30)
    assert out.error_kind == "db_error"
    assert out.error == "permission denied for function pg_backend_pid"
    assert out.reason is not None and re.match(
        r"volatile result: calls pg_backend_pid\(\), which reads the server's statistics",
        out.reason,
    )


def test_a_view_and_sql_functions_the_reader_can_reach_are_judged_by_their_calls(
    state_copy: Any,
) -> None:
    with psycopg.connect(state_copy.admin_dsn, autocommit=True) as conn:
        conn.execute("CREATE VIEW orders.coin AS SELECT random() AS r")
        conn.execute(
            "CREATE FUNCTION orders.coin_f() RETURNS float8 LANGUAGE sql STABLE"
            " AS 'SELECT random()'"  # declared stable: only its body shows the coin
        )
        conn.execute("CREATE FUNCTION orders.coin_v() RETURNS float8 LANGUAGE sql AS 'SELECT 0.5'")
        conn.execute(
            "CREATE FUNCTION orders.coin_g() RETURNS float8 LANGUAGE sql STABLE"
            " BEGIN ATOMIC SELECT orders.coin_f(); END"
        )
        conn.execute(
            "CREATE FUNCTION orders.coin_h() RETURNS float8 LANGUAGE sql IMMUTABLE"
            " RETURN 1 + orders.coin_f()"
        )
        conn.execute(f"GRANT SELECT ON orders.coin TO {reader_role(state_copy.database)}")
    state = _ref(state_copy)
    cases = {
        _gated("(SELECT r FROM orders.coin) < 0.9"): "calls random() through view orders.coin",
        _gated("orders.coin_g() < 0.9"): (
            "calls random() through function orders.coin_g(), then function orders.coin_f()"
        ),
        _gated("orders.coin_v() < 0.9"): "calls orders.coin_v()",  # volatile by default
        _gated("orders.coin_h() < 1.9"): (
            "calls random() through function orders.coin_h(), then function orders.coin_f()"
        ),
    }
    for sql, named in cases.items():
        for _ in range(10):
            out = score_sql(_q001(), sql, [state], statement_timeout=30)
            assert out.correct is False and out.reason is not None, out
            assert out.reason.startswith(f"volatile result: {named}"), out.reason
