"""The figures beside EX: set-EX, pass^k, the token split and its price, cost per correct
answer, failures by mode; each null where it does not apply, and old results still load."""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chat_stub import ChatStub, completion
from pytest_heron import compare
from pytest_heron.compare.modes import distinct_rows, set_equal
from pytest_heron.core.errors import ErrorKind
from pytest_heron.database import StateRef
from pytest_heron.dataset.questions import GoldQuestion
from pytest_heron.results.conditions import Conditions
from pytest_heron.results.document import Results, results_document
from pytest_heron.results.terminal import summary_lines
from pytest_heron.scoring import metrics
from pytest_heron.scoring.metrics import Bucket, Summary
from pytest_heron.scoring.outcome import Outcome, Sample
from pytest_heron.scoring.score import score_sql
from pytest_heron.site.report import questions_csv
from pytest_heron.systems.llm.cache import ResponseCache
from pytest_heron.systems.llm.client import ChatClient, LLMConfig, Meter, parse_completion

PROPS = settings(max_examples=200, deadline=None, database=None)

# -- pass^k -----------------------------------------------------------------------------------


@PROPS
@given(st.integers(1, 30).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_pass_all_k_is_below_pass_at_k_and_falls_with_k(nc: tuple[int, int]) -> None:
    n, c = nc
    previous = 1.0
    for k in range(1, n + 1):
        every = metrics.pass_all_k(n, c, k)
        assert 0.0 <= every <= metrics.pass_at_k(n, c, k) + 1e-12
        assert every <= previous + 1e-12  # more samples must all be right: never easier
        previous = every
        assert (every == 0.0) == (c < k)
    assert abs(metrics.pass_all_k(n, c, 1) - c / n) < 1e-12
    assert abs(metrics.pass_at_k(n, c, 1) - c / n) < 1e-12
    assert metrics.pass_all_k(n, n, n) == 1.0


def _sampled(qid: str, verdicts: list[bool]) -> Outcome:
    samples = tuple(Sample(i, v, None, "SELECT 1") for i, v in enumerate(verdicts))
    return Outcome(qid, correct=verdicts[0], samples=samples)


def test_pass_all_k_is_null_for_one_sample_and_a_share_beside_ex_at_k() -> None:
    outcomes = [_sampled("a", [True, True, True]), _sampled("b", [True, False, True])]
    assert metrics.ex_all_k(outcomes, 1) is None
    s = metrics.summary(outcomes, 42, samples=3)
    assert s.ex_all_k == {"1": 83.3333, "3": 50.0}  # b: 2 of 3 right, so never all 3
    assert s.ex_at_k == {"1": 83.3333, "3": 100.0}
    assert metrics.summary(outcomes, 42, samples=1).ex_all_k is None


# -- tokens and their price -------------------------------------------------------------------

PRICE = {"prompt": 2.0, "completion": 8.0}
counts = st.integers(0, 10**7)


@PROPS
@given(counts, counts, counts, st.floats(0, 2.0))
def test_cached_tokens_cost_at_most_as_input(
    prompt: int, cached: int, completion_tokens: int, cached_price: float
) -> None:
    cached = min(cached, prompt)  # a part of the prompt, as providers count it
    as_input = metrics.cost_usd(prompt, completion_tokens, PRICE, cached)
    assert as_input == metrics.cost_usd(prompt, completion_tokens, PRICE)  # no cached price
    cheaper = metrics.cost_usd(
        prompt, completion_tokens, {**PRICE, "cached_prompt": cached_price}, cached
    )
    assert as_input is not None and cheaper is not None
    assert cheaper <= as_input + 1e-9
    expected = ((prompt - cached) * 2.0 + cached * cached_price + completion_tokens * 8.0) / 1e6
    assert abs(cheaper - expected) <= 1e-6 * max(1.0, expected)


def test_cost_per_correct_answer_is_null_without_correct_answers_or_cost() -> None:
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 0}
    right = Outcome("a", correct=True, usage=usage)
    wrong = Outcome("b", correct=False, usage=usage)
    price = {"prompt": 1.0, "completion": 1.0}
    assert metrics.summary([right, wrong], 42, price=price).cost_per_correct_usd == 2.0
    assert metrics.summary([wrong], 42, price=price).cost_per_correct_usd is None
    assert metrics.summary([right], 42, price=None).cost_per_correct_usd is None


