"""The hand-built fallback jail, and the choice of how an adapter's process is isolated
(:func:`open_jail`): ``python -I -m pytest_heron.systems.jail SPEC PARENT_PID``.

The adapter's sandbox is bubblewrap's (:mod:`pytest_heron.systems.bubblewrap`): an allow-list
of what the adapter sees, in user and PID namespaces of its own. This jail is kept only for a
root harness on a machine without a working bwrap. It hides a list (the heron cache folder and
the question files), not everything else: the working directory stays visible to it, and every
run's adapter is the same system user. The run's conditions say which one ran
(``adapter_isolation``: ``namespace`` for bubblewrap, ``user`` for this jail).

When the harness runs as root (containers, CI) and bwrap is missing, :class:`Jail` starts the
adapter's process (:mod:`pytest_heron.systems.child`) through this module, which, still as root
and before any adapter code is imported:

1. enters a mount namespace of its own (nothing it mounts is seen outside, and it all goes when
   the process ends);
2. binds the embedded server's socket and the LLM response cache folder into a private folder
   (``BASE/pg``, ``BASE/llm``; ``BASE`` is ``/run/heron-adapter`` with a ``tmpfs`` of the
   process's own on it): the adapter reaches them there, under names that say nothing;
3. covers the heron cache folder (the server's data and its admin secret) and the question
   files with an empty read-only ``tmpfs`` (a file with ``/dev/null``);
4. drops to the system user ``heron-adapter`` (no supplementary groups), checks that none of
   the covered paths and neither the secret nor the data folder can be read, and only then
   executes the adapter's process with ``HOME`` and ``TMPDIR`` in ``BASE/home``, without
   ``PG*`` or ``HERON_DSN`` in its environment.

The process keeps its pid through both ``exec`` calls, so the parent-death signal and the
process group work as before. The parent's ``/proc/PID/cmdline`` stays readable to every user
(Linux shows it unless ``/proc`` is mounted with ``hidepid``): it names the question folder,
but in the adapter's namespace that path is an empty folder. ``/proc/PID/environ``, ``root``,
``cwd`` and ``fd`` of the harness are closed to another user.

Where this is not possible (the harness is not root, or ``HERON_ADAPTER_ISOLATION=none``), the
adapter's process runs as before, as the harness's user, and the run's conditions say
``adapter_isolation: none``; the board protocol refuses such runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pwd
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_heron.core.errors import ConfigError
from pytest_heron.core.types import BenchmarkContext
from pytest_heron.systems import bubblewrap
from pytest_heron.systems.bubblewrap import socket_of as socket_of

if TYPE_CHECKING:
    from pytest_heron.systems.bubblewrap import Sandbox
    from pytest_heron.systems.interpreter import Interpreter

ADAPTER_USER = "heron-adapter"
ENV = "HERON_ADAPTER_ISOLATION"  # "auto" (the default), "bubblewrap", "jail" or "none"
CHOICES = ("auto", "bubblewrap", "jail", "none")
NAMESPACE = "namespace"  # conditions: a bubblewrap sandbox (systems/bubblewrap.py)
USER = "user"  # ... the hand-built jail: its own OS user in its own mount namespace
NONE = "none"  # ... as the harness's OS user (it could read the harness's files)
NOT_NEEDED = "not-needed"  # gold and file: no system code runs at all
LEVELS = (NAMESPACE, USER, NONE, NOT_NEEDED)
SECRET_SUFFIX = ".secret"  # the embedded server's admin password file (database/server.py)

CLONE_NEWNS = 0x00020000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
EXIT_REFUSED = 97  # the trampoline's exit status when a covered path stayed readable


def choice() -> str:
    """What ``HERON_ADAPTER_ISOLATION`` asks for: ``auto`` (the default: bubblewrap where it
    works, else this hand-built jail where the harness is root, else none), ``bubblewrap`` or
    ``jail`` (that one or a usage error), ``none``."""
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise ConfigError(f"{ENV}={value!r}: expected one of {', '.join(CHOICES)}")
    return value


def wanted() -> bool:
    """Whether ``HERON_ADAPTER_ISOLATION`` asks for isolation at all."""
    return choice() != NONE


CAP_SYS_ADMIN = 21  # the capability mount(2) and unshare(CLONE_NEWNS) need


def possible() -> bool:
    """Whether this process can start a jailed adapter: Linux, running as root, with
    ``CAP_SYS_ADMIN`` (a Docker container's root lacks it by default: there the adapter runs
    unisolated and the conditions say so)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return False
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    return False


