"""State databases: built once, stamped, reused, rebuilt when stale, locked against races."""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
from psycopg import sql

from pytest_heron.database.server import Server
from pytest_heron.database.states import State, ensure_state, state_name
from pytest_heron.generate import load_bundle


def _drop(server: Server, name: str) -> None:
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def test_state_is_named_by_scale_seed_and_data_version() -> None:
    assert state_name("tiny", 42) == f"heron_tiny_42_{load_bundle().data_version}"


def test_state_has_every_table_and_a_manifest(tiny_state) -> None:  # type: ignore[no-untyped-def]
    m = tiny_state.manifest
    assert m["data_version"] == load_bundle().data_version
    assert m["layout"] == "standard"  # the plugin's states; --layout citus is heron seed's only
    assert m["tables"] == len(load_bundle().tables)
    assert m["rows"] == sum(m["row_counts"].values())
    with psycopg.connect(tiny_state.admin_dsn) as conn:
        for fq, n in m["row_counts"].items():
            got = conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(*fq.split(".")))
            ).fetchone()
            assert got == (n,), fq


def test_second_call_reuses_and_stale_stamp_rebuilds(server: Server, state_copy: State) -> None:
    """A copy of tiny/42 (stamped as a state of its own name) is reused as it is; once its stamp
    is stale it is seeded afresh, in place (the suite's fresh seed of ``tiny``)."""
    name = state_copy.database
    first = ensure_state(server, "tiny", 42, database=name)
    again = ensure_state(server, "tiny", 42, database=name)
    assert again.manifest["built_at"] == first.manifest["built_at"]
    stale = dict(first.manifest, data_version="something-else")
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                sql.Identifier(name), sql.Literal(json.dumps(stale))
            )
        )
    rebuilt = ensure_state(server, "tiny", 42, database=name)
    assert rebuilt.manifest["data_version"] == load_bundle().data_version
    assert rebuilt.manifest["built_at"] != first.manifest["built_at"]  # seeded, not kept
    assert rebuilt.manifest["row_counts"] == first.manifest["row_counts"]


def test_two_processes_build_a_state_once(server: Server) -> None:
    name = "heron_test_race"
    _drop(server, name)
    code = (
        "import json, sys\n"
        "from pytest_heron.database.server import from_dsn\n"
        "from pytest_heron.database.states import ensure_state\n"
        f"s = ensure_state(from_dsn(sys.argv[1]), 'tiny', 42, database={name!r})\n"
        "print(s.manifest['built_at'], s.manifest['seconds'])\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, server.admin_dsn], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1]  # the second process reused the first one's build
    _drop(server, name)


def test_other_data_versions_are_dropped_only_when_idle(server: Server) -> None:
    from pytest_heron.database.states import _drop_other_versions

    names = {
        "idle": "heron_tiny_9917_aaaaaaaaaaaa",
        "busy": "heron_tiny_9917_bbbbbbbbbbbb",
        "building": "heron_tiny_9917_cccccccccccc__building",
        "current": "heron_tiny_9917_dddddddddddd",
        "other_seed": "heron_tiny_99170_eeeeeeeeeeee",
    }
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        for name in names.values():
            _drop(server, name)
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            with psycopg.connect(server.dsn(names["busy"])):  # another version's run, mid-way
                dropped = _drop_other_versions(conn, "tiny", 9917, keep=names["current"])
            left = {
                str(r[0])
                for r in conn.execute(
                    "SELECT datname FROM pg_database WHERE datname LIKE 'heron_tiny_9917%'"
                ).fetchall()
            }
        finally:
            for name in names.values():
                _drop(server, name)
    assert dropped == [names["idle"]]
    assert left == {names["busy"], names["building"], names["current"], names["other_seed"]}
