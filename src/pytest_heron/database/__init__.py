"""Stage 1: a PostgreSQL 16 server and the seeded states the benchmark runs on.

- :mod:`.server`: where the server comes from (embedded, Docker, any DSN).
- :mod:`.states`: one database per ``(scale, seed)``, built once, stamped and reused;
  :mod:`.citus`: the same on a Citus cluster; :mod:`.manifest`: what both share (the stamp,
  the :class:`State` records, the build lock, the scoring role's grants).
- :mod:`.checksum`: per-table checksums of a state (what ``heron checksum`` prints).
- :mod:`.introspect`: what the live catalogue says (foreign keys).
"""

from typing import TYPE_CHECKING

from pytest_heron.core.door import opener

# The door: what other stages may import from this one, each name loaded on first use
# (tests/test_layers.py holds every other stage to these names).
if TYPE_CHECKING:
    from pytest_heron.database.checksum import outside_objects as outside_objects
    from pytest_heron.database.checksum import state_report as state_report
    from pytest_heron.database.checksum import table_checksums as table_checksums
    from pytest_heron.database.checksum import total_line as total_line
    from pytest_heron.database.citus import citus_state_name as citus_state_name
    from pytest_heron.database.introspect import ForeignKey as ForeignKey
    from pytest_heron.database.introspect import by_column as by_column
    from pytest_heron.database.introspect import column_pairs as column_pairs
    from pytest_heron.database.introspect import foreign_keys as foreign_keys
    from pytest_heron.database.manifest import State as State
    from pytest_heron.database.manifest import StateRef as StateRef
    from pytest_heron.database.manifest import state_name as state_name
    from pytest_heron.database.server import Server as Server
    from pytest_heron.database.server import choose as choose
    from pytest_heron.database.server import embedded as embedded
    from pytest_heron.database.server import from_dsn as from_dsn
    from pytest_heron.database.server import redacted as redacted
    from pytest_heron.database.server import start as start
    from pytest_heron.database.states import ensure_state as ensure_state
    from pytest_heron.database.states import seed_jobs as seed_jobs

_DOOR = {
    "ForeignKey": "introspect",
    "Server": "server",
    "State": "manifest",
    "StateRef": "manifest",
    "by_column": "introspect",
    "choose": "server",
    "citus_state_name": "citus",
    "column_pairs": "introspect",
    "embedded": "server",
    "ensure_state": "states",
    "foreign_keys": "introspect",
    "from_dsn": "server",
    "redacted": "server",
    "seed_jobs": "states",
    "start": "server",
    "state_name": "manifest",
    "outside_objects": "checksum",
    "state_report": "checksum",
    "table_checksums": "checksum",
    "total_line": "checksum",
}
__getattr__ = opener(globals(), _DOOR)
