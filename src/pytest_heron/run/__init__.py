"""The run, shaped like its hooks: the question items (:mod:`.items`), the hook objects
registered by xdist role (:mod:`.hooks`: the controller and the worker), the run's state and its
pre-flight (:mod:`.controller`, :class:`HeronRun`) and the vendor kit behind the ``heron_*``
fixtures (:mod:`.kit`). :mod:`pytest_heron.plugin` wires them; docs/question-walk.md follows
one question through them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_heron.core.door import opener

# The door: what other stages may import from this one, each name loaded on first use
# (tests/test_layers.py holds every other stage to these names).
if TYPE_CHECKING:
    from pytest_heron.run.controller import HeronRun as HeronRun
    from pytest_heron.run.hooks import Controller as Controller
    from pytest_heron.run.hooks import Worker as Worker
    from pytest_heron.run.hooks import XdistHooks as XdistHooks
    from pytest_heron.run.kit import Kit as Kit
    from pytest_heron.run.kit import Scorer as Scorer

_DOOR = {
    "Controller": "hooks",
    "HeronRun": "controller",
    "Kit": "kit",
    "Scorer": "kit",
    "Worker": "hooks",
    "XdistHooks": "hooks",
}
__getattr__ = opener(globals(), _DOOR)