def test_token_split_is_summed_and_null_when_not_reported() -> None:
    a = Outcome("a", usage={"prompt_tokens": 100, "completion_tokens": 50})
    b = Outcome(
        "b",
        usage={
            "prompt_tokens": 100,
            "completion_tokens": 50,
            "prompt_tokens_cached": 60,
            "completion_tokens_reasoning": 30,
        },
    )
    assert metrics.summary([a], 42).tokens_prompt_cached is None
    assert metrics.summary([a], 42).tokens_reasoning is None
    s = metrics.summary([a, b], 42)
    assert (s.tokens_prompt, s.tokens_prompt_cached, s.tokens_reasoning) == (200, 60, 30)
    assert s.tokens_per_q == 150  # the parts are inside prompt and completion: not added again


def test_the_client_reads_cached_and_reasoning_tokens(tmp_path: Path) -> None:
    reply = parse_completion(
        completion(
            "SELECT 1",
            prompt_tokens=90,
            completion_tokens=40,
            cached_tokens=64,
            reasoning_tokens=25,
        )
    )
    assert (reply.prompt_tokens_cached, reply.completion_tokens_reasoning) == (64, 25)
    plain = parse_completion(completion("SELECT 1", prompt_tokens=9, completion_tokens=4))
    assert (plain.prompt_tokens_cached, plain.completion_tokens_reasoning) == (None, None)
    meter = Meter()
    meter.add(plain)
    assert "prompt_tokens_cached" not in meter.usage()  # not reported: not a zero
    replies = [
        completion(
            "SELECT 1",
            prompt_tokens=90,
            completion_tokens=40,
            cached_tokens=64,
            reasoning_tokens=25,
        ),
        completion("SELECT 2", prompt_tokens=10, completion_tokens=5, cached_tokens=0),
    ]
    with ChatStub(replies) as stub:  # over real HTTP, then replayed from the cache
        client = ChatClient(
            LLMConfig(endpoint=stub.url, model="m", api_key="k", backoff_s=0.01),
            adapter="t",
            adapter_version="1",
            cache=ResponseCache(tmp_path / "cache.sqlite3"),
            data_version="dv1",
        )
        meter = Meter()
        for i in range(2):
            meter.add(client.chat([{"role": "user", "content": f"q{i}"}], question_id=f"q{i}"))
        replay = client.chat([{"role": "user", "content": "q0"}], question_id="q0")
    usage = meter.usage()
    assert usage["prompt_tokens_cached"] == 64 and usage["completion_tokens_reasoning"] == 25
    assert replay.cached and replay.prompt_tokens_cached == 64  # the cache keeps the split


# -- failures by mode -------------------------------------------------------------------------


def test_failures_by_mode_overall_and_per_bucket() -> None:
    def o(qid: str, shape: str, **values: Any) -> Outcome:
        return Outcome(qid, shape=shape, retrieval="named", **values)

    outcomes = [
        o("a", "single", error_kind=ErrorKind.DB_ERROR),
        o("b", "single", error_kind=ErrorKind.REJECTED),
        o("c", "join", error_kind=ErrorKind.TIMEOUT),  # neither: it ran out of time
        o("d", "join", correct=False),  # ran, other rows
        o("e", "join", correct=True),
        o("f", "join", error_kind=ErrorKind.ADAPTER_ERROR),  # no SQL at all
    ]
    s = metrics.summary(outcomes, 42)
    assert (s.failures_syntax, s.failures_semantic) == (2, 1)
    shapes = metrics.breakdown(outcomes, 42)["shape"]
    assert (shapes["single"].failures_syntax, shapes["single"].failures_semantic) == (2, 0)
    assert (shapes["join"].failures_syntax, shapes["join"].failures_semantic) == (0, 1)


# -- set-EX -----------------------------------------------------------------------------------

rows = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["x", "y", None])), max_size=12)


@PROPS
@given(rows, st.integers(0, 3), st.randoms(use_true_random=False))
def test_set_ex_ignores_duplicates_and_order_and_is_implied_by_ex(
    gold: list[tuple[Any, ...]], extra: int, rnd: random.Random
) -> None:
    pred = gold + gold[:extra]  # some rows again
    rnd.shuffle(pred)
    strict = compare.compare(gold, pred).equal
    assert set_equal(gold, pred, strict)
    assert set(distinct_rows(pred)) == set(gold) and len(distinct_rows(pred)) == len(set(gold))
    if extra and gold:
        assert not strict  # the duplicates make it wrong as a multiset
    missing = [r for r in pred if gold and r != gold[0]]
    if gold:
        assert not set_equal(gold, missing, compare.compare(gold, missing).equal)


