"""Metrics: pure functions, property-tested."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_heron.board.leaderboard import board_grade
from pytest_heron.compare import modes
from pytest_heron.scoring import context, grade_note, metrics, similarity
from pytest_heron.scoring.outcome import Outcome, Sample

cells = st.one_of(st.none(), st.integers(-5, 5), st.sampled_from(["a", "b", "c"]))
tables = st.lists(st.tuples(cells, cells), max_size=12)


@given(tables)
@settings(max_examples=200, deadline=None)
def test_soft_f1_is_one_for_equal_results_in_any_order(rows: list[tuple[Any, ...]]) -> None:
    shuffled = rows[:]
    random.Random(len(rows)).shuffle(shuffled)
    assert modes.soft_f1(rows, shuffled) == 1.0


@given(tables, tables)
@settings(max_examples=200, deadline=None)
def test_soft_f1_is_a_share_and_symmetric_in_order(
    gold: list[tuple[Any, ...]], pred: list[tuple[Any, ...]]
) -> None:
    score = modes.soft_f1(gold, pred)
    assert 0.0 <= score <= 1.0
    assert score == modes.soft_f1(gold, list(reversed(pred)))


def test_soft_f1_gives_partial_credit() -> None:
    assert modes.soft_f1([(1, "a"), (2, "b")], [(1, "a")]) == pytest.approx(2 / 3)
    assert modes.soft_f1([(1, "a")], []) == 0.0
    assert modes.soft_f1([], []) == 1.0
    assert modes.soft_f1([(1, "a")], [(1, "x")]) == 0.5


@given(st.integers(1, 30), st.data())
def test_pass_at_k_bounds(n: int, data: st.DataObject) -> None:
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    p = metrics.pass_at_k(n, c, k)
    assert 0.0 <= p <= 1.0
    assert (p == 0.0) == (c == 0)
    if c == n:
        assert p == 1.0
    if k > 1:
        assert p >= metrics.pass_at_k(n, c, k - 1)


def test_pass_at_k_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        metrics.pass_at_k(3, 4, 1)


def test_grade_formula() -> None:
    assert metrics.grade(100.0, 100.0, None, 0, 10, 0.1) == 100.0
    got = metrics.grade(50.0, 40.0, 10000.0, 2, 10, 10.0)
    right = 50 / 100  # thrift, reliability and speed are paid per right answer
    expected = 0.45 * 50 + 0.20 * 40 + right * (0.15 * 50 + 0.10 * 80 + 0.10 * 50)
    assert got == pytest.approx(expected)
    assert metrics.grade(0.0, None, None, 10, 10, 0.001) == 0.0  # nothing ran: 0, not 25
    assert metrics.grade(0.0, 0.0, None, 0, 10, 0.001) == 0.0  # all ran, none right: 0, not 35
    assert metrics.grade(None, None, None, 0, 0, None) is None


def test_the_select_1_system_of_issue_44_grades_zero() -> None:
    """100 answers of ``SELECT 1``: each runs (no error), reports no tokens, answers at once, and
    none is right. It graded 35.0 when "answered" meant "ran"; it grades 0, and the summary's
    note says why."""
    outcomes = [
        Outcome(f"q{i:03}", correct=False, latency_s=0.001, ves=None, soft_f1=0.05)
        for i in range(100)
    ]
    m = metrics.summary(outcomes, 42)
    assert (m.ex_multistate, m.errors, m.soft_f1) == (0.0, 0, 5.0)
    assert m.grade == 0.0
    assert grade_note(m.ex_multistate, m.grade) is not None


def test_ves_counts_only_correct_answers() -> None:
    outcomes = [
        Outcome("a", correct=True, ves=1.0),
        Outcome("b", correct=True, ves=4.0),
        Outcome("c", correct=False, ves=None),
        Outcome("d", correct=False, ves=None),
    ]
    assert metrics.ves(outcomes) == pytest.approx(100.0 * 5.0 / 4)


def test_bootstrap_interval_is_deterministic_and_brackets_the_share() -> None:
    hits = [True] * 70 + [False] * 30
    lo, hi = metrics.bootstrap_interval(hits)  # type: ignore[misc]
    assert lo < 70.0 < hi and hi - lo < 25
    assert metrics.bootstrap_interval(hits) == (lo, hi)
    assert metrics.bootstrap_interval([]) is None


def test_mcnemar_exact() -> None:
    assert metrics.mcnemar_exact(0, 0) == 1.0
    assert metrics.mcnemar_exact(3, 3) == 1.0
    assert metrics.mcnemar_exact(10, 0) == pytest.approx(2 / 1024)
    assert metrics.mcnemar_exact(6, 1) == pytest.approx(2 * (1 + 7) / 128)


def test_exact_match_normalises_but_is_strict() -> None:
    assert similarity.exact_match("SELECT a FROM t", "select  a\nfrom t;")
    assert not similarity.exact_match("SELECT a FROM t", "SELECT t.a FROM t")
    assert not similarity.exact_match("SELECT a FROM t", None)


def _sampled(flags: list[bool]) -> Outcome:
    return Outcome("q", samples=tuple(Sample(i, f, None, None) for i, f in enumerate(flags)))


@given(
    st.integers(2, 12).flatmap(
        lambda n: st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=1, max_size=8)
    )
)
@settings(max_examples=150, deadline=None)
def test_ex_at_k_is_monotone_in_k_and_starts_at_the_mean_share(flags: list[list[bool]]) -> None:
    n = len(flags[0])
    at_k = metrics.ex_at_k([_sampled(f) for f in flags], n)
    assert at_k is not None and next(iter(at_k)) == "1" and list(at_k)[-1] == str(n)
    values = list(at_k.values())
    assert values == sorted(values) and all(0 <= v <= 100 for v in values)
    mean_share = 100 * sum(sum(f) / n for f in flags) / len(flags)
    assert at_k["1"] == pytest.approx(mean_share, abs=1e-3)
    # EX@n: a question counts as soon as any sample was right
    assert at_k[str(n)] == pytest.approx(100 * sum(any(f) for f in flags) / len(flags), abs=1e-3)


def test_ex_at_k_needs_samples_and_counts_missing_ones_as_wrong() -> None:
    assert metrics.ex_at_k([_sampled([True])], 1) is None
    assert metrics.ex_at_k([], 5) is None
    assert list(metrics.ex_at_k([_sampled([True] * 12)], 12) or {}) == ["1", "5", "10", "12"]
    crashed = Outcome("c", correct=False)  # an infra crash has no samples list
    assert metrics.ex_at_k([_sampled([True, True]), crashed], 2) == {"1": 50.0, "2": 50.0}


@pytest.mark.parametrize(
    ("ratio", "reward"),
    [
        (100.0, 1.25),
        (2.0, 1.25),
        (1.999, 1.0),
        (1.0, 1.0),
        (0.999, 0.75),
        (0.5, 0.75),
        (0.499, 0.5),
        (0.25, 0.5),
        (0.2499, 0.25),
        (0.0, 0.25),
    ],
)
def test_ves_reward_buckets(ratio: float, reward: float) -> None:
    assert metrics.ves_reward(ratio) == reward


def test_r_ves_uses_the_squared_ves_factor_and_counts_wrong_answers_as_zero() -> None:
    outcomes = [
        Outcome("a", correct=True, ves=2.0),  # ratio 4 -> 1.25
        Outcome("b", correct=True, ves=0.6),  # ratio 0.36 -> 0.5
        Outcome("c", correct=False, ves=None),  # wrong -> 0
        Outcome("d", correct=True, ves=None),  # not timed (e.g. a timed run failed): left out
    ]
    assert metrics.r_ves(outcomes) == round(100 * (1.25 + 0.5) / 3, 4)
    assert metrics.r_ves([]) is None


def test_cost_from_billed_tokens_and_a_price() -> None:
    price = {"prompt": 3.0, "completion": 15.0}
    assert metrics.cost_usd(1_000_000, 0, price) == 3.0
    assert metrics.cost_usd(200, 100, price) == pytest.approx((200 * 3 + 100 * 15) / 1e6)
    assert metrics.cost_usd(None, None, price) is None  # nothing billed: n/a, not 0
    assert metrics.cost_usd(10, 10, None) is None  # no price for the model: n/a


def test_price_table_lookup_and_validation(tmp_path: Any) -> None:
    from pytest_heron.core.errors import ConfigError
    from pytest_heron.scoring.pricing import load_prices, price_for

    builtin = load_prices()
    assert price_for("gpt-4o-mini", builtin) == price_for("openai/gpt-4o-mini", builtin)
    assert price_for("unknown-model", builtin) is None and price_for(None, builtin) is None
    for text, message in [
        ("just text", "has no 'models' mapping"),
        ("models:\n  m: {prompt: -1, completion: 0}\n", "model 'm': expected"),
        ("models: [1, 2", "cannot read"),
    ]:
        path = tmp_path / "p.yaml"
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_prices(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_prices(tmp_path / "missing.yaml")


@given(
    ex=st.floats(0, 100),
    ves=st.one_of(st.none(), st.floats(0, 200)),
    tokens=st.one_of(st.none(), st.floats(0, 1e7)),
    n=st.integers(1, 200),
    errors=st.integers(0, 200),
    latency=st.one_of(st.none(), st.floats(0, 1e4)),
)
def test_the_grade_is_at_most_100_whatever_the_parts(
    ex: float, ves: float | None, tokens: float | None, n: int, errors: int, latency: float | None
) -> None:
    value = metrics.grade(ex, ves, tokens, min(errors, n), n, latency)
    assert value is not None and 0.0 <= value <= 100.0


@settings(deadline=None)
@given(
    n=st.integers(1, 200),
    tokens=st.one_of(st.none(), st.floats(0, 1e6)),
    latency=st.one_of(st.none(), st.floats(0, 1e3)),
)
def test_a_run_with_no_answers_grades_zero(
    n: int, tokens: float | None, latency: float | None
) -> None:
    """Every question an error: however cheap and fast the failures, the Grade is 0 (it was 25
    when thrift and speed counted without answers), on a leaderboard too."""
    assert metrics.grade(0.0, None, tokens, n, n, latency) == 0.0
    reproduced = {"ex_multistate": 0.0, "tokens_per_q": tokens, "latency_s_median": latency}
    assert board_grade({**reproduced, "errors": n}, n, 5000.0, 1.0) == 0.0


@given(
    ex=st.floats(0, 100),
    errors=st.integers(0, 50),
    tokens=st.floats(1, 1e5),
    latency=st.floats(0.01, 100),
)
def test_thrift_reliability_and_speed_are_paid_per_right_answer(
    ex: float, errors: int, tokens: float, latency: float
) -> None:
    n = 50
    right = ex / 100
    economy = 100 * min(1.0, 5000 / tokens)
    speed = 100 * min(1.0, 5 / latency)
    reliability = 100 * (1 - errors / n)
    # VES missing: left out, the other weights renormalised, never counted as 0
    expected = (0.45 * ex + right * (0.15 * economy + 0.10 * reliability + 0.10 * speed)) / 0.80
    got = metrics.grade(ex, None, tokens, errors, n, latency)
    assert got == pytest.approx(expected, abs=1e-3)
    assert got is not None and got <= 100.0


@given(
    ves=st.one_of(st.none(), st.floats(0, 200)),
    tokens=st.one_of(st.none(), st.floats(0, 1e7)),
    n=st.integers(1, 200),
    errors=st.integers(0, 200),
    latency=st.one_of(st.none(), st.floats(0, 1e4)),
)
def test_ex_zero_grades_zero_whatever_the_speed(
    ves: float | None, tokens: float | None, n: int, errors: int, latency: float | None
) -> None:
    """VES credits correct answers only, so with EX 0 a run's VES is 0 (or not measured)."""
    value = metrics.grade(0.0, None if ves is None else 0.0, tokens, min(errors, n), n, latency)
    assert value == 0.0
    assert grade_note(0.0, value) is not None


