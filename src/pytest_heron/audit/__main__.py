"""``python -m pytest_heron.audit``: the gold audit on a question folder, for authors."""

from __future__ import annotations

import sys

from pytest_heron.audit.cli import main

if __name__ == "__main__":
    sys.exit(main())