def test_distinct_rows_of_unhashable_values_use_canonical_keys() -> None:
    assert distinct_rows([([1, 2], "a"), ([1, 2], "a"), ([2], "a")]) == [([1, 2], "a"), ([2], "a")]


def test_set_ex_per_state_and_multi_state_on_a_real_state(tiny_state) -> None:  # type: ignore[no-untyped-def]
    state = StateRef(
        tiny_state.seed, tiny_state.database, tiny_state.admin_dsn, tiny_state.reader_dsn
    )
    q = GoldQuestion(
        id="t1",
        question="Which currency codes are there?",
        gold_sql="SELECT code FROM core.currencies",
        gold_tables=("core.currencies",),
        shape="single",
        retrieval="named",
    )
    doubled = "SELECT code FROM core.currencies UNION ALL SELECT code FROM core.currencies"
    out = score_sql(q, doubled, [state], statement_timeout=30)
    seed = str(tiny_state.seed)
    assert not out.correct and out.correct_by_state == {seed: False}
    assert out.correct_set and out.correct_set_by_state == {seed: True}
    broken = score_sql(q, "SELECT nope FROM core.currencies", [state], statement_timeout=30)
    assert broken.error_kind is ErrorKind.DB_ERROR and broken.correct_set is False
    assert metrics.failure_mode(broken) == "syntax" and metrics.failure_mode(out) == "semantic"
    s = metrics.summary([out, broken], tiny_state.seed)
    assert (s.ex_multistate, s.ex_multistate_set, s.ex1_set) == (0.0, 50.0, 50.0)


# -- records: new keys appended, old files still load, the summary and CSV show them ------------


def _conditions() -> Conditions:
    return Conditions(adapter="gold", scale="tiny", seeds=(42,), states=1, n_questions=2)


def test_old_results_load_with_nulls_and_old_keys_stay_first() -> None:
    out = Outcome("a", correct=True, correct_by_state={"42": True})
    new = results_document(_conditions(), [out]).to_json()
    old_metric_keys = list(Summary.__dataclass_fields__)[:18]
    assert list(new["metrics"])[:18] == old_metric_keys  # existing keys first, in order
    old = dict(new)
    old["metrics"] = {k: v for k, v in new["metrics"].items() if k in old_metric_keys}
    old["questions"] = [
        {k: v for k, v in q.items() if not k.startswith("correct_set")} for q in new["questions"]
    ]
    old["breakdown"] = {
        axis: {
            name: {k: v for k, v in b.items() if not k.startswith("failures")}
            for name, b in buckets.items()
        }
        for axis, buckets in new["breakdown"].items()
    }
    back = Results.from_json(old)
    assert back.metrics.ex_multistate_set is None and back.metrics.failures_syntax is None
    assert back.outcomes[0].correct_set is None
    assert metrics.ex_set_multistate(back.outcomes) is None  # unknown, not 0
    assert Bucket.from_json({"n": 1, "ex1": 1.0, "ex_multistate": 1.0}).failures_semantic is None


def test_summary_and_csv_show_the_figures() -> None:
    outcomes = [
        Outcome(
            "a",
            correct=True,
            correct_by_state={"42": True},
            correct_set=True,
            correct_set_by_state={"42": True},
            shape="single",
            usage={"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_cached": 4},
        ),
        Outcome(
            "b",
            error_kind=ErrorKind.DB_ERROR,
            correct_set=False,
            correct_set_by_state={"42": False},
            shape="single",
        ),
    ]
    results = results_document(_conditions(), outcomes)
    text = "\n".join(summary_lines(results))
    assert "set-EX (rows as sets, BIRD's count; not EX): multi-state 50.0%, seed 42 50.0%" in text
    assert "pass^k: n/a (1 sample)" in text
    assert "failures by mode: syntax 1, semantic 0" in text
    assert "cost per correct answer: n/a" in text and "legend: set-EX" in text
    assert "of which cached prompt 4, reasoning n/a" in text
    assert "single 50.0% (n=2, syntax 1, semantic 0)" in text
    header, first, second = csv.reader(io.StringIO(questions_csv(results)))
    assert header[-5:] == [
        "tokens_prompt",
        "tokens_prompt_cached",
        "tokens_completion",
        "tokens_reasoning",
        "failure_mode",
    ]
    assert first[-5:] == ["10", "4", "5", "", ""]  # not reported: empty, not 0
    assert second[-1] == "syntax"