@given(
    ves=st.one_of(st.none(), st.floats(0, 200)),
    tokens=st.one_of(st.none(), st.floats(0, 1e7)),
    latency=st.one_of(st.none(), st.floats(0, 1e4)),
)
def test_a_run_right_on_every_question_grades_as_before(
    ves: float | None, tokens: float | None, latency: float | None
) -> None:
    """EX 100 with no errors (the gold adapter): C = 1, so the Grade is the plain weighted sum
    the formula before issue 44 gave (that formula scaled thrift and speed by the share that
    ran, 1 here too): the gold adapter's Grade is unchanged."""
    economy = 100.0 if not tokens else 100 * min(1.0, 5000 / tokens)
    speed = 100.0 if not latency else 100 * min(1.0, 5 / latency)
    before = 0.45 * 100 + 0.20 * min(100.0, 0.0 if ves is None else ves) + 10.0
    before += 0.15 * economy + 0.10 * speed
    if ves is None:  # a part the run does not carry is left out and the rest renormalised
        before /= 0.80
    assert metrics.grade(100.0, ves, tokens, 0, 100, latency) == pytest.approx(before, abs=1e-3)


def test_the_worked_example_of_docs_metrics_holds() -> None:
    """docs/metrics.md: EX 40, VES 38, 5 errors in 100, 2,500 tokens/q, 10 s median: 37.4."""
    assert metrics.grade(40.0, 38.0, 2500.0, 5, 100, 10.0) == pytest.approx(37.4)
    assert metrics.grade(0.0, 0.0, None, 0, 100, 0.001) == 0.0  # the SELECT 1 system


