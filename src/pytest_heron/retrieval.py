"""Table rankers adapters may use to choose their context (public API, stable): a re-export of
:mod:`pytest_heron.systems.retrieval.rankers`."""

from __future__ import annotations

from pytest_heron.systems.retrieval.rankers import METHODS as METHODS
from pytest_heron.systems.retrieval.rankers import Ranker as Ranker
from pytest_heron.systems.retrieval.rankers import TableDoc as TableDoc
from pytest_heron.systems.retrieval.rankers import build_ranker as build_ranker
from pytest_heron.systems.retrieval.rankers import rank_tables as rank_tables
from pytest_heron.systems.retrieval.rankers import ranker as ranker
from pytest_heron.systems.retrieval.rankers import table_docs as table_docs
from pytest_heron.systems.retrieval.rankers import words as words
