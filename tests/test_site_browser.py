"""The results site in a real browser: headless Chromium (the system's, driven by playwright).

The site is built once from the committed board and two runs (gold, and one with wrong answers
and errors; see site_runs.py), with gold's first rows computed on the tiny state. Every page kind
is opened at 1400 and 800 px: no request may leave the page (every non-``file:`` request is
recorded and refused), nothing may stick out of the window or out of its chart, and a screenshot
is kept (under ``$HERON_ARTEFACTS`` when set, else the test's tmp folder). The DOM's numbers are
checked against the results records the site was built from.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Request, Route, sync_playwright

from pytest_heron.dataset import load_questions
from pytest_heron.results.document import write_results
from pytest_heron.sandbox.execute import execute
from pytest_heron.site.build import build_site
from pytest_heron.site.gold import gold_rows
from pytest_heron.site.pairing import pair
from pytest_heron.site.schema import schema_modules
from site_runs import flawed_run, gold_run
from test_report_render import find_chromium

pytestmark = pytest.mark.embedded

ROOT = Path(__file__).resolve().parents[1]
PAGES = {  # page kind: (path, the navigation entry it belongs to)
    "board": ("index.html", "board"),
    "runs": ("runs/index.html", "runs"),
    "run": ("runs/flawed.html", "runs"),
    "questions": ("questions/index.html", "questions"),
    "question": ("questions/q009.html", "questions"),
    "compare-pick": ("compare/index.html", "compare"),
    "compare": ("compare/gold--flawed.html", "compare"),
    "schema": ("schema/index.html", "schema"),
    "module": ("schema/catalog.html", "schema"),
}

OVERFLOW_JS = """() => {
  const vw = document.documentElement.clientWidth, bad = [];
  if (document.documentElement.scrollWidth > vw + 1) {
    bad.push("the page scrolls sideways: " + document.documentElement.scrollWidth + " > " + vw);
  }
  const scrolled = (el) => {
    for (let p = el.parentElement; p; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === "auto" || o === "scroll" || o === "hidden") { return true; }
    }
    return false;
  };
  for (const el of document.querySelectorAll("body *")) {
    if (el.closest("svg") && el.tagName.toLowerCase() !== "svg") { continue; }
    const r = el.getBoundingClientRect();
    if (r.width > 0 && !scrolled(el) && r.right > vw + 1) {
      bad.push(el.tagName + "." + el.className + " ends at " + Math.round(r.right));
    }
  }
  for (const svg of document.querySelectorAll("svg")) {
    const s = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll("text")) {
      const r = t.getBoundingClientRect();
      if (r.width === 0) { continue; }
      if (r.left < s.left - 1 || r.right > s.right + 1 || r.top < s.top - 1 ||
          r.bottom > s.bottom + 1) {
        bad.push("text '" + t.textContent + "' sticks out of its chart");
      }
    }
  }
  return bad;
}"""


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, tiny_state: Any) -> Path:
    folder = tmp_path_factory.mktemp("site")
    runs = [folder / "runs-in" / "gold.json", folder / "runs-in" / "flawed.json"]
    write_results(runs[0], gold_run())
    write_results(runs[1], flawed_run())
    build_site(
        folder / "site",
        board=ROOT / "board",
        runs=runs,
        gold=lambda qs, _runs: gold_rows(tiny_state.reader_dsn, qs, "tiny state, seed 42"),
    )
    return folder / "site"


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("HERON_ARTEFACTS")
    folder = Path(where) / "site" if where else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Opened:
    def __init__(self, page: Page, leaving: list[str]) -> None:
        self.page, self.leaving = page, leaving


def _open(browser: Browser, site: Path, rel: str, width: int, js: bool = True) -> Opened:
    context = browser.new_context(viewport={"width": width, "height": 900}, java_script_enabled=js)
    leaving: list[str] = []

    def route(r: Route, request: Request) -> None:
        if request.url.startswith("file:"):
            r.continue_()
        else:
            leaving.append(request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.goto((site / rel).as_uri())
    return Opened(page, leaving)


@pytest.mark.parametrize("width", [1400, 800])
@pytest.mark.parametrize("kind", sorted(PAGES))
def test_every_page_kind_stays_in_its_box_and_fetches_nothing(
    browser: Browser, site: Path, artefacts: Path, kind: str, width: int
) -> None:
    path, nav = PAGES[kind]
    opened = _open(browser, site, path, width)
    page = opened.page
    assert page.locator("body").get_attribute("data-page") == nav
    assert page.locator("header.top a.active").inner_text().lower() == nav
    _artefact(page, artefacts / f"{kind}-{width}.png")
    assert page.evaluate(OVERFLOW_JS) == []
    assert opened.leaving == []
    page.context.close()


def test_the_board_shows_the_committed_rows_and_their_buckets(browser: Browser, site: Path) -> None:
    committed = json.loads((ROOT / "board" / "leaderboard.json").read_text())
    page = _open(browser, site, "index.html", 1400).page
    rows = page.locator("#board tbody tr")
    assert rows.count() == len(committed["rows"])
    for i, row in enumerate(committed["rows"]):
        assert rows.nth(i).locator(".exnum").inner_text() == f"{row['ex_multistate']:.1f}"
        assert row["tool"] in rows.nth(i).inner_text()
    assert page.locator("svg.chart[aria-label^='multi-state EX by']").count() == 5
    assert (
        page.locator("h2", has_text="Rejected submissions")
        .inner_text()
        .endswith(f"({len(committed['rejected'])})")
    )


def test_the_run_page_numbers_are_the_results_file_and_filters_work(
    browser: Browser, site: Path
) -> None:
    doc = flawed_run()
    m = doc.metrics
    page = _open(browser, site, "runs/flawed.html", 1400).page
    assert page.locator("#headline-ex").inner_text() == f"{m.ex_multistate:.1f}%"
    assert page.locator("[data-metric=errors] .num").inner_text() == str(m.errors)
    assert page.locator("[data-metric=ex1] .num").inner_text() == f"{m.ex1:.1f}"
    body = page.locator("#qtable tbody tr")
    assert body.count() == len(doc.outcomes)
    wrong = sum(not o.correct and o.error_kind is None for o in doc.outcomes)
    assert page.locator("#qtable tbody tr.wrong").count() == wrong
    assert page.locator("#q-q005 .v.no").count() == 1  # wrong on one state of three
    assert "relation" in page.locator("#q-q007").inner_text()  # the error message, not only kind
    assert "gold has 12 rows" in page.locator("#q-q009 .reason").inner_text()
    page.select_option("form.filters select[name=verdict]", "error")
    assert page.locator("#qtable tbody tr:visible").count() == m.errors
    page.select_option("form.filters select[name=verdict]", "")
    page.select_option("form.filters select[name=tag]", "trap_soft_delete")
    soft = sum("soft_delete" in o.traps for o in doc.outcomes)
    assert page.locator("#qtable tbody tr:visible").count() == soft
    page.click("#qtable th:has-text('tokens')")
    page.click("#qtable th:has-text('tokens')")  # second click: largest first
    tokens = [
        int(t) for t in page.locator("#qtable tbody tr:visible td:last-child").all_inner_texts()
    ]
    assert tokens == sorted(tokens, reverse=True)


def test_the_run_page_is_whole_with_javascript_off(browser: Browser, site: Path) -> None:
    page = _open(browser, site, "runs/flawed.html", 800, js=False).page
    assert page.locator("#qtable tbody tr:visible").count() == len(flawed_run().outcomes)
    assert page.locator("form.filters").is_hidden() and page.locator(".nojs-note").is_visible()
    assert page.locator("details summary").first.is_visible()


def test_a_question_page_shows_gold_every_run_and_its_tables(
    browser: Browser, site: Path, tiny_state: Any
) -> None:
    q = next(x for x in load_questions() if x.id == "q009")
    page = _open(browser, site, "questions/q009.html", 1400).page
    assert page.locator("#question-text").inner_text() == q.question
    assert "SELECT" in page.locator("#gold-sql").inner_text()
    gold = execute(tiny_state.reader_dsn, q.gold_sql, timeout_s=60, guard=False)
    headers = page.locator("table.gold-rows th").all_inner_texts()
    assert headers == gold.columns
    assert page.locator("table.gold-rows tbody tr").count() == min(5, len(gold.rows))
    blocks = page.locator(".run-block")
    assert blocks.count() == 2
    flawed = page.locator(".run-block[data-run=flawed]")
    assert (
        flawed.locator(".verdict-wrong").count() == 1 and "gold has 12 rows" in flawed.inner_text()
    )
    assert page.locator(".run-block[data-run=gold] .verdict-right").count() == 1
    assert flawed.locator("pre.diff .add").count() >= 1
    marked = page.locator("svg.fkmap g.table.hl")
    assert {marked.nth(i).get_attribute("data-table") for i in range(marked.count())} == set(
        q.gold_tables
    )


def test_the_comparison_counts_what_changed(browser: Browser, site: Path) -> None:
    p = pair(gold_run(), flawed_run())
    page = _open(browser, site, "compare/gold--flawed.html", 1400).page
    assert page.locator("[data-metric=a_only] .num").inner_text() == str(len(p.a_only))
    assert page.locator("[data-metric=b_only] .num").inner_text() == "0"
    assert page.locator("[data-metric=both_right] .num").inner_text() == str(p.both_right)
    assert page.locator("#changed tbody tr").count() == len(p.a_only) + len(p.b_only)
    pick = _open(browser, site, "compare/index.html", 1400).page
    pick.select_option("#pick select[name=a]", "gold")
    pick.select_option("#pick select[name=b]", "flawed")
    pick.click("#pick button")
    pick.wait_for_url("**/compare/gold--flawed.html")


def test_a_module_page_draws_every_table(browser: Browser, site: Path) -> None:
    mod = next(m for m in schema_modules() if m.name == "catalog")
    page = _open(browser, site, "schema/catalog.html", 1400).page
    assert page.locator("svg.fkmap g.table:not(.ext)").count() == len(mod.tables)
    assert page.locator("section.table-doc").count() == len(mod.tables)
    index = _open(browser, site, "schema/index.html", 1400).page
    assert index.locator("#modules tbody tr").count() == 14


def _artefact(page: Any, path: Path) -> None:
    """The page's screenshot, kept for people to look at (no assertion reads it). Chromium on a
    loaded machine sometimes cannot capture a full page ("Unable to capture screenshot"): it
    is tried again, and a second failure is a warning, not the test's verdict."""
    import warnings

    for attempt in (1, 2):
        try:
            page.screenshot(path=str(path), full_page=True)
            return
        except Exception as exc:  # playwright's Error: the artefact, not the property tested
            if attempt == 2:
                warnings.warn(f"no screenshot {path.name}: {exc}", stacklevel=1)
