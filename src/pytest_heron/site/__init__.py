"""The results site (``heron site``) and the run page of ``--heron-report``.

Stages: :mod:`~pytest_heron.site.inputs` reads and checks results files and the board;
:mod:`~pytest_heron.site.gold` optionally runs gold on the first state;
:mod:`~pytest_heron.site.pages` renders every page with the jinja2 templates in ``templates/``
(metric texts from :mod:`~pytest_heron.site.definitions`; charts from
:mod:`~pytest_heron.site.charts` and :mod:`~pytest_heron.site.buckets`; FK diagrams from
:mod:`~pytest_heron.site.schema`; SQL from :mod:`~pytest_heron.site.sqltext`; two-run pairing
from :mod:`~pytest_heron.site.pairing`); :mod:`~pytest_heron.site.build` writes them.
"""

from typing import TYPE_CHECKING

from pytest_heron.core.door import opener

# The door: what other stages may import from this one, each name loaded on first use
# (tests/test_layers.py holds every other stage to these names).
if TYPE_CHECKING:
    from pytest_heron.site.build import build_site as build_site
    from pytest_heron.site.gold import gold_rows_on_state as gold_rows_on_state
    from pytest_heron.site.report import check_report_folder as check_report_folder
    from pytest_heron.site.report import write_report as write_report

_DOOR = {
    "build_site": "build",
    "check_report_folder": "report",
    "gold_rows_on_state": "gold",
    "write_report": "report",
}
__getattr__ = opener(globals(), _DOOR)
