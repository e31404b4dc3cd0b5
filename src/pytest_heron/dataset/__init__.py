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
    from pytest_heron.dataset.questions import from_entries as from_entries
    from pytest_heron.dataset.questions import questions_digest as questions_digest
    from pytest_heron.dataset.questions import raw_entries as raw_entries
    from pytest_heron.dataset.sealed import DEFAULT_KEY_ENV as DEFAULT_KEY_ENV
    from pytest_heron.dataset.sealed import is_sealed as is_sealed
    from pytest_heron.dataset.sealed import load_questions as load_questions
    from pytest_heron.dataset.sealed import new_key as new_key
    from pytest_heron.dataset.sealed import recipient_of as recipient_of
    from pytest_heron.dataset.sealed import seal_entries as seal_entries
    from pytest_heron.dataset.sealed import sealed_digest as sealed_digest

_DOOR = {
    "DEFAULT_KEY_ENV": "sealed",
    "from_entries": "questions",
    "is_sealed": "sealed",
    "new_key": "sealed",
    "raw_entries": "questions",
    "recipient_of": "sealed",
    "seal_entries": "sealed",
    "sealed_digest": "sealed",
    "GoldQuestion": "questions",
    "TableInfo": "catalogue",
    "Value": "params",
    "defaults": "params",
    "draw_values": "params",
    "first_sentence": "catalogue",
    "for_layout": "questions",
    "load_questions": "sealed",
    "parse_ddl": "catalogue",
    "questions_digest": "questions",
    "render": "params",
    "split_statements": "catalogue",
    "statement_table": "catalogue",
    "text": "params",
}
__getattr__ = opener(globals(), _DOOR)
