"""The one lexical ranker (systems/retrieval/lexical.py): its stemmer against PyStemmer's C
Snowball, its BM25 against bm25s (both reference implementations are test-only dependencies),
and the properties the tool adapters rely on."""

from __future__ import annotations

import itertools
import math

import bm25s
import pytest
import Stemmer
from heron_adapters.schema_text import table_chunks
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_heron.dataset import load_questions
from pytest_heron.generate.spec import load_bundle
from pytest_heron.systems.retrieval.lexical import STOP_WORDS, LexicalIndex, stem, terms, words
from pytest_heron.systems.retrieval.rankers import table_docs

SNOWBALL = Stemmer.Stemmer("english")
QUESTIONS = load_questions()

# words built from pieces that reach every rule of the algorithm (region prefixes, the -ing and
# -eed exceptions, each step's suffixes), so a random draw exercises the rare branches
# fmt: off
_PIECES = st.sampled_from([
    "gener", "commun", "past", "univers", "inter", "organ", "proc", "exc", "succ", "inn", "out",
    "even", "d", "ly", "sk", "ex", "re", "y", "yy", "a", "e", "i", "o", "u", "b", "t", "l",
    "ing", "ingly", "ed", "edly", "eed", "ies", "ied", "s", "ss", "us", "ational", "tional",
    "ization", "ousness", "iveness", "ogist", "ogi", "li", "alli", "ative", "ness", "ful",
    "ement", "ion", "sion", "ll", "er", "al", "ment", "able", "ible", "at", "bl", "iz", "bb",
])
# fmt: on


def test_stem_matches_snowball_on_every_word_of_the_schema_and_the_questions() -> None:
    text = load_bundle().ddl + "\n" + "\n".join(q.question for q in QUESTIONS)
    vocabulary = sorted(set(words(text)))
    assert len(vocabulary) > 2000
    wrong = [
        (w, stem(w), SNOWBALL.stemWord(w)) for w in vocabulary if stem(w) != SNOWBALL.stemWord(w)
    ]
    assert wrong == []


@settings(max_examples=3000, deadline=None)
@given(st.lists(_PIECES, min_size=1, max_size=5).map("".join))
def test_stem_matches_snowball_on_built_words(word: str) -> None:
    assert stem(word) == SNOWBALL.stemWord(word)


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="abcdeghilmnorstuvwyz0", min_size=1, max_size=12))
def test_stem_matches_snowball_on_random_words(word: str) -> None:
    assert stem(word) == SNOWBALL.stemWord(word)


def test_terms_drop_stop_words_and_stem() -> None:
    assert terms("The orders OF core.tenants, and their currencies") == [
        "order",
        "core",
        "tenant",
        "currenc",
    ]
    assert not STOP_WORDS & set(terms(" ".join(sorted(STOP_WORDS))))


def test_bm25_scores_are_the_bm25s_scores_on_the_table_documents() -> None:
    corpus = [terms(d.text) for d in table_docs()]
    reference = bm25s.BM25(dtype="float64")  # method lucene, k1 1.5, b 0.75: its defaults
    reference.index(corpus, show_progress=False)
    ours = LexicalIndex()
    for doc in corpus:
        ours.add_terms(doc)
    vocabulary = {t for doc in corpus for t in doc}
    for q in QUESTIONS:
        query = [t for t in terms(q.question) if t in vocabulary]
        if not query:
            continue
        expected = reference.get_scores(query)
        got = ours.term_scores(query)
        assert got == pytest.approx(list(expected), rel=1e-12, abs=1e-12), q.id


def test_lexical_index_hand_computed() -> None:
    ix = LexicalIndex(["orders orders stock", "stock"])
    # N = 2; "order": df 1, idf ln(1 + 1.5 / 1.5) = ln 2; doc 0 has tf 2, length 3, avg 2
    norm = 1.5 * (1 - 0.75 + 0.75 * 3 / 2)
    assert ix.scores("order") == pytest.approx([math.log(2) * 2 / (2 + norm), 0.0])
    assert ix.scores("order order")[0] == pytest.approx(2 * ix.scores("order")[0])
    assert ix.top("order", 5) == [0]
    assert ix.top("stock", 5) == [1, 0]  # the shorter document first
    assert LexicalIndex().scores("x") == [] and LexicalIndex().top("x", 3) == []


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text(alphabet="abc xyz_.", max_size=30), min_size=1, max_size=12),
    st.text(alphabet="abc xyz_.", max_size=20),
    st.integers(min_value=0, max_value=15),
)
def test_lexical_index_properties(docs: list[str], query: str, n: int) -> None:
    built = LexicalIndex(docs)
    added = LexicalIndex()
    for doc in docs:
        added.add(doc)
    assert built.scores(query) == added.scores(query)  # one at a time = all at once
    scores = built.scores(query)
    top = built.top(query, n)
    assert len(top) <= n and len(set(top)) == len(top)
    assert all(scores[i] > 0 for i in top)
    assert [scores[i] for i in top] == sorted((scores[i] for i in top), reverse=True)
    for a, b in itertools.pairwise(top):
        assert scores[a] > scores[b] or a < b  # equal scores keep insertion order
    missing = [i for i in range(len(docs)) if i not in top and scores[i] > 0]
    assert len(top) == n or not missing


def test_the_tool_index_finds_the_named_table() -> None:
    chunks = table_chunks(load_bundle().ddl)
    names = list(chunks)
    ix = LexicalIndex(chunks.values())
    top = [names[i] for i in ix.top("Which ISO 4217 currencies have no minor units?", 5)]
    assert top[0] == "core.currencies"
