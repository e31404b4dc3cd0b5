"""``python -m pytest_heron.cli``: the heron command."""

import sys

from pytest_heron.cli import main

sys.exit(main())
