"""Every page of the site, rendered from checked inputs to ``{relative path: HTML}``. Pure.

The page kinds and the navigation are listed once (:data:`NAV`): a later page kind adds one entry
there and one renderer below. Pages link to each other with relative paths (each page knows its
``root``), so the site works from ``file://`` and from any static host; styles and the little
script are inlined, charts are inline SVG, and a Content-Security-Policy forbids every fetch. All
text from results files goes through jinja2's autoescape after
:func:`~pytest_heron.core.safe_text.printable`.

Two layouts share these renderers: the site (``index.html``, ``runs/<slug>.html``,
``questions/<id>.html``, ``compare/<a>--<b>.html``, ``schema/<module>.html``) and the one-run
report folder of ``--heron-report`` (``report.html`` is the run page, with its question and
schema pages beside it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jinja2
import markupsafe

from pytest_heron.core.safe_text import printable
from pytest_heron.dataset import GoldQuestion
from pytest_heron.results import absent_note, conditions_line, usage_line
from pytest_heron.scoring import Outcome, error_kinds
from pytest_heron.site import charts, sqltext
from pytest_heron.site.buckets import heat_maps, row_label
from pytest_heron.site.definitions import METRICS
from pytest_heron.site.gold import GoldRows
from pytest_heron.site.inputs import Board, BoardRow, Run
from pytest_heron.site.pairing import condition_warnings, pair
from pytest_heron.site.schema import SchemaModule, diagram, module_of, tenant_keys


@dataclass(frozen=True)
class NavItem:
    key: str  # the page kind (the <body data-page>), also what marks the item active
    label: str
    href: str  # from the site's root


NAV = (
    NavItem("board", "Board", "index.html"),
    NavItem("runs", "Runs", "runs/index.html"),
    NavItem("run", "Run", "report.html"),  # the report folder's one run
    NavItem("questions", "Questions", "questions/index.html"),
    NavItem("compare", "Compare", "compare/index.html"),
    NavItem("schema", "Schema", "schema/index.html"),
    NavItem("runner", "Run in the browser", "runner/runner.html"),  # heron site --runner
)

_ENV: jinja2.Environment | None = None


def _shown(value: Any) -> Any:
    """Every value a template prints: a plain string goes through
    :func:`~pytest_heron.core.safe_text.printable` (control and bidi characters shown escaped),
    then autoescape; markup the renderers built (charts, already escaped) passes as it is."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return printable(value)
    return value


