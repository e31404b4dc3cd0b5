"""Stage 7: what comes out: the run's conditions (:mod:`.conditions`), the results document
(:mod:`.document`), the terminal summary (:mod:`.terminal`), the ``--heron-report`` folder
(:mod:`.folder`), the journal (:mod:`.journal`), atomic writes (:mod:`.files`), saved runs
(:mod:`.saved`) and the `heron compare` and `heron runs` verbs (:mod:`.commands`)."""

from typing import TYPE_CHECKING

from pytest_heron.core.door import opener

# The door: what other stages may import from this one, each name loaded on first use
# (tests/test_layers.py holds every other stage to these names).
if TYPE_CHECKING:
    from pytest_heron.results.commands import compare_command as compare_command
    from pytest_heron.results.commands import runs_command as runs_command
    from pytest_heron.results.comparison import Comparison as Comparison
    from pytest_heron.results.comparison import compare_runs as compare_runs
    from pytest_heron.results.comparison import parse_fail as parse_fail
    from pytest_heron.results.conditions import Conditions as Conditions
    from pytest_heron.results.document import Results as Results
    from pytest_heron.results.document import read_results as read_results
    from pytest_heron.results.document import results_document as results_document
    from pytest_heron.results.document import write_results as write_results
    from pytest_heron.results.files import check_writable as check_writable
    from pytest_heron.results.files import write_atomic as write_atomic
    from pytest_heron.results.journal import Journal as Journal
    from pytest_heron.results.journal import journal_path as journal_path
    from pytest_heron.results.journal import read_journal as read_journal
    from pytest_heron.results.saved import check_name as check_name
    from pytest_heron.results.saved import find_run as find_run
    from pytest_heron.results.saved import locate_run as locate_run
    from pytest_heron.results.saved import run_lines as run_lines
    from pytest_heron.results.saved import run_rows as run_rows
    from pytest_heron.results.saved import runs_folder as runs_folder
    from pytest_heron.results.saved import save_run as save_run
    from pytest_heron.results.terminal import absent_note as absent_note
    from pytest_heron.results.terminal import conditions_line as conditions_line
    from pytest_heron.results.terminal import header_line as header_line
    from pytest_heron.results.terminal import summary_lines as summary_lines
    from pytest_heron.results.terminal import usage_line as usage_line

_DOOR = {
    "Comparison": "comparison",
    "Conditions": "conditions",
    "Journal": "journal",
    "Results": "document",
    "check_name": "saved",
    "check_writable": "files",
    "compare_command": "commands",
    "compare_runs": "comparison",
    "absent_note": "terminal",
    "conditions_line": "terminal",
    "header_line": "terminal",
    "find_run": "saved",
    "journal_path": "journal",
    "parse_fail": "comparison",
    "read_journal": "journal",
    "read_results": "document",
    "results_document": "document",
    "locate_run": "saved",
    "run_lines": "saved",
    "run_rows": "saved",
    "runs_command": "commands",
    "runs_folder": "saved",
    "save_run": "saved",
    "summary_lines": "terminal",
    "usage_line": "terminal",
    "write_atomic": "files",
    "write_results": "document",
}
__getattr__ = opener(globals(), _DOOR)