def ensure_user(name: str = ADAPTER_USER) -> pwd.struct_passwd:
    """The system user the adapter runs as, created (no home, no shell) when missing. Several
    xdist workers may race here: ``useradd`` locks the user database, the loser finds the user."""
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(name)
    done = subprocess.run(
        [
            "useradd",
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            name,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise ConfigError(
            f"could not create the system user {name!r} the adapter runs as: "
            f"{done.stderr.strip()[:300]} (or set {ENV}=none to run it as this user, "
            "unisolated)"
        ) from None


def private_root() -> Path:
    """Where each jailed process mounts a ``tmpfs`` of its own (its home, and the server's
    socket and the LLM cache bound in), seen by no other process: ``/run/heron-adapter``
    (or in the temporary folder). Outside the namespaces it is one empty folder, root's."""
    parent = Path("/run") if Path("/run").is_dir() else Path(tempfile.gettempdir())
    root = parent / "heron-adapter"
    with contextlib.suppress(FileExistsError):
        root.mkdir(mode=0o755)
    info = root.lstat()
    if root.is_symlink() or not root.is_dir() or info.st_uid != 0:
        raise ConfigError(f"{root} is not a folder of root's: remove it (the adapter's jail)")
    return root


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


class Jail(bubblewrap.Bound):
    """One adapter's private folder and the command that starts its process jailed (the
    fallback where bubblewrap is missing: see :mod:`pytest_heron.systems.bubblewrap`).

    ``covered`` are the paths the adapter must not read (the heron cache folder, the question
    files); ``shared`` is the LLM response cache folder, which it reads and writes (it is given
    to the adapter's group). Made by :func:`open_jail`."""

    def __init__(self, covered: Sequence[Path], shared: Path | None) -> None:
        user = ensure_user()
        self.uid, self.gid = user.pw_uid, user.pw_gid
        self.covered = tuple(sorted({p.resolve() for p in covered}))
        for path in self.covered:  # the cache folder of a first run: covered before it fills
            if not path.exists():
                path.mkdir(parents=True, exist_ok=True)
        self.shared = None if shared is None else shared.resolve()
        for path in self.covered:
            if self.shared is not None and _inside(path, self.shared):
                raise ConfigError(
                    f"--heron-cache {self.shared} holds {path}, which the adapter (run as the "
                    f"user {ADAPTER_USER!r}) must not read: choose a folder of its own for the "
                    "LLM response cache"
                )
        self.base = private_root()
        self.level = USER
        self.mechanism = f"heron jail (mount namespace, user {ADAPTER_USER})"
        self.socket: tuple[str, str] | None = None  # the socket the process was started with
        if self.shared is not None:
            self._share(self.shared)

    def _share(self, folder: Path) -> None:
        """Give the adapter's group the LLM cache folder and its files (read and write; the
        setgid bit keeps new files in the group). Other permissions are left as they are."""
        folder.mkdir(parents=True, exist_ok=True)
        for path in (folder, *sorted(folder.glob("llm-cache.sqlite3*"))):
            info = path.lstat()
            if path.is_symlink():
                continue
            os.chown(path, -1, self.gid)
            extra = 0o2070 if path.is_dir() else 0o060
            path.chmod((info.st_mode & 0o7777) | extra)

    def context(self, ctx: BenchmarkContext) -> BenchmarkContext:
        """``ctx`` as the jailed adapter sees it: the DSN through the bound socket, the LLM cache
        in the bound folder."""
        return self.rebound(ctx, str(self.base / "pg"), str(self.base / "llm"))

    def spec(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "gid": self.gid,
            "base": str(self.base),
            "covered": [str(p) for p in self.covered],
            "socket": None if self.socket is None else self.socket[0],
            "port": None if self.socket is None else self.socket[1],
            "shared": None if self.shared is None else str(self.shared),
            "cwd": os.getcwd(),
            "reveal": needed_paths(),
        }

    def command(self, parent: int) -> list[str]:
        spec = json.dumps(self.spec())
        return [sys.executable, "-I", "-m", "pytest_heron.systems.jail", spec, str(parent)]

    def executable(self) -> str:
        return sys.executable

    def environment(self) -> dict[str, str] | None:
        return None  # the trampoline makes it (child_environment below)

    def pass_fds(self) -> tuple[int, ...]:
        return ()

    def started(self) -> None:
        """Nothing to close: the trampoline opens what it binds itself."""

    def close(self) -> None:
        """Nothing to remove: the private folder lived in the process's own namespace."""


def needed_paths() -> list[str]:
    """What the adapter's process must reach to run Python at all: the interpreter's folder,
    its prefixes and every folder on the import path (the adapter's code is among them)."""
    found = {
        os.path.dirname(os.path.realpath(sys.executable)),
        sys.prefix,
        sys.base_prefix,
        os.getcwd(),
        *(p for p in sys.path if p),
    }
    return sorted(p for p in {os.path.realpath(f) for f in found} if os.path.isdir(p))


def blocked_at(path: str) -> str | None:
    """The outermost folder above ``path`` that another user cannot pass through (no ``x``
    bit for others), or None when every folder on the way lets them."""
    parts = Path(path).parts
    for i in range(1, len(parts)):
        folder = os.path.join(*parts[:i])
        try:
            if not os.stat(folder).st_mode & 0o001:
                return folder
        except OSError:
            return None
    return None


def reveal_plan(needed: Sequence[str]) -> dict[str, list[str]]:
    """Folders to rebuild in the namespace: each outermost closed folder, with the needed paths
    under it (a path under another needed path is covered by that one's bind)."""
    plan: dict[str, list[str]] = {}
    kept: list[str] = []
    for path in sorted(set(needed)):
        if any(Path(path).is_relative_to(k) for k in kept):
            continue
        kept.append(path)
        top = blocked_at(path)
        if top is not None:
            plan.setdefault(top, []).append(path)
    return plan


def open_jail(
    adapter: str,
    covered: Sequence[Path],
    shared: Path | None,
    *,
    private: Sequence[Path] = (),
    network: str = "shared",
    offline: bool = False,
    interpreter: Interpreter | None = None,
) -> Sandbox | Jail | None:
    """How the adapter's process is isolated, by ``HERON_ADAPTER_ISOLATION``: a bubblewrap
    :class:`~pytest_heron.systems.bubblewrap.Sandbox` where bwrap works, else (as root) a
    :class:`Jail`, else None; ``bubblewrap`` or ``jail`` asked for and not possible is a usage
    error naming what is missing. ``covered`` are the paths the adapter must not read (the jail
    covers them; the sandbox shows nothing it was not given, and keeps them and ``private``,
    the run's outputs, out even where they lie inside a folder it is shown)."""
    asked = choice()
    if asked == NONE:
        return None
    if asked in ("auto", "bubblewrap"):
        found = bubblewrap.probe()
        if found.usable:
            return bubblewrap.Sandbox(
                found,
                adapter,
                protected=[*covered, *private],
                shared=shared,
                network=network,
                offline=offline,
                interpreter=interpreter,
            )
        if asked == "bubblewrap":
            raise ConfigError(f"{ENV}=bubblewrap: {found.problem}")
    if possible():
        if interpreter is not None and not interpreter.own:
            raise ConfigError(
                "--heron-adapter-python needs the bubblewrap sandbox (apt-get install "
                f"bubblewrap) or {ENV}=none: the fallback jail runs heron's own Python"
            )
        return Jail(covered, shared)
    if asked == "jail":
        raise ConfigError(f"{ENV}=jail: the hand-built jail needs root with CAP_SYS_ADMIN")
    return None


def missing_note() -> str | None:
    """One line saying why an adapter runs unisolated, when isolation was asked for (the
    default) and is not possible here; None when it is possible or was turned off."""
    if choice() == NONE:
        return None
    found = bubblewrap.probe()
    if found.usable or possible():
        return None
    return f"adapter isolation: none ({found.problem})"


# -- the trampoline (runs as root, in the new process, before the adapter's process) --------------


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _mount(
    libc: Any,
    source: str | None,
    target: str,
    fstype: str | None,
    flags: int,
    data: bytes | None = None,
) -> None:
    if fstype == "tmpfs" and data is None:
        data = b"size=4k,mode=000"
    if (
        libc.mount(
            None if source is None else source.encode(),
            target.encode(),
            None if fstype is None else fstype.encode(),
            ctypes.c_ulong(flags),
            data,
        )
        != 0
    ):
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _readable(path: str) -> bool:
    """Whether this process can read anything at ``path`` (a file's bytes or a folder's list)."""
    try:
        if os.path.isdir(path):
            return bool(os.listdir(path)) or os.access(path, os.R_OK)
        with open(path, "rb") as f:
            return bool(f.read(1))
    except OSError:
        return False


def _reveal(libc: Any, base: str, needed: Sequence[str]) -> None:
    """Make the needed paths reachable where a closed folder (say ``/root``, mode 0700, holding
    the interpreter) is in the way: each needed path is bound aside, the closed folder covered
    with a ``tmpfs`` that others may pass through (mode 0711, nothing else of it shows), and
    the path bound back at its place inside."""
    stage = os.path.join(base, "stage")
    os.mkdir(stage, 0o700)
    for n, (top, paths) in enumerate(sorted(reveal_plan(needed).items())):
        aside = []
        for m, path in enumerate(paths):
            spot = os.path.join(stage, f"{n}-{m}")
            os.mkdir(spot, 0o700)
            _mount(libc, path, spot, None, MS_BIND | MS_REC)
            aside.append((spot, path))
        _mount(libc, "tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, b"size=64k,mode=0711")
        for spot, path in aside:
            os.makedirs(path, 0o711, exist_ok=True)
            _mount(libc, spot, path, None, MS_BIND | MS_REC)


def enter(spec: Mapping[str, Any]) -> None:
    """Steps 1-4 of the module docstring (raises OSError when one cannot be done)."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNS): {os.strerror(err)}")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    base = str(spec["base"])
    _mount(libc, "tmpfs", base, "tmpfs", MS_NOSUID | MS_NODEV, b"size=16m,mode=0711")
    home = os.path.join(base, "home")
    for folder, mode in ((home, 0o700), (f"{base}/pg", 0o755), (f"{base}/llm", 0o755)):
        os.mkdir(folder, mode)
    os.chown(home, int(spec["uid"]), int(spec["gid"]))
    _reveal(libc, base, spec.get("reveal", []))
    if spec.get("socket"):
        with open(f"{base}/pg/.s.PGSQL.{spec['port']}", "w"):
            pass
        _mount(libc, spec["socket"], f"{base}/pg/.s.PGSQL.{spec['port']}", None, MS_BIND)
    if spec.get("shared"):
        _mount(libc, spec["shared"], f"{base}/llm", None, MS_BIND)
    secrets: list[str] = []
    for path in spec.get("covered", []):
        if not os.path.lexists(path):
            continue
        if os.path.isdir(path):
            secrets += [
                os.path.join(path, name)
                for name in sorted(os.listdir(path))
                if name.endswith(SECRET_SUFFIX) or os.path.isdir(os.path.join(path, name))
            ]
            _mount(libc, "tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        else:
            _mount(libc, "/dev/null", path, None, MS_BIND)
    os.setgroups([])
    os.setgid(int(spec["gid"]))
    os.setuid(int(spec["uid"]))
    if os.getuid() == 0 or os.geteuid() == 0:
        raise OSError("the adapter's process is still root")
    for path in [*spec.get("covered", []), *secrets]:
        if _readable(path):
            raise OSError(f"{path} is still readable by the adapter's user")


def child_environment(environ: Mapping[str, str], home: str) -> dict[str, str]:
    """The adapter's environment: the harness's, without connection secrets (``PG*``,
    ``HERON_DSN``), with a private home and temporary folder."""
    env = {
        k: v
        for k, v in environ.items()
        if not k.startswith("PG")
        and k not in ("HERON_DSN", "XDG_RUNTIME_DIR")
        and not bubblewrap.is_secret_key(v)
    }
    env.update(HOME=home, TMPDIR=home, TMP=home, TEMP=home, USER=ADAPTER_USER, LOGNAME=ADAPTER_USER)
    return env


def main(argv: list[str]) -> None:
    spec = json.loads(argv[0])
    parent = argv[1]
    try:
        enter(spec)
    except OSError as exc:
        print(
            f"heron could not isolate the adapter's process: {exc} (with {ENV}=none it runs "
            "as this user, unisolated, and the run's conditions say so)",
            file=sys.stderr,
        )
        os._exit(EXIT_REFUSED)
    home = os.path.join(str(spec["base"]), "home")
    try:
        os.chdir(str(spec["cwd"]))  # module:Class in the current folder, as before
    except OSError:
        os.chdir(home)
    env = child_environment(os.environ, home)
    os.execve(sys.executable, [sys.executable, "-m", "pytest_heron.systems.child", parent], env)


if __name__ == "__main__":
    main(sys.argv[1:])
