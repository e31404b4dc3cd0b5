"""The results site (``heron site``) and the run page of ``--heron-report``.

Stages: :mod:`~pytest_heron.site.inputs` reads and checks results files and the board;
:mod:`~pytest_heron.site.gold` optionally runs gold on the first state;
:mod:`~pytest_heron.site.pages` renders every page with the jinja2 templates in ``templates/``
(metric texts from :mod:`~pytest_heron.site.definitions`; charts from
:mod:`~pytest_heron.site.charts` and :mod:`~pytest_heron.site.buckets`; FK diagrams from
:mod:`~pytest_heron.site.schema`; SQL from :mod:`~pytest_heron.site.sqltext`; two-run pairing
from :mod:`~pytest_heron.site.pairing`); :mod:`~pytest_heron.site.build` writes them.
"""
