"""What pytest's session sees of the benchmark: the question items (:mod:`.items`), the hook
objects registered by xdist role (:mod:`.roles`: the controller and the worker) and the vendor
kit behind the ``heron_*`` fixtures (:mod:`.kit`). :mod:`pytest_heron.plugin` wires them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_heron.core.door import opener

# The door: what other stages may import from this one, each name loaded on first use
# (tests/test_layers.py holds every other stage to these names).
if TYPE_CHECKING:
    from pytest_heron.session.kit import Kit as Kit
    from pytest_heron.session.kit import Scorer as Scorer
    from pytest_heron.session.roles import Controller as Controller
    from pytest_heron.session.roles import Worker as Worker
    from pytest_heron.session.roles import XdistHooks as XdistHooks

_DOOR = {
    "Controller": "roles",
    "Kit": "kit",
    "Scorer": "kit",
    "Worker": "roles",
    "XdistHooks": "roles",
}
__getattr__ = opener(globals(), _DOOR)
