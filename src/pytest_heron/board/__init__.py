"""The board: the protocol a published result follows, submissions, their verification and the
leaderboard built from verified submissions only (``heron submit``, ``heron verify-submission``,
``heron leaderboard``)."""

from typing import TYPE_CHECKING

from pytest_heron.core.door import opener

# The door: what other stages may import from this one, each name loaded on first use
# (tests/test_layers.py holds every other stage to these names).
if TYPE_CHECKING:
    from pytest_heron.board.leaderboard import build_board as build_board
    from pytest_heron.board.leaderboard import check_board as check_board
    from pytest_heron.board.leaderboard import write_board as write_board
    from pytest_heron.board.protocol import BUILTIN_PRICES as BUILTIN_PRICES
    from pytest_heron.board.protocol import Protocol as Protocol
    from pytest_heron.board.protocol import default_protocol_path as default_protocol_path
    from pytest_heron.board.protocol import load_protocol as load_protocol
    from pytest_heron.board.submission import PLACEHOLDER as PLACEHOLDER
    from pytest_heron.board.submission import VERDICT as VERDICT
    from pytest_heron.board.submission import About as About
    from pytest_heron.board.submission import write_submission as write_submission
    from pytest_heron.board.verifier import summary_of as summary_of
    from pytest_heron.board.verifier import verify as verify
    from pytest_heron.board.verifier import write_verdict as write_verdict

_DOOR = {
    "About": "submission",
    "BUILTIN_PRICES": "protocol",
    "PLACEHOLDER": "submission",
    "Protocol": "protocol",
    "VERDICT": "submission",
    "build_board": "leaderboard",
    "check_board": "leaderboard",
    "default_protocol_path": "protocol",
    "load_protocol": "protocol",
    "summary_of": "verifier",
    "verify": "verifier",
    "write_board": "leaderboard",
    "write_submission": "submission",
    "write_verdict": "verifier",
}
__getattr__ = opener(globals(), _DOOR)
