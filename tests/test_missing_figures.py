"""n/a is not zero (issue 40): a figure a results file does not carry is null, ``n/a`` in
``heron compare`` and on the site, and the Grade is renormalised over the parts present.

The browser runner's results file (written by ``resultsDocument`` in
``src/pytest_heron/browser/assets/runner.js``) carries no Soft-F1, no superset verdict and no
timing: :func:`runner_file` writes one the way that function does, and the same answers scored
the way the plugin does give the figures to compare it with.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_heron.results.comparison import compare_runs
from pytest_heron.results.document import read_results
from pytest_heron.scoring import figures, metrics
from pytest_heron.site.build import build_site

N = 40
RIGHT = 23  # EX 57.5: a VES of 0 in the Grade's place cost 0.20 * 57.5 = 11.5 points
ABSENT = ("Soft-F1", "superset EX", "VES")


def _question(i: int, *, browser: bool, legacy: bool = False) -> dict[str, Any]:
    right = i < RIGHT
    wrong_rows = not right and i % 3 != 0
    ran = right or wrong_rows
    return {
        "id": f"q{i + 1:03d}",  # ids of the built-in set (the site makes their pages)
        "correct": right,
        "correct_by_state": {"42": right},
        "error_kind": None if ran else "db_error",
        "error": None if ran else "relation does not exist",
        "pred_sql": f"SELECT {i}",
        "tables_in_context": None,
        "usage": {
            "prompt_tokens": 2000 + i,
            "completion_tokens": 50,
            "calls": 2,
            "cached_calls": 0,
        },
        "latency_s": 1.0 + i / 10,
        "ves": None if browser or not right else 1.0,
        "soft_f1": None if browser or not ran else (1.0 if right else 0.5),
        "reason": None if right or not ran else "row counts differ",
        "shape": "single",
        "retrieval": "named",
        "traps": [],
        "gold_tables": [],
        "exact_match": False,
        "correct_superset": (False if legacy else None) if browser else right,
        "samples": None,
    }


def runner_file(path: Path, *, legacy: bool = False) -> Path:
    """A results file as the browser runner writes it (its conditions, its partial metrics
    block, its per-question records); ``legacy``: superset written as false, as before."""
    questions = [_question(i, browser=True, legacy=legacy) for i in range(N)]
    prompt = sum(q["usage"]["prompt_tokens"] for q in questions)
    completion = sum(q["usage"]["completion_tokens"] for q in questions)
    latencies = sorted(q["latency_s"] for q in questions)
    doc = {
        "version": 1,
        "board_eligible": False,
        "note": "a browser run (PGlite, tiny scale, one state): not eligible for the leaderboard",
        "conditions": {
            "adapter": "browser-agent",
            "adapter_version": "1",
            "scale": "tiny",
            "seeds": [42],
            "states": 1,
            "model": "some-model",
            "temperature": 0,
            "samples": 1,
            "adapter_conditions": {"agent_mode": "tools", "runner": "browser"},
            "price": None,
            "n_questions": N,
            "backend": "pglite",
            "data_version": "testdata",
            "questions_digest": "testdigest",
        },
        "metrics": {
            "ex1": 100.0 * RIGHT / N,
            "ex_multistate": 100.0 * RIGHT / N,
            "exact_match": 0.0,
            "tokens_prompt": prompt,
            "tokens_completion": completion,
            "tokens_per_q": round((prompt + completion) / N, 1),
            "errors": sum(q["error_kind"] is not None for q in questions),
            "latency_s_median": (latencies[N // 2 - 1] + latencies[N // 2]) / 2,
        },
        "breakdown": {},
        "questions": questions,
    }
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def plugin_file(path: Path) -> Path:
    """The same answers with every figure (as the plugin writes them: metrics recomputed)."""
    doc = json.loads(runner_file(path).read_text(encoding="utf-8"))
    doc["conditions"]["adapter_conditions"] = {"agent_mode": "tools"}
    doc["conditions"]["backend"] = "embedded"
    doc["questions"] = [_question(i, browser=False) for i in range(N)]
    doc["metrics"] = {"errors": doc["metrics"]["errors"]}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize("legacy", [False, True], ids=["null superset", "false superset"])
def test_a_runner_file_has_no_zero_for_what_it_does_not_carry(tmp_path: Path, legacy: bool) -> None:
    run = read_results(runner_file(tmp_path / "runner.json", legacy=legacy))
    m = run.metrics
    assert (m.soft_f1, m.ex_superset, m.ves, m.r_ves) == (None, None, None, None)
    assert m.ex_multistate == 57.5 and m.absent == ABSENT
    full = read_results(plugin_file(tmp_path / "plugin.json")).metrics
    assert full.absent == () and full.soft_f1 is not None and full.ex_superset == 57.5
    assert m.grade is not None and full.grade is not None
    # the Grade leaves VES out and renormalises: the other parts are the same in both files
    right = m.ex_multistate / 100  # thrift, reliability and speed are paid per right answer
    economy = 100 * min(1.0, metrics.REF_TOKENS_PER_Q / (m.tokens_per_q or 1))
    speed = 100 * min(1.0, metrics.REF_LATENCY_S / (m.latency_s_median or 1))
    reliability = 100 * (1 - m.errors / N)
    rest = right * (0.15 * economy + 0.10 * reliability + 0.10 * speed)
    assert m.grade == pytest.approx((0.45 * 57.5 + rest) / 0.80, abs=1e-3)
    assert m.grade > 0.45 * 57.5 + rest + 0.20 * 0.0 + 1  # well above VES counted as 0


def test_heron_compare_shows_n_a_and_names_what_is_missing(tmp_path: Path) -> None:
    a = runner_file(tmp_path / "runner.json")
    b = plugin_file(tmp_path / "plugin.json")
    done = subprocess.run(
        [sys.executable, "-m", "pytest_heron.cli", "compare", str(a), str(b)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()

    def row(label: str) -> list[str]:
        (line,) = [x for x in lines if x.startswith(label)]
        return re.split(r"\s{2,}", line[28:].strip())

    assert row("Soft-F1")[0] == "n/a" and row("Soft-F1")[1] != "n/a"
    assert row("superset EX") == ["n/a", "57.5%"]
    assert row("VES") == ["n/a", "57.5"]  # wrong answers count 0 in VES
    assert row("not in the file") == ["Soft-F1, superset EX, VES", "-"]
    assert "0.0%" not in done.stdout


def test_the_site_shows_n_a_and_says_which_figures_are_missing(tmp_path: Path) -> None:
    a = runner_file(tmp_path / "runner.json")
    b = plugin_file(tmp_path / "plugin.json")
    written = build_site(tmp_path / "site", runs=[a, b])
    pages = {p.relative_to(tmp_path / "site").as_posix(): p for p in written}
    run_pages = [p for name, p in pages.items() if name.startswith("runs/") and "runner" in name]
    assert run_pages, sorted(pages)
    html = run_pages[0].read_text(encoding="utf-8")
    for key in ("soft_f1", "ex_superset", "ves"):
        card = re.search(rf'data-metric="{key}"><div class="num">([^<]*)<', html)
        assert card is not None and card.group(1) == "n/a", key
    assert "not in this results file: Soft-F1, superset EX, VES (n/a, not 0)" in html
    assert "renormalised over the parts present (without VES)" in html
    compared = [p for name, p in pages.items() if name.startswith("compare/") and "--" in name]
    assert compared and all(
        "A: not in this results file" in p.read_text(encoding="utf-8")
        or "B: not in this results file" in p.read_text(encoding="utf-8")
        for p in compared
    )


def test_compare_runs_pairs_them_whatever_they_carry(tmp_path: Path) -> None:
    a = read_results(runner_file(tmp_path / "runner.json"))
    b = read_results(plugin_file(tmp_path / "plugin.json"))
    cmp = compare_runs(a, b, "runner", "plugin")
    assert cmp.drop("soft_f1") is None and cmp.drop("ves") is None  # no gate on a missing one
    assert cmp.drop("ex") == 0.0


# -- pure parts -----------------------------------------------------------------------------

parts = {
    "ex": st.floats(0, 100),
    "tokens": st.one_of(st.none(), st.floats(1, 1e6)),
    "n": st.integers(1, 200),
    "errors": st.integers(0, 200),
    "latency": st.one_of(st.none(), st.floats(0.001, 1e3)),
}


@given(**parts)
def test_a_missing_ves_weighs_as_the_mean_of_the_parts_present(
    ex: float, tokens: float | None, n: int, errors: int, latency: float | None
) -> None:
    """Renormalising is the same as giving VES the Grade of the other parts: put that value in
    VES's place and the Grade does not move; put 0 there and it falls (unless it is 0)."""
    errors = min(errors, n)
    without = metrics.grade(ex, None, tokens, errors, n, latency)
    assert without is not None and 0.0 <= without <= 100.0
    same = metrics.grade(ex, without, tokens, errors, n, latency)
    assert same == pytest.approx(without, abs=1e-3)
    zero = metrics.grade(ex, 0.0, tokens, errors, n, latency)
    assert zero is not None and (zero < without or without == pytest.approx(0.0, abs=1e-3))


@given(
    f1=st.lists(st.one_of(st.none(), st.floats(0, 1)), min_size=1, max_size=20),
    errored=st.lists(st.booleans(), min_size=20, max_size=20),
)
def test_soft_f1_uses_only_what_is_present(f1: list[float | None], errored: list[bool]) -> None:
    from pytest_heron.core.errors import ErrorKind
    from pytest_heron.scoring import Outcome

    outcomes = [
        Outcome(
            id=f"q{i}",
            soft_f1=None if errored[i] else v,
            error_kind=ErrorKind.DB_ERROR if errored[i] else None,
        )
        for i, v in enumerate(f1)
    ]
    got = figures.soft_f1_mean(outcomes)
    ran = [o for o in outcomes if o.error_kind is None]
    carried = [o.soft_f1 for o in ran if o.soft_f1 is not None]
    if ran and not carried:
        assert got is None  # missing, not 0
    else:
        known = len(carried) + len(outcomes) - len(ran)
        assert got == pytest.approx(100 * sum(carried) / known, abs=1e-3)
