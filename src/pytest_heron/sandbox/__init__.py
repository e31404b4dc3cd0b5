"""Stage 4: running SQL written by a system under test without letting it change or stall
anything. :mod:`.statement` decides what a statement is and reads (the guard);
:mod:`.execute` runs an accepted query under limits; :mod:`.gold` runs gold and works out the
order its top-level ORDER BY asks of an answer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_heron.core.door import opener

# execute is also a submodule's name: bound here eagerly so the function, not the module, wins
from pytest_heron.sandbox.execute import (
    FETCH_CHUNK as FETCH_CHUNK,
)
from pytest_heron.sandbox.execute import (
    MAX_BYTES as MAX_BYTES,
)
from pytest_heron.sandbox.execute import (
    MAX_ROWS as MAX_ROWS,
)
from pytest_heron.sandbox.execute import (
    ExecResult as ExecResult,
)
from pytest_heron.sandbox.execute import (
    execute as execute,
)
from pytest_heron.sandbox.execute import (
    execution_ms as execution_ms,
)
from pytest_heron.sandbox.execute import (
    pin_session as pin_session,
)
from pytest_heron.sandbox.statement import check_statement as check_statement
from pytest_heron.sandbox.statement import tables_read as tables_read

# The door: what other stages may import from this one, each name loaded on first use
# (tests/test_layers.py holds every other stage to these names).
if TYPE_CHECKING:
    from pytest_heron.sandbox.gold import GoldResult as GoldResult
    from pytest_heron.sandbox.gold import execute_gold as execute_gold
    from pytest_heron.sandbox.per_session import per_session_functions as per_session_functions
    from pytest_heron.sandbox.roles import DANGEROUS_FUNCTIONS as DANGEROUS_FUNCTIONS
    from pytest_heron.sandbox.roles import close_database as close_database
    from pytest_heron.sandbox.roles import (
        close_maintenance_databases as close_maintenance_databases,
    )
    from pytest_heron.sandbox.roles import create_adapter_role as create_adapter_role
    from pytest_heron.sandbox.roles import lock_down as lock_down
    from pytest_heron.sandbox.roles import lock_down_citus as lock_down_citus
    from pytest_heron.sandbox.roles import prepare_scoring_role as prepare_scoring_role
    from pytest_heron.sandbox.roles import release_adapters as release_adapters
    from pytest_heron.sandbox.roles import scoring_role as scoring_role
    from pytest_heron.sandbox.statement import parse_sql as parse_sql
    from pytest_heron.sandbox.uses import Name as Name
    from pytest_heron.sandbox.uses import Uses as Uses
    from pytest_heron.sandbox.uses import sql_uses as sql_uses

_DOOR = {
    "DANGEROUS_FUNCTIONS": "roles",
    "GoldResult": "gold",
    "execute_gold": "gold",
    "close_database": "roles",
    "close_maintenance_databases": "roles",
    "create_adapter_role": "roles",
    "lock_down": "roles",
    "lock_down_citus": "roles",
    "Name": "uses",
    "Uses": "uses",
    "parse_sql": "statement",
    "per_session_functions": "per_session",
    "sql_uses": "uses",
    "prepare_scoring_role": "roles",
    "release_adapters": "roles",
    "scoring_role": "roles",
}
__getattr__ = opener(globals(), _DOOR)
