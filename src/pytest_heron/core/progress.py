"""Progress of a long step: a bar redrawn in place on a terminal, plain lines otherwise.

One small helper (standard library only) for every step that takes more than a few seconds:
seeding, ``heron recall --method embedding``, ``heron verify-submission``, the gold audit,
``heron site``. A :class:`Steps` counts units of work towards a total. When its stream is a
terminal it redraws one line (``heron: label [#####.....] 40% 4/10 detail``) at most every
:data:`REDRAW_S`; otherwise it emits a plain line each time another tenth of the work is done
(10 %, 20 %, ... 100 %), so a log or a CI page gets at most eleven lines per step, the same ones
on every run.

>>> lines = []
>>> steps = Steps("embedding", 4, emit=lines.append, tty=False)
>>> for _ in range(4):
...     steps.advance()
>>> lines
['embedding: 0/4 (0%)', 'embedding: 1/4 (25%)', 'embedding: 2/4 (50%)', 'embedding: 3/4 (75%)', \
'embedding: 4/4 (100%)']
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

REDRAW_S = 0.2  # a terminal bar is redrawn at most this often (and at the end)
WIDTH = 24  # characters of the bar


class Steps:
    """``total`` units of work called ``label``; see the module docstring.

    ``emit`` receives the plain lines (default: written to ``stream`` with a ``heron:``
    prefix); ``tty`` forces one mode (default: whether ``stream``, default stderr, is a
    terminal)."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        emit: Callable[[str], None] | None = None,
        stream: TextIO | None = None,
        tty: bool | None = None,
    ) -> None:
        self.label = label
        self.total = max(0, total)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty()) if callable(isatty) else False
        self.tty = tty
        self.emit = emit or self._write_line
        self._tenth = -1  # the last tenth a plain line was emitted for
        self._drawn = 0.0
        self._closed = False
        self._show("")

    def _write_line(self, text: str) -> None:
        print(f"heron: {text}", file=self.stream, flush=True)

    def _percent(self) -> int:
        return 100 if self.total == 0 else min(100, self.done * 100 // self.total)

    def _show(self, detail: str) -> None:
        percent = self._percent()
        count = f"{self.done:,}/{self.total:,}"
        if not self.tty:
            tenth = percent // 10
            if tenth > self._tenth:
                self._tenth = tenth
                tail = f", {detail}" if detail else ""
                self.emit(f"{self.label}: {count} ({percent}%{tail})")
            return
        now = time.monotonic()
        if self.done < self.total and now - self._drawn < REDRAW_S and self._drawn:
            return
        self._drawn = now
        filled = WIDTH * percent // 100
        bar = "#" * filled + "." * (WIDTH - filled)
        text = f"\rheron: {self.label} [{bar}] {percent:3d}% {count} {detail}".rstrip()
        self.stream.write(text + "\x1b[K")  # clear what a longer line left
        self.stream.flush()

    def advance(self, n: int = 1, detail: str = "") -> None:
        """``n`` more units done; ``detail`` is shown beside the count (rate, ETA, a name)."""
        self.done = min(self.total, self.done + n) if self.total else self.done + n
        self._show(detail)
        if self.done >= self.total:
            self.close()

    def above(self, text: str, stream: TextIO | None = None) -> None:
        """Print a finished line (to ``stream``, default stdout) above the bar: on a terminal
        the bar is wiped first and redrawn after it, so the two never share a line."""
        out = stream if stream is not None else sys.stdout
        if self.tty and not self._closed:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        print(text, file=out, flush=True)
        if self.tty and not self._closed:
            self._drawn = 0.0
            self._show("")

    def close(self) -> None:
        """End the bar's line (a terminal); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Steps:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