def environment() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        _ENV = jinja2.Environment(
            loader=jinja2.PackageLoader("pytest_heron.site", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=False,
            keep_trailing_newline=True,
            finalize=_shown,
        )
        _ENV.globals["interval"] = charts.interval
    return _ENV


def tokens_of(o: Outcome) -> int | None:
    """Billed tokens of one question (prompt + completion as reported), None without usage."""
    if not o.usage:
        return None
    return sum(int(v) for k, v in o.usage.items() if k.endswith("_tokens"))


def verdict_of(o: Outcome) -> str:
    return "error" if o.error_kind is not None else ("right" if o.correct else "wrong")


def _text(value: str | None) -> str:
    return "" if value is None else printable(value)


def _tags(shape: str, retrieval: str, traps: Sequence[str]) -> list[str]:
    out = [f"shape_{shape}"] if shape else []
    if retrieval:
        out.append(f"retrieval_{retrieval}")
    return out + [f"trap_{t}" for t in traps]


def _states(run: Run, o: Outcome) -> list[tuple[str, bool]]:
    seeds = [str(s) for s in run.results.conditions.seeds] or sorted(o.correct_by_state)
    return [(s, bool(o.correct_by_state.get(s))) for s in seeds]


@dataclass(frozen=True)
class SiteInput:
    """Everything a site is made of, already read and checked."""

    runs: tuple[Run, ...]
    board: Board | None
    questions: Mapping[str, GoldQuestion]
    modules: tuple[SchemaModule, ...]
    gold: Mapping[str, GoldRows] | None = None  # None: not computed
    report: bool = False  # the one-run report folder, not a site
    runner: bool = False  # runner/runner.html is built beside the pages (heron site --runner)


class _Site:
    def __init__(self, data: SiteInput) -> None:
        self.data = data
        self.env = environment()
        self.module_by_name = {m.name: m for m in data.modules}
        have = {"run"} if data.report else {"runs"}
        if data.board is not None and not data.report:
            have.add("board")
        have |= {"questions", "schema"}
        if data.runner and not data.report:
            have.add("runner")
        if len(data.runs) >= 2 and not data.report:
            have.add("compare")
        self.nav = [n for n in NAV if n.key in have]
        self.files: dict[str, str] = {}

    def run_href(self, run: Run) -> str:
        return "report.html" if self.data.report else f"runs/{run.slug}.html"

    def page(self, path: str, template: str, kind: str, title: str, **context: Any) -> None:
        root = "../" * path.count("/")
        html = self.env.get_template(template).render(
            root=root, nav=self.nav, kind=kind, title=title, **context
        )
        self.files[path] = html

    # -- the board -----------------------------------------------------------------------------

    def board(self, board: Board) -> None:
        rejected = [
            {
                "name": x.name,
                "tool": x.tool,
                "reasons": [printable(r) for r in x.reasons],
                "claimed": x.claimed,
                "reproduced": x.reproduced,
                "figures": sorted(set(x.claimed) | set(x.reproduced)),  # not "keys": a dict method
            }
            for x in board.rejected
        ]
        scatters, notes = self._scatters(
            [
                (row_label(r), r.ex_multistate, r.tokens_per_q, r.cost_usd, r.reference)
                for r in board.rows
            ],
            "board row",
        )
        self.page(
            "index.html",
            "board.html.j2",
            "board",
            "Leaderboard",
            board={
                "source": board.source,
                "rows": board.rows,
                "rejected": rejected,
                "unverified": board.unverified,
            },
            heat=self._heat(board.rows),
            scatters=scatters,
            scatter_notes=notes,
        )

    def _heat(self, rows: Sequence[BoardRow]) -> list[Any]:
        return heat_maps(rows, self.data.questions)

    @staticmethod
    def _scatters(
        items: Sequence[tuple[str, float | None, float | None, float | None, bool]], what: str
    ) -> tuple[list[Any], list[str]]:
        out, notes = [], []
        for idx, axis, unit in (
            (2, "billed tokens per question", "tokens"),
            (3, "cost, USD", "cost"),
        ):
            pts = [
                charts.Point(
                    float(it[idx] or 0), float(it[1]), it[0], "dot-ref" if it[4] else "dot"
                )
                for it in items
                if it[idx] is not None and it[1] is not None
            ]
            missing = [it[0] for it in items if it[idx] is None]
            if pts:
                out.append(
                    charts.scatter(
                        f"multi-state EX@1 against {axis}",
                        pts,
                        x_label=axis,
                        y_label="multi-state EX@1 (%)",
                    )
                )
            if missing:
                notes.append(
                    f"Not plotted against {unit} (no {unit} reported): "
                    + ", ".join(missing)
                    + f" ({len(missing)} {what}{'s' if len(missing) != 1 else ''})."
                )
        return out, notes

    # -- runs ----------------------------------------------------------------------------------

    def runs_index(self, path: str) -> None:
        scatters, notes = self._scatters(
            [
                (
                    r.slug,
                    r.results.metrics.ex_multistate,
                    r.results.metrics.tokens_per_q,
                    r.results.metrics.cost_usd,
                    r.results.conditions.adapter == "gold",
                )
                for r in self.data.runs
            ],
            "run",
        )
        self.page(
            path,
            "runs.html.j2",
            "runs",
            "Runs",
            runs=self.data.runs,
            scatters=scatters,
            scatter_notes=notes,
        )

    def run_page(self, run: Run) -> None:
        res = run.results
        m, c = res.metrics, res.conditions
        values: dict[str, Any] = {k: getattr(m, k) for k, _, _ in METRICS if k != "ex_at_k"}
        cards = []
        for key, label, definition in METRICS:
            if key == "ex_at_k":
                if not m.ex_at_k:
                    continue
                k, value = list(m.ex_at_k.items())[-1]
                cards.append(
                    {
                        "key": key,
                        "label": f"EX@{k} (ceiling)",
                        "shown": f"{value:.1f}",
                        "definition": definition,
                    }
                )
                continue
            value = values[key]
            if value is None:
                shown = "n/a"
            elif key == "cost_usd":
                shown = f"{value:.6f}"
            elif key in ("errors",):
                shown = str(value)
            elif key == "tokens_per_q":
                shown = f"{value:.0f}"
            elif key == "latency_s_median":
                shown = f"{value:.3f}"
            else:
                shown = f"{value:.1f}"
            if key == "tokens_per_q" and m.llm_calls and (m.replayed_calls or 0) >= m.llm_calls:
                label = "tokens / question (replayed)"  # every call came from the cache
            cards.append({"key": key, "label": label, "shown": shown, "definition": definition})
        bar_charts = [
            charts.bars(
                f"multi-state EX by {axis.replace('_', ' ')}",
                [(name, b.ex_multistate, f"(n={b.n})") for name, b in buckets.items()],
            )
            for axis, buckets in res.breakdown.items()
            if buckets
        ]
        kinds = error_kinds(res.outcomes)
        error_chart = (
            charts.bars(
                "questions per error kind",
                [(k, float(v), "") for k, v in kinds.items()],
                top=float(max(kinds.values())),
                unit="",
            )
            if kinds
            else None
        )
        right = [
            (float(t), f"{o.id}: {t} tokens")
            for o in res.outcomes
            if o.correct and (t := tokens_of(o)) is not None
        ]
        wrong = [
            (float(t), f"{o.id}: {t} tokens")
            for o in res.outcomes
            if not o.correct and (t := tokens_of(o)) is not None
        ]
        token_chart = (
            charts.lanes(
                "billed tokens of each question, right and wrong answers",
                [("right", right), ("wrong", wrong)],
                x_label="billed tokens (prompt + completion)",
            )
            if right or wrong
            else None
        )
        rows = []
        tags: set[str] = set()
        for o in res.outcomes:
            q = self.data.questions.get(o.id)
            row_tags = _tags(o.shape, o.retrieval, o.traps)
            tags.update(row_tags)
            rows.append(
                {
                    "id": o.id,
                    "question": q.question if q else "(not in this site's question set)",
                    "tags": row_tags,
                    "states": _states(run, o),
                    "verdict": verdict_of(o),
                    "error_kind": None if o.error_kind is None else str(o.error_kind),
                    "error": _text(o.error),
                    "reason": _text(o.reason),
                    "latency": o.latency_s,
                    "tokens": tokens_of(o),
                }
            )
        self.page(
            self.run_href(run),
            "run.html.j2",
            "run" if self.data.report else "runs",
            f"Run {run.slug}",
            run={"label": run.label, "source": run.source},
            conditions=conditions_line(c),
            usage=usage_line(c, m).split("   "),
            absent=absent_note(m),
            metrics=m,
            n=len(res.outcomes),
            states=c.states,
            seeds=", ".join(str(s) for s in c.seeds),
            ci=m.ex_multistate_ci95,
            cards=cards,
            charts=bar_charts,
            error_chart=error_chart,
            token_chart=token_chart,
            rows=rows,
            all_tags=sorted(tags),
        )

    # -- questions -----------------------------------------------------------------------------

    def question_ids(self) -> list[str]:
        ids = set(self.data.questions)
        for run in self.data.runs:
            ids.update(o.id for o in run.results.outcomes)
        return sorted(ids)

    def questions_index(self) -> None:
        rows = []
        by_run = [{o.id: o for o in r.results.outcomes} for r in self.data.runs]
        for qid in self.question_ids():
            q = self.data.questions.get(qid)
            outcome = next((m[qid] for m in by_run if qid in m), None)
            tags = (
                _tags(q.shape, q.retrieval, q.traps)
                if q
                else _tags(outcome.shape, outcome.retrieval, outcome.traps)
                if outcome
                else []
            )
            rows.append(
                {
                    "id": qid,
                    "question": q.question if q else "(not in this site's question set)",
                    "tags": tags,
                    "verdicts": [
                        ("right" if m[qid].correct else "wrong") if qid in m else "" for m in by_run
                    ],
                }
            )
        self.page(
            "questions/index.html",
            "questions.html.j2",
            "questions",
            "Questions",
            rows=rows,
            runs=self.data.runs,
        )

    def question_page(self, qid: str) -> None:
        q = self.data.questions.get(qid)
        if q is None:
            q = GoldQuestion(
                qid, "(This question is not in the site's question set.)", "", (), "", ""
            )
        answers = []
        for run in self.data.runs:
            o = next((x for x in run.results.outcomes if x.id == qid), None)
            if o is None:
                continue
            sql = None if o.pred_sql is None else sqltext.highlight(sqltext.layout(o.pred_sql))
            answers.append(
                {
                    "slug": run.slug,
                    "label": run.label,
                    "verdict": verdict_of(o),
                    "states": _states(run, o),
                    "error_kind": None if o.error_kind is None else str(o.error_kind),
                    "error": _text(o.error),
                    "reason": _text(o.reason),
                    "sql": sql,
                    "diff": [] if o.pred_sql is None else sqltext.diff(q.gold_sql, o.pred_sql),
                }
            )
        gold_tables = frozenset(q.gold_tables)
        diagrams = []
        for name in sorted({module_of(t) for t in q.gold_tables}):
            mod = self.module_by_name.get(name)
            if mod is not None:
                diagrams.append(diagram(mod, highlight=gold_tables, link=f"../schema/{name}.html"))
        gold = None if self.data.gold is None else self.data.gold.get(qid)
        if self.data.gold is not None and gold is None and q.gold_sql:
            gold = GoldRows(where="", error="not run")
        self.page(
            f"questions/{qid}.html",
            "question.html.j2",
            "questions",
            f"Question {qid}",
            q=q,
            tags=_tags(q.shape, q.retrieval, q.traps),
            gold_sql=sqltext.highlight(sqltext.layout(q.gold_sql)),
            gold=gold,
            diagrams=diagrams,
            answers=answers,
        )

    # -- two runs ------------------------------------------------------------------------------

    def compare_pages(self) -> None:
        runs = self.data.runs
        pairs = [(a, b) for a in runs for b in runs if a.slug != b.slug]
        self.page(
            "compare/index.html",
            "compare_index.html.j2",
            "compare",
            "Compare two runs",
            runs=runs,
            pairs=pairs,
        )
        for a, b in pairs:
            p = pair(a.results, b.results)
            questions = self.data.questions
            changed = sorted([(qid, True) for qid in p.a_only] + [(qid, False) for qid in p.b_only])
            self.page(
                f"compare/{a.slug}--{b.slug}.html",
                "compare.html.j2",
                "compare",
                f"{a.slug} vs {b.slug}",
                a={"label": a.label},
                b={"label": b.label},
                cmp={
                    "common": p.common,
                    "a_only": p.a_only,
                    "b_only": p.b_only,
                    "both_right": p.both_right,
                    "both_wrong": p.both_wrong,
                    "p": p.p,
                    "ex_a": p.ex_a,
                    "ex_b": p.ex_b,
                    "deltas": p.deltas,
                    "changed": [
                        (qid, questions[qid].question if qid in questions else "", a_right)
                        for qid, a_right in changed
                    ],
                },
                warnings=condition_warnings(a.results, b.results),
                absent=[
                    f"{side}: {note}"
                    for side, r in (("A", a), ("B", b))
                    if (note := absent_note(r.results.metrics))
                ],
            )

    # -- the schema ----------------------------------------------------------------------------

    def schema_pages(self) -> None:
        mods = self.data.modules
        self.page(
            "schema/index.html",
            "schema_index.html.j2",
            "schema",
            "Schema",
            modules=mods,
            n_tables=sum(len(m.tables) for m in mods),
            n_fks=sum(len(m.foreign_keys) for m in mods),
        )
        readers: dict[str, list[str]] = {}
        for qid, q in sorted(self.data.questions.items()):
            for t in q.gold_tables:
                readers.setdefault(t, []).append(qid)
        for mod in mods:
            refs: dict[tuple[str, str], list[Any]] = {}
            for f in mod.foreign_keys:
                refs.setdefault((f.table, f.column), []).append(f)
            self.page(
                f"schema/{mod.name}.html",
                "schema_module.html.j2",
                "schema",
                f"Module {mod.name}",
                mod=mod,
                diagram=diagram(mod),
                tenant_keys=tenant_keys(mod) if mod.name != "core" else 0,
                refs=refs,
                questions=readers,
            )


def render_site(
    data: SiteInput, progress: Callable[[int, int, str], None] | None = None
) -> dict[str, str]:
    """Every page of the site (or of the one-run report folder), by relative path.
    ``progress(done, total, what)`` is called after each unit of work (a run's page, a
    question's page, the board, the schema pages)."""
    site = _Site(data)
    work: list[tuple[str, Callable[[], None]]] = []
    if data.report:
        work += [(run.slug, functools.partial(site.run_page, run)) for run in data.runs]
    else:
        if data.board is not None:

            def board(b: Any = data.board) -> None:
                site.board(b)
                site.runs_index("runs/index.html")

            work.append(("board", board))
        else:

            def indexes() -> None:
                site.runs_index("index.html")
                site.runs_index("runs/index.html")

            work.append(("runs", indexes))
        work += [(run.slug, functools.partial(site.run_page, run)) for run in data.runs]
        if len(data.runs) >= 2:
            work.append(("comparisons", site.compare_pages))
    work.append(("questions", site.questions_index))
    work += [(qid, functools.partial(site.question_page, qid)) for qid in site.question_ids()]
    work.append(("schema", site.schema_pages))
    for done, (what, job) in enumerate(work, 1):
        job()
        if progress is not None:
            progress(done, len(work), what)
    return dict(sorted(site.files.items()))
