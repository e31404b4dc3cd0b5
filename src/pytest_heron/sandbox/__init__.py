"""Stage 4: running SQL written by a system under test without letting it change or stall
anything. :mod:`.statement` decides what a statement is and reads (the guard);
:mod:`.execute` runs an accepted query under limits."""

from __future__ import annotations

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
