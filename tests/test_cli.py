"""``heron seed`` and ``heron checksum``, end to end on the embedded server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from pytest_heron.database.server import Server
from pytest_heron.database.states import State
from pytest_heron.generate import ddl_script, load_bundle


def _heron(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_heron.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


_CATALOG = {
    "constraints": "SELECT conrelid::regclass::text, conname, contype,"
    " pg_get_constraintdef(oid), convalidated FROM pg_constraint"
    " WHERE connamespace::regnamespace::text = ANY(%s) ORDER BY 1, 2",
    "indexes": "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)"
    " FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid"
    " WHERE c.relnamespace::regnamespace::text = ANY(%s) ORDER BY 1",
    "columns": "SELECT a.attrelid::regclass::text, a.attnum, a.attname,"
    " format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attidentity,"
    " pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
    " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
    " WHERE c.relkind = 'r' AND c.relnamespace::regnamespace::text = ANY(%s)"
    " AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, 2",
    "comments": "SELECT d.objoid::regclass::text, d.objsubid, d.description"
    " FROM pg_description d JOIN pg_class c ON c.oid = d.objoid"
    " WHERE d.classoid = 'pg_class'::regclass"
    " AND c.relnamespace::regnamespace::text = ANY(%s) ORDER BY 1, 2",
}


def _catalog(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    schemas = [m.name for m in load_bundle().modules]
    with psycopg.connect(dsn) as conn:
        return {what: conn.execute(q, (schemas,)).fetchall() for what, q in _CATALOG.items()}  # type: ignore[arg-type]


def _checksums(server: Server, database: str) -> list[str]:
    done = _heron("checksum", "--dsn", server.admin_dsn, "--database", database)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_seed_jobs_and_checksum_round_trip(server: Server) -> None:
    """``heron seed`` with one loader and with two, checked against `heron ddl`'s catalog and
    the suite's cached tiny states (built with ``seed_jobs()`` loaders, 2 on the 2-core
    machines): whichever count those used, one of the two comparisons is across job counts."""
    from pytest_heron.database.states import ensure_state

    names = ["heron_test_jobs1", "heron_test_seed43"]
    runs = [("42", "1"), ("43", "2")]
    printed = "heron_test_printed_ddl"  # what `heron ddl` builds, to compare catalogs with
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(printed))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(printed)))
    with psycopg.connect(server.dsn(printed), autocommit=True) as conn:
        conn.execute(ddl_script("standard"))
    want = _catalog(server.dsn(printed))
    for name, (seed, jobs) in zip(names, runs, strict=True):
        done = _heron(
            "seed",
            "--scale",
            "tiny",
            "--seed",
            seed,
            "--dsn",
            server.admin_dsn,
            "--database",
            name,
            "--jobs",
            jobs,
            "--replace",
        )
        assert done.returncode == 0, done.stderr
        last = json.loads(done.stdout.strip().splitlines()[-1])
        assert set(last) == {"database", "dsn", "tables", "schemas", "rows", "seconds"}
        assert last["database"] == name and last["rows"] > 0
        assert "loaded" in done.stderr  # progress goes to stderr
        # Each table made in its load transaction, its keys dropped and re-added (read from
        # the DDL text), with two loaders its foreign keys added during the load: the keys
        # (all validated), NOT NULLs, indexes, defaults and comments are `heron ddl`'s.
        assert "each table made as it is loaded" in done.stderr
        got = _catalog(server.dsn(name))
        for what in _CATALOG:
            assert want[what] and got[what] == want[what], (name, what)
        assert all(valid for *_, kind, _, valid in got["constraints"] if kind == "f")
    one, other = (_checksums(server, n) for n in names)
    cached = {
        seed: _checksums(server, ensure_state(server, "tiny", seed).database) for seed in (42, 43)
    }
    assert one == cached[42] and other == cached[43]  # the same bytes, whatever the job count
    assert one[-1].startswith("total\t") and one[-1] != other[-1]  # another seed differs
    for line in one:
        name, rows, sha = line.split("\t")
        assert int(rows) >= 0 and len(sha) == 64
    for name in names:  # each table analyzed after its rows were counted: nothing for autovacuum
        with psycopg.connect(server.dsn(name)) as conn:
            stale = conn.execute(
                "SELECT count(*) FILTER (WHERE n_mod_since_analyze > 0),"
                " count(*) FILTER (WHERE last_analyze IS NULL), count(*) FROM pg_stat_user_tables"
            ).fetchone()
        assert stale is not None and stale[:2] == (0, 0) and stale[2] > 200, (name, stale)
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        for name in [*names, printed]:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def test_checksum_of_a_missing_database_is_a_clear_error(server: Server) -> None:
    done = _heron("checksum", "--dsn", server.admin_dsn, "--database", "heron_does_not_exist")
    assert done.returncode == 2
    assert "does not exist" in done.stderr and "Traceback" not in done.stderr


def test_checksum_covers_every_schema_and_names_what_a_state_should_not_have(
    server: Server, state_copy: State
) -> None:
    """Issue 44: a table added to ``public`` (and a view, a function, a schema of its own) makes
    the total differ and is named; the state as heron seeds it has the pinned total."""
    golden = Path(__file__).parent / "golden" / "versions.tsv"
    version = load_bundle().data_version
    (pinned,) = [
        line.split("\t")[3]
        for line in golden.read_text().splitlines()
        if line.startswith(f"{version}\t")
    ]
    untouched = _heron("checksum", "--dsn", server.admin_dsn, "--database", state_copy.database)
    assert untouched.returncode == 0, untouched.stderr
    assert untouched.stdout.splitlines()[-1].split("\t")[2] == pinned
    assert "heron checksum:" not in untouched.stderr
    with psycopg.connect(state_copy.admin_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.extra (x int)")
        conn.execute("INSERT INTO public.extra VALUES (1), (2)")
        conn.execute("CREATE VIEW crm.sneaky AS SELECT 1 AS one")
        conn.execute("CREATE FUNCTION public.answer() RETURNS int LANGUAGE sql AS 'SELECT 42'")
        conn.execute("CREATE SCHEMA scratch")
    touched = _heron("checksum", "--dsn", server.admin_dsn, "--database", state_copy.database)
    assert touched.returncode == 0, touched.stderr
    lines = touched.stdout.splitlines()
    assert lines[-1].split("\t")[2] != pinned
    named = {line.split("\t")[0]: line.split("\t")[1] for line in lines}
    assert named["table public.extra"] == "2"
    for name in ("view crm.sneaky", "function public.answer()", "schema scratch"):
        assert name in named, name
    assert lines[: len(lines) - 5] == untouched.stdout.splitlines()[:-1]  # heron's tables alike
    assert "4 object(s) that a state as heron seeds it does not have" in touched.stderr
    assert "table public.extra" in touched.stderr and "schema scratch" in touched.stderr


def _results_file(
    path: Any, correct: dict[str, bool], adapter: str, *, data_version: str = "abc"
) -> str:
    doc = {
        "version": 1,
        "conditions": {
            "adapter": adapter,
            "model": None,
            "scale": "tiny",
            "seeds": [42],
            "data_version": data_version,
        },
        "metrics": {"ex_multistate": 100.0 * sum(correct.values()) / len(correct)},
        "questions": [{"id": k, "correct": v} for k, v in correct.items()],
    }
    path.write_text(json.dumps(doc))
    return str(path)


def test_compare_counts_wins_losses_ties_and_mcnemar(tmp_path: Any) -> None:
    a = _results_file(tmp_path / "a.json", {f"q{i}": i < 8 for i in range(10)}, "one")
    b = _results_file(tmp_path / "b.json", {f"q{i}": i < 2 for i in range(10)}, "two")
    done = _heron("compare", a, b)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "regressed (A right, B wrong): 6 q2 q3 q4 q5 q6 q7" in out
    assert "fixed (B right, A wrong): 0" in out and "both right: " in out
    assert "McNemar exact p = 0.03125" in out
    assert "[" not in out and "88.8889" not in out  # no Python reprs, no unrounded floats
    assert "multi-state EX@1" in out and "80.0%" in out and "20.0%" in out
    gate = _heron("compare", a, b, "--max-drop", "2")
    assert gate.returncode == 1 and "60.0 points below" in gate.stderr
    assert _heron("compare", b, a, "--max-drop", "2").returncode == 0  # B better: no regression


def test_compare_warns_on_other_conditions_and_refuses_with_strict(tmp_path: Any) -> None:
    a = _results_file(tmp_path / "a.json", {"q1": True, "q2": False}, "one")
    b = _results_file(tmp_path / "b.json", {"q1": True}, "two", data_version="def")
    done = _heron("compare", a, b)
    assert done.returncode == 0
    assert "differ in data version, question set" in done.stderr
    strict = _heron("compare", a, b, "--strict")
    assert strict.returncode == 2 and "refusing" in strict.stderr


def test_compare_names_the_bad_field_of_a_results_file(tmp_path: Any) -> None:
    a = _results_file(tmp_path / "a.json", {"q1": True}, "one")
    doc = json.loads((tmp_path / "a.json").read_text())
    doc["questions"][0]["correct"] = "no"
    (tmp_path / "b.json").write_text(json.dumps(doc))
    done = _heron("compare", a, str(tmp_path / "b.json"))
    assert done.returncode == 2 and "question 'q1', field 'correct': expected true or false" in (
        done.stderr
    )


def test_compare_rejects_a_broken_file(tmp_path: Any) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    good = _results_file(tmp_path / "a.json", {"q1": True}, "one")
    done = _heron("compare", good, str(tmp_path / "bad.json"))
    assert done.returncode == 2 and "not a readable results file" in done.stderr


def test_seed_layout_citus_is_refused_without_the_extension(server: Server) -> None:
    name = "heron_test_citus_refused"
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        args = ["seed", "--scale", "tiny", "--seed", "42", "--dsn", server.admin_dsn]
        done = _heron(*args, "--layout", "citus", "--database", name)
        assert done.returncode == 2
        assert "Traceback" not in done.stderr
        assert "needs a Citus coordinator" in done.stderr
        assert (
            "pg_available_extensions" in done.stderr and "heron ddl --layout citus" in done.stderr
        )
        assert "loaded" not in done.stderr and done.stdout == ""
        with psycopg.connect(server.dsn(name)) as conn:  # nothing was created in it
            made = conn.execute(
                "SELECT count(*) FROM pg_namespace WHERE nspname IN ('core', 'orders')"
            ).fetchone()
            comment = conn.execute(
                "SELECT shobj_description(oid, 'pg_database') FROM pg_database"
                " WHERE datname = current_database()"
            ).fetchone()
        assert made == (0,) and comment == (None,)
        unnamed = _heron(*args, "--layout", "citus")  # heron would create it on every node
        assert unnamed.returncode == 2 and "needs a Citus coordinator" in unnamed.stderr
    finally:
        with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def test_ddl_prints_the_citus_script() -> None:
    one, two = _heron("ddl", "--layout", "citus"), _heron("ddl", "--layout", "citus")
    assert one.returncode == 0 and one.stdout == two.stdout
    assert "SELECT create_distributed_table('orders.orders', 'tenant_id'," in one.stdout
    assert "SELECT create_reference_table('core.tenants');" in one.stdout
    assert "PRIMARY KEY (tenant_id, id);" in one.stdout
    standard = _heron("ddl")
    assert standard.returncode == 0 and "create_distributed_table" not in standard.stdout
    assert "CREATE TABLE orders.orders (" in standard.stdout
