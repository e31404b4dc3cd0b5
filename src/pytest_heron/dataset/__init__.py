"""Stage 2: what is asked: the schema's DDL read as a catalogue, and the question files."""

from typing import TYPE_CHECKING

from pytest_heron.core.door import opener

# The door: what other stages may import from this one, each name loaded on first use
# (tests/test_layers.py holds every other stage to these names).
if TYPE_CHECKING:
    from pytest_heron.dataset.catalogue import TableInfo as TableInfo
    from pytest_heron.dataset.catalogue import first_sentence as first_sentence
    from pytest_heron.dataset.catalogue import parse_ddl as parse_ddl
    from pytest_heron.dataset.catalogue import split_statements as split_statements
    from pytest_heron.dataset.catalogue import statement_table as statement_table
    from pytest_heron.dataset.params import Value as Value
    from pytest_heron.dataset.params import defaults as defaults
    from pytest_heron.dataset.params import draw_values as draw_values
    from pytest_heron.dataset.params import render as render
    from pytest_heron.dataset.params import text as text
    from pytest_heron.dataset.questions import GoldQuestion as GoldQuestion
    from pytest_heron.dataset.questions import for_layout as for_layout
    from pytest_heron.dataset.questions import load_questions as load_questions
    from pytest_heron.dataset.questions import questions_digest as questions_digest

_DOOR = {
    "GoldQuestion": "questions",
    "TableInfo": "catalogue",
    "Value": "params",
    "defaults": "params",
    "draw_values": "params",
    "first_sentence": "catalogue",
    "for_layout": "questions",
    "load_questions": "questions",
    "parse_ddl": "catalogue",
    "questions_digest": "questions",
    "render": "params",
    "split_statements": "catalogue",
    "statement_table": "catalogue",
    "text": "params",
}
__getattr__ = opener(globals(), _DOOR)