gold_lists = st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=4, unique=True)
table_lists = st.lists(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), max_size=26, unique=True)


@given(gold=gold_lists, ranked=table_lists, k=st.integers(1, 30))
def test_set_recall_at_k_grows_with_k_and_an_unranked_set_counts_at_its_size(
    gold: list[str], ranked: list[str], k: int
) -> None:
    at_k = context.recall_at_k(gold, ranked, None, k)
    assert at_k is not None and 0.0 <= at_k <= 1.0
    wider = context.recall_at_k(gold, ranked, None, k + 1)
    assert wider is not None and wider >= at_k
    unranked = context.recall_at_k(gold, None, ranked, k)
    whole = len(set(gold) & set(ranked)) / len(gold)
    assert unranked == (whole if len(ranked) <= k else 0.0)
    # the set as a ranking in any order can only do as well at k: the ranking is what is credited
    assert at_k >= (unranked or 0.0)


def test_run_set_recall_at_k_is_na_without_reported_tables() -> None:
    full_schema = [Outcome("a", gold_tables=("x",)), Outcome("b", gold_tables=("y",))]
    m = metrics.summary(full_schema, 42)
    assert (m.set_recall_at_k, m.context_tables_median, m.set_recall) == (None, None, None)
    assert m.tables_ranked_n == 0
    every = (*(f"t{i}" for i in range(209)), "x", "y")
    unranked = [
        Outcome(o.id, gold_tables=o.gold_tables, tables_in_context=every) for o in full_schema
    ]
    m = metrics.summary(unranked, 42)
    assert m.set_recall_at_k == {"5": 0.0, "10": 0.0, "20": 0.0}
    assert (m.context_tables_median, m.set_recall) == (211.0, 100.0)
    ranked = [Outcome("a", gold_tables=("x",), tables_ranked=("w", "x", *every))]
    assert metrics.summary(ranked, 42).set_recall_at_k == {"5": 100.0, "10": 100.0, "20": 100.0}
