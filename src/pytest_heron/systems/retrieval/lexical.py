"""The one lexical ranker: Okapi BM25 over stemmed words, pure Python, no extra to install.

Used by the ``bm25`` retrieval baseline (:class:`~.rankers.Bm25Ranker`, two fields summed) and by
the tool adapters (Vanna's store, the DIN-SQL / MAC-SQL fallback), so both rank text the same way.

- :func:`words`: lowercase runs of letters and digits (``snake_case`` and ``schema.table`` fall
  apart into words).
- :func:`terms`: :func:`words` minus English stop words (:data:`STOP_WORDS`, Lucene's list),
  each reduced by :func:`stem`.
- :func:`stem`: the Snowball English ("Porter2") stemmer, written here from the published
  algorithm (snowballstem.org, the 3.0 rules) so no compiled package is needed; a test checks it
  against PyStemmer's C implementation.
- :class:`LexicalIndex`: BM25, Lucene variant (``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``,
  ``tf / (tf + k1 (1 - b + b |d| / avgdl))``), k1 = 1.5, b = 0.75: the scores ``bm25s`` gives
  with its defaults, so the retrieval numbers did not move when it replaced ``bm25s``. A query
  term counts as often as it occurs in the query.

Everything here is deterministic: scores are sums in query-term order, and :meth:`LexicalIndex.top`
breaks equal scores by insertion order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

__all__ = ["STOP_WORDS", "LexicalIndex", "stem", "terms", "words"]

_WORD = re.compile(r"[a-z0-9]+")

# Lucene's English stop words (also bm25s's STOPWORDS_EN)
# fmt: off
STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
    "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
    "these", "they", "this", "to", "was", "will", "with",
))
# fmt: on


def words(text: str) -> list[str]:
    """Lowercase runs of letters and digits: ``"orders.order_lines"`` gives orders, order,
    lines."""
    return _WORD.findall(text.lower())


def terms(text: str) -> list[str]:
    """The indexed terms of ``text``: :func:`words` minus :data:`STOP_WORDS`, stemmed.

    >>> terms("Which customers have the most orders?")
    ['which', 'custom', 'have', 'most', 'order']
    """
    return [stem(w) for w in words(text) if w not in STOP_WORDS]


# -- the Snowball English stemmer ----------------------------------------------------------------

_VOWELS = frozenset("aeiouy")
_NOT_SHORT_END = frozenset("aeiouywxY")  # what cannot end a short syllable
_LI_BEFORE = frozenset("cdeghkmnrt")
_DOUBLES = ("bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt")
_REGION_PREFIXES = (
    "gener",
    "commun",
    "arsen",
    "past",
    "univers",
    "later",
    "emerg",
    "organ",
    "inter",
)
_WHOLE_WORDS = {
    "skis": "ski",
    "skies": "sky",
    "idly": "idl",
    "gently": "gentl",
    "ugly": "ugli",
    "early": "earli",
    "only": "onli",
    "singly": "singl",
    "sky": "sky",
    "news": "news",
    "howe": "howe",
    "atlas": "atlas",
    "cosmos": "cosmos",
    "bias": "bias",
    "andes": "andes",
}
_ING_LEFT_ALONE = ("inn", "out", "cann", "herr", "earr", "even")
_STEP2 = {
    "tional": "tion",
    "enci": "ence",
    "anci": "ance",
    "abli": "able",
    "entli": "ent",
    "izer": "ize",
    "ization": "ize",
    "ational": "ate",
    "ation": "ate",
    "ator": "ate",
    "alism": "al",
    "aliti": "al",
    "alli": "al",
    "fulness": "ful",
    "ousli": "ous",
    "ousness": "ous",
    "iveness": "ive",
    "iviti": "ive",
    "biliti": "ble",
    "bli": "ble",
    "ogist": "og",
    "ogi": "og",  # only after an l
    "fulli": "ful",
    "lessli": "less",
    "li": "",  # only after one of _LI_BEFORE
}
_STEP3 = {
    "tional": "tion",
    "ational": "ate",
    "alize": "al",
    "icate": "ic",
    "iciti": "ic",
    "ical": "ic",
    "ful": "",
    "ness": "",
    "ative": "",  # only in R2
}
# fmt: off
_STEP4 = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ism", "ate",
    "iti", "ous", "ive", "ize", "ion",  # "ion" only after s or t
)
# fmt: on


def _longest(word: str, suffixes: Iterable[str]) -> str:
    """The longest of ``suffixes`` that ``word`` ends with ("" when none)."""
    return max((s for s in suffixes if word.endswith(s)), key=len, default="")


def _after_vowel_consonant(word: str, start: int) -> int:
    """The index just past the first non-vowel that follows a vowel, from ``start``; the length
    of ``word`` when there is none."""
    for i in range(start + 1, len(word)):
        if word[i] not in _VOWELS and word[i - 1] in _VOWELS:
            return i + 1
    return len(word)


def _regions(word: str) -> tuple[int, int]:
    """Where R1 and R2 start."""
    prefix = next((p for p in _REGION_PREFIXES if word.startswith(p)), None)
    r1 = len(prefix) if prefix else _after_vowel_consonant(word, 0)
    # R2 is R1's own R1: a vowel then a non-vowel, both inside R1
    r2 = len(word)
    for i in range(r1 + 1, len(word)):
        if word[i] not in _VOWELS and word[i - 1] in _VOWELS:
            r2 = i + 1
            break
    return r1, r2


def _ends_short(word: str) -> bool:
    """Whether ``word`` ends in a short syllable (or in "past")."""
    if len(word) >= 3 and (
        word[-1] not in _NOT_SHORT_END and word[-2] in _VOWELS and word[-3] not in _VOWELS
    ):
        return True
    if len(word) == 2 and word[0] in _VOWELS and word[1] not in _VOWELS:
        return True
    return word.endswith("past")


def _has_vowel(text: str) -> bool:
    return any(ch in _VOWELS for ch in text)


def _step1a(w: str) -> str:
    suffix = _longest(w, ("sses", "ied", "ies", "s", "us", "ss"))
    if suffix == "sses":
        return w[:-2]
    if suffix in ("ied", "ies"):
        return w[:-3] + ("i" if len(w) > 4 else "ie")
    if suffix == "s" and _has_vowel(w[:-2]):
        return w[:-1]
    return w


def _step1b(w: str, r1: int) -> str:
    suffix = _longest(w, ("eed", "eedly", "ed", "edly", "ing", "ingly"))
    if not suffix:
        return w
    stem_part = w[: -len(suffix)]
    if suffix in ("eed", "eedly"):
        if stem_part in ("proc", "exc", "succ"):
            return w
        return stem_part + "ee" if len(stem_part) >= r1 else w
    if suffix == "ing":
        if len(stem_part) == 2 and stem_part[1] == "y" and stem_part[0] not in _VOWELS:
            return stem_part[0] + "ie"  # dying, lying, tying, vying
        if stem_part in _ING_LEFT_ALONE:
            return w
    if not _has_vowel(stem_part):
        return w
    w = stem_part
    if w.endswith(("at", "bl", "iz")):
        return w + "e"
    if w.endswith(_DOUBLES):
        if len(w) == 3 and w[0] in "aeo":
            return w
        return w[:-1]
    if len(w) == r1 and _ends_short(w):
        return w + "e"
    return w


def _step1c(w: str) -> str:
    if len(w) > 2 and w[-1] in "yY" and w[-2] not in _VOWELS:
        return w[:-1] + "i"
    return w


def _step2(w: str, r1: int) -> str:
    suffix = _longest(w, _STEP2)
    if not suffix or len(w) - len(suffix) < r1:
        return w
    before = w[: -len(suffix)]
    if suffix == "ogi" and not before.endswith("l"):
        return w
    if suffix == "li" and (not before or before[-1] not in _LI_BEFORE):
        return w
    return before + _STEP2[suffix]


def _step3(w: str, r1: int, r2: int) -> str:
    suffix = _longest(w, _STEP3)
    if not suffix or len(w) - len(suffix) < r1:
        return w
    if suffix == "ative" and len(w) - len(suffix) < r2:
        return w
    return w[: -len(suffix)] + _STEP3[suffix]


def _step4(w: str, r2: int) -> str:
    suffix = _longest(w, _STEP4)
    if not suffix or len(w) - len(suffix) < r2:
        return w
    before = w[: -len(suffix)]
    if suffix == "ion" and not before.endswith(("s", "t")):
        return w
    return before


def _step5(w: str, r1: int, r2: int) -> str:
    if w.endswith("e"):
        at = len(w) - 1
        if at >= r2 or (at >= r1 and not _ends_short(w[:-1])):
            return w[:-1]
    elif w.endswith("l") and len(w) - 1 >= r2 and w[:-1].endswith("l"):
        return w[:-1]
    return w


def stem(word: str) -> str:
    """The Snowball English stem of a lowercase word (a token of :func:`words`).

    >>> [stem(w) for w in ["currencies", "orders", "status", "address", "generously", "dying"]]
    ['currenc', 'order', 'status', 'address', 'generous', 'die']
    """
    if word in _WHOLE_WORDS:
        return _WHOLE_WORDS[word]
    if len(word) < 3:
        return word
    chars = list(word)
    for i, ch in enumerate(chars):  # y as a consonant: initial, or after a vowel
        if ch == "y" and (i == 0 or chars[i - 1] in _VOWELS):
            chars[i] = "Y"
    w = "".join(chars)
    r1, r2 = _regions(w)
    w = _step1a(w)
    w = _step1b(w, r1)
    w = _step1c(w)
    w = _step2(w, r1)
    w = _step3(w, r1, r2)
    w = _step4(w, r2)
    w = _step5(w, r1, r2)
    return w.replace("Y", "y")


# -- BM25 ----------------------------------------------------------------------------------------


class LexicalIndex:
    """Documents ranked for a query by BM25 over :func:`terms` (see the module docstring);
    documents can be added one at a time (Vanna trains its store that way).

    >>> ix = LexicalIndex(["orders of customers", "stock levels", "customer invoices"])
    >>> ix.top("which customers have invoices", 2)
    [2, 0]
    """

    K1 = 1.5
    B = 0.75

    def __init__(self, docs: Iterable[str] = ()) -> None:
        self._tf: list[dict[str, int]] = []
        self._lengths: list[int] = []
        self._df: dict[str, int] = {}
        for doc in docs:
            self.add(doc)

    def __len__(self) -> int:
        return len(self._tf)

    def add(self, doc: str) -> int:
        """Index ``doc`` (its :func:`terms`); returns its position."""
        return self.add_terms(terms(doc))

    def add_terms(self, doc_terms: Sequence[str]) -> int:
        """Index a document given as its terms; returns its position."""
        tf: dict[str, int] = {}
        for t in doc_terms:
            tf[t] = tf.get(t, 0) + 1
        for t in tf:
            self._df[t] = self._df.get(t, 0) + 1
        self._tf.append(tf)
        self._lengths.append(len(doc_terms))
        return len(self._tf) - 1

    def scores(self, query: str) -> list[float]:
        """One score per document, in insertion order."""
        return self.term_scores(terms(query))

    def term_scores(self, query_terms: Sequence[str]) -> list[float]:
        """One score per document for a query given as its terms."""
        n = len(self._tf)
        if n == 0:
            return []
        avg = sum(self._lengths) / n or 1.0
        known = [t for t in query_terms if t in self._df]
        idf = {t: math.log(1 + (n - self._df[t] + 0.5) / (self._df[t] + 0.5)) for t in known}
        out: list[float] = []
        for tf, length in zip(self._tf, self._lengths, strict=True):
            norm = self.K1 * (1 - self.B + self.B * length / avg)
            score = 0.0
            for t in known:
                f = tf.get(t, 0)
                if f:
                    score += idf[t] * f / (f + norm)
            out.append(score)
        return out

    def top(self, query: str, n: int) -> list[int]:
        """Positions of the ``n`` best documents with a positive score, best first (equal
        scores: the earlier document first)."""
        scored = self.scores(query)
        order = sorted(range(len(scored)), key=lambda i: (-scored[i], i))
        return [i for i in order[:n] if scored[i] > 0]
