"""``heron site`` and ``--heron-report``: read the inputs, render every page, then write.

Nothing is written until every input has been read and every page rendered, so a bad results
file or board leaves the output folder as it was. Each file is written atomically.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pytest_heron.core.errors import ConfigError, ResultsFileError
from pytest_heron.core.safe_text import printable
from pytest_heron.dataset import GoldQuestion, is_sealed, load_questions
from pytest_heron.results import Results, write_atomic
from pytest_heron.site.gold import GoldRows
from pytest_heron.site.inputs import Run, read_board, read_runs, slug_for
from pytest_heron.site.pages import SiteInput, render_site
from pytest_heron.site.schema import schema_modules


def write_files(out: Path, files: Mapping[str, str]) -> list[Path]:
    """Write every page under ``out``; a page whose path would lie outside ``out`` (resolved,
    symlinks followed) is an error before anything is written."""
    root = out.resolve()
    for rel in files:
        if not (out / rel).resolve().is_relative_to(root) or (out / rel).resolve() == root:
            raise ResultsFileError(f"a page path {printable(rel[:80])!r} lies outside {out}")
    written = []
    for rel, text in files.items():
        path = out / rel
        write_atomic(path, text)
        written.append(path)
    return written


def check_question_ids(runs: Sequence[Run], questions: Sequence[GoldQuestion]) -> None:
    """Every question of every run is one of the question set's (a page is made per id)."""
    known = {q.id for q in questions}
    for run in runs:
        unknown = sorted(o.id for o in run.results.outcomes if o.id not in known)
        if unknown:
            raise ResultsFileError(
                f"{run.source}: question {unknown[0][:60]!r} is not in the question set"
                + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else "")
                + "; give the run's question set with --questions"
            )


def build_site(
    out: Path,
    *,
    board: Path | None = None,
    runs: Sequence[Path] = (),
    questions: Path | None = None,
    gold: Callable[[Sequence[GoldQuestion], Sequence[Run]], Mapping[str, GoldRows]] | None = None,
    runner: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[Path]:
    """Build the site in ``out`` and return the files written. ``gold`` computes the gold rows
    (given the questions and the runs); without it the question pages say they were not.
    ``runner`` adds the in-browser runner (:func:`pytest_heron.browser.build_runner`) under
    ``out/runner/`` and a navigation entry to it."""
    the_board = None if board is None else read_board(board)
    the_runs = tuple(read_runs(runs))
    if questions is not None and is_sealed(questions):  # docs/sealed.md: never on a site
        raise ConfigError(f"{questions}: a sealed question set is never shown on a site")
    qs = load_questions(questions)
    check_question_ids(the_runs, qs)
    data = SiteInput(
        runs=the_runs,
        board=the_board,
        questions={q.id: q for q in qs},
        modules=schema_modules(),
        gold=None if gold is None else gold(qs, the_runs),
        runner=runner,
    )
    written = write_files(out, render_site(data, _page_steps() if progress else None))
    if runner:
        from pytest_heron.browser import build_runner

        written.append(build_runner(out / "runner", progress=progress))
    return written


def _page_steps() -> Callable[[int, int, str], None]:
    """A progress callback for :func:`render_site`: a bar on a terminal, plain tenths
    otherwise (:class:`pytest_heron.core.progress.Steps`, made at the first call, when the total
    is known)."""
    from pytest_heron.core.progress import Steps

    made: list[Steps] = []

    def advance(done: int, total: int, what: str) -> None:
        if not made:
            made.append(Steps("site pages", total))
        made[0].advance(detail=what)

    return advance


def report_pages(
    results: Results, questions: Sequence[GoldQuestion], source: str
) -> dict[str, str]:
    """The pages of ``--heron-report``: the run page (``report.html``) with its question and
    schema pages."""
    data = SiteInput(
        runs=(Run(slug_for(Path(source), set()), source, results),),
        board=None,
        questions={q.id: q for q in questions},
        modules=schema_modules(),
        report=True,
    )
    return render_site(data)
