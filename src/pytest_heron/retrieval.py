"""What adapters may use to choose and describe their context (public API, stable): the table
rankers (:mod:`pytest_heron.systems.retrieval.rankers`), the lexical index, the schema
catalogue's DDL helpers and the foreign keys of a live database."""

from __future__ import annotations

from pytest_heron.database import column_pairs as column_pairs
from pytest_heron.database import foreign_keys as foreign_keys
from pytest_heron.dataset import TableInfo as TableInfo
from pytest_heron.dataset import first_sentence as first_sentence
from pytest_heron.dataset import parse_ddl as parse_ddl
from pytest_heron.dataset import split_statements as split_statements
from pytest_heron.dataset import statement_table as statement_table
from pytest_heron.systems.retrieval.lexical import LexicalIndex as LexicalIndex
from pytest_heron.systems.retrieval.rankers import METHODS as METHODS
from pytest_heron.systems.retrieval.rankers import Ranker as Ranker
from pytest_heron.systems.retrieval.rankers import TableDoc as TableDoc
from pytest_heron.systems.retrieval.rankers import build_ranker as build_ranker
from pytest_heron.systems.retrieval.rankers import rank_tables as rank_tables
from pytest_heron.systems.retrieval.rankers import ranker as ranker
from pytest_heron.systems.retrieval.rankers import table_docs as table_docs
from pytest_heron.systems.retrieval.rankers import words as words
