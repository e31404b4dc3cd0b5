"""The adapter's process in a bubblewrap sandbox: an allow-list, not a list of things to hide.

:class:`Sandbox` starts the adapter's process (:mod:`pytest_heron.systems.child`) under ``bwrap``
(Debian's ``bubblewrap``, the sandbox Flatpak is built on). It works without root wherever the
kernel lets an unprivileged user make user namespaces, and as root. Each start makes:

- new user, PID, mount, IPC, UTS (and, where the kernel has them, cgroup) namespaces; with
  ``--heron-adapter-network=none`` a network namespace too (only a loopback of its own);
- ``--die-with-parent`` and ``--new-session``: the sandbox ends with the harness, and the adapter
  has no terminal to push keystrokes into. The sandbox's PID 1 is bwrap's reaper: when it ends,
  the kernel kills every process left in the PID namespace, a double-forked daemon included;
- ``--disable-userns`` (bubblewrap 0.8+): the adapter cannot make user namespaces of its own;
- a filesystem built from nothing: read-only ``/usr`` (and the ``/bin``, ``/lib``... links or
  folders), a short list of ``/etc`` files the C library and TLS need, the interpreter's
  prefixes, the import paths that are safe to show whole (see :func:`whole_paths`) and the
  adapter's own module or package; a private ``tmpfs`` home and ``/tmp``; its own ``/proc``
  and a minimal ``/dev``; the database socket at ``/run/heron/pg`` and the LLM response cache
  folder at ``/run/heron/llm`` (read and write), names that say nothing of the harness.

Nothing else is there: not the working directory (a vendor's git repository, an earlier
``--heron-report`` folder, the results file and its journal), not the heron cache folder (the
server's data and admin secret), not the question files. Another run's sandbox is a sibling
PID namespace: its processes have no PID here, so they cannot be traced, read through
``/proc`` or signalled. The environment is the harness's without connection secrets, with
``HOME`` and ``TMPDIR`` in the private home (see :func:`child_environment`); it reaches bwrap
through ``execve``'s environment, never its command line.

:func:`probe` tells once per process whether bwrap is installed and can make the namespaces
here; :func:`pytest_heron.systems.jail.open_jail` falls back to the hand-built jail (root only)
or to no isolation, and the run's conditions say which ran.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_heron.core.types import BenchmarkContext
from pytest_heron.systems.interpreter import Interpreter, wire_folder

BWRAP_ENV = "HERON_BWRAP"  # a bwrap binary to use instead of the one on PATH
NETWORKS = ("auto", "shared", "none")  # --heron-adapter-network
INSIDE = Path("/run/heron")  # where the socket and the LLM cache are bound in the sandbox
HOME = "/home/adapter"
UID = GID = 1000  # the adapter's ids inside its user namespace
PROBE_TIMEOUT_S = 20.0
# The /etc entries an adapter may need: the dynamic loader's cache, name resolution (an LLM over
# the network), TLS roots, time zones. Nothing with secrets or the machine's users.
ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "resolv.conf",
    "hosts",
    "host.conf",
    "gai.conf",
    "nsswitch.conf",
    "services",
    "protocols",
    "localtime",
    "timezone",
    "mime.types",
    "os-release",
)
TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")  # links into /usr, or folders


@dataclass(frozen=True)
class Probe:
    """What :func:`probe` found: the binary, its version, and why it cannot be used (None: it
    can)."""

    binary: str | None
    version: str | None
    problem: str | None

    @property
    def usable(self) -> bool:
        return self.problem is None and self.binary is not None

    @property
    def mechanism(self) -> str:
        return f"bubblewrap {self.version}" if self.version else "bubblewrap"


@functools.cache
def probe() -> Probe:
    """Whether bwrap is here and can make the namespaces the sandbox needs: one real start of
    ``true`` under the same namespaces, once per process."""
    binary = os.environ.get(BWRAP_ENV) or shutil.which("bwrap")
    if not sys.platform.startswith("linux"):
        return Probe(None, None, "bubblewrap needs Linux")
    if not binary:
        return Probe(None, None, "bubblewrap is not installed (apt-get install bubblewrap)")
    try:
        shown = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S
        )
        version = shown.stdout.strip().removeprefix("bubblewrap").strip() or None
        true = shutil.which("true") or "/usr/bin/true"
        tried = subprocess.run(
            [*namespace_args(version, network="none"), *_base_mounts(), "--", true],
            executable=binary,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Probe(binary, None, f"{binary} could not be run: {exc}")
    if tried.returncode != 0:
        why = " ".join(tried.stderr.split())[:300] or f"exit status {tried.returncode}"
        return Probe(
            binary,
            version,
            f"bwrap cannot make a user namespace here ({why}); on Debian and Ubuntu "
            "`sysctl kernel.unprivileged_userns_clone=1` allows it",
        )
    return Probe(binary, version, None)


def socket_of(dsn: str) -> tuple[str, str] | None:
    """``(socket file, port)`` when ``dsn`` reaches its server by a Unix socket, else None."""
    from psycopg.conninfo import conninfo_to_dict  # not in the trampoline: it starts faster

    params = conninfo_to_dict(dsn)
    host = str(params.get("host") or "")
    if not host.startswith("/") or "," in host:
        return None
    port = str(params.get("port") or "5432")
    return os.path.join(host, f".s.PGSQL.{port}"), port


def _supports(version: str | None, major: int, minor: int) -> bool:
    try:
        parts = [int(p) for p in (version or "").split(".")[:2]]
    except ValueError:
        return False
    return len(parts) == 2 and (parts[0], parts[1]) >= (major, minor)


def namespace_args(version: str | None, *, network: str) -> list[str]:
    """bwrap's first arguments: the namespaces and the sandbox's life (pure)."""
    args = [
        "bwrap",
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--uid",
        str(UID),
        "--gid",
        str(GID),
        "--hostname",
        "adapter",
        "--die-with-parent",
        "--new-session",
    ]
    if _supports(version, 0, 8):
        args.append("--disable-userns")
    if network == "none":
        args.append("--unshare-net")
    return args


def _base_mounts() -> list[str]:
    """``/usr``, the top-level links or folders into it, ``/proc``, ``/dev``, ``/tmp``."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in TOP_LEVEL:
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return [*args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def whole_paths(candidates: Iterable[str], *, cwd: Path, protected: Sequence[Path]) -> list[str]:
    """The import paths that may be shown whole (pure): absolute folders that are not the working
    directory or above it, that hold no protected path and lie inside none, and are no git
    work tree's top (``.git`` beside them is checked by the caller, see :func:`_is_repo`).
    Sorted and without a path that another kept one already holds."""
    kept: list[str] = []
    for text in sorted({c for c in candidates if c and os.path.isabs(c)}):
        path = Path(text)
        if path == Path("/") or _under(cwd, path):
            continue
        if any(_under(p, path) or _under(path, p) for p in protected):
            continue
        if any(_under(path, Path(k)) for k in kept):
            continue
        kept.append(text)
    return kept


def _is_repo(folder: str) -> bool:
    return os.path.lexists(os.path.join(folder, ".git"))


def module_paths(names: Iterable[str]) -> list[str]:
    """Where the top-level modules ``names`` live (a package's folders, or one file), found
    without running them: :func:`importlib.util.find_spec` of a top-level name runs no code of
    it. Names that cannot be found are skipped (the child then reports them missing)."""
    found: list[str] = []
    for name in sorted(set(names)):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        if spec.submodule_search_locations:
            found += [os.path.realpath(p) for p in spec.submodule_search_locations]
        elif spec.origin and os.path.isabs(spec.origin):
            found.append(os.path.realpath(spec.origin))
    return sorted({p for p in found if os.path.exists(p)})


def adapter_modules(name: str) -> list[str]:
    """The top-level module names the adapter ``name`` is imported from: ``module:attr``'s
    first part, or the module of an entry point of that name; with heron's own packages, which
    the child imports."""
    from importlib.metadata import entry_points

    from pytest_heron.systems.registry import GROUP

    tops = ["pytest_heron", "heron_data"]
    if ":" in name:
        tops.append(name.split(":", 1)[0].split(".", 1)[0])
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            tops.append(ep.value.split(":", 1)[0].split(".", 1)[0])
    return tops


SECRET_KEY_PREFIX = "AGE-SECRET-KEY-"  # an age identity: the key of a sealed question set


def is_secret_key(value: str) -> bool:
    """Whether an environment value is an age identity (the key that opens a sealed question
    set, whatever variable holds it): never passed to an adapter.

    >>> is_secret_key("AGE-SECRET-KEY-1QQ"), is_secret_key("sk-openai")
    (True, False)
    """
    return value.strip().upper().startswith(SECRET_KEY_PREFIX)


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The adapter's environment: the harness's, without connection secrets (``PG*``,
    ``HERON_DSN``), a sealed question set's key (:func:`is_secret_key`) or paths of the
    harness's session, with the private home."""
    drop = ("HERON_DSN", "XDG_RUNTIME_DIR", "HERON_CACHE_DIR", "HERON_TEST_CACHE_DIR")
    env = {
        k: v
        for k, v in environ.items()
        if not k.startswith("PG") and k not in drop and not is_secret_key(v)
    }
    env.update(HOME=HOME, TMPDIR="/tmp", TMP="/tmp", TEMP="/tmp", USER="adapter")
    env["LOGNAME"] = "adapter"
    return env


class Bound:
    """What an isolated adapter's process is given of the harness, and under which names: the
    server's socket (known once the server runs) and the LLM response cache folder. Shared by
    the sandbox and the fallback jail (:class:`pytest_heron.systems.jail.Jail`)."""

    socket: tuple[str, str] | None = None  # (socket file, port) the process was started with
    shared: Path | None = None  # the LLM response cache folder

    def expose(self, dsn: str) -> bool:
        """Note the socket ``dsn`` names (bound at the next start); whether the running
        process must be restarted to see it."""
        found = socket_of(dsn)
        if found is None or found == self.socket:
            return False
        self.socket = found
        return True

    def rebound(self, ctx: BenchmarkContext, pg: str, llm: str) -> BenchmarkContext:
        """``ctx`` with the DSN through the socket bound in folder ``pg`` and the LLM cache in
        folder ``llm``."""
        from psycopg.conninfo import make_conninfo

        dsn = ctx.dsn
        if dsn and self.socket is not None and socket_of(dsn) == self.socket:
            dsn = make_conninfo(dsn, host=pg)
        options = ctx.llm
        if self.shared is not None and options.cache_path:
            options = replace(options, cache_path=os.path.join(llm, Path(options.cache_path).name))
        return replace(ctx, dsn=dsn, llm=options)


class Sandbox(Bound):
    """One adapter's sandbox: the bwrap command that starts its process, and how the context
    it is given names the socket and the LLM cache inside. Made by
    :func:`pytest_heron.systems.jail.open_jail`; the interface is :class:`~.jail.Jail`'s."""

    level = "namespace"  # conditions' adapter_isolation

    def __init__(
        self,
        found: Probe,
        adapter: str,
        *,
        protected: Sequence[Path],
        shared: Path | None,
        network: str = "auto",
        offline: bool = False,
        interpreter: Interpreter | None = None,
    ) -> None:
        assert found.binary is not None
        self.binary = found.binary
        self.version = found.version
        self.asked_network = network
        self.offline = offline
        self.found = found
        self.python = Interpreter.of(None) if interpreter is None else interpreter
        self.cwd = Path.cwd().resolve()
        self.protected = tuple(sorted({p.resolve() for p in protected}))
        self.shared = None if shared is None else shared.resolve()
        if self.shared is not None:
            self.shared.mkdir(parents=True, exist_ok=True)
        self.socket: tuple[str, str] | None = None
        self._links: Path | None = None  # see _reachable_socket
        self.modules = module_paths(adapter_modules(adapter))
        self._files = Path(tempfile.mkdtemp(prefix="heron-sandbox-"))
        (self._files / "passwd").write_text(f"adapter:x:{UID}:{GID}:adapter:{HOME}:/bin/false\n")
        (self._files / "group").write_text(f"adapter:x:{GID}:\n")

    @property
    def network(self) -> str:
        """``none`` or ``shared``: ``auto`` cuts the network of an offline run (the LLM adapters
        replay from the cache file) that reaches its database by the socket."""
        if self.asked_network != "auto":
            return self.asked_network
        return "none" if self.offline and self.socket is not None else "shared"

    @property
    def mechanism(self) -> str:
        return f"{self.found.mechanism}, network {self.network}"

    def context(self, ctx: BenchmarkContext) -> BenchmarkContext:
        """``ctx`` as the adapter sees it: the DSN through the bound socket, the LLM cache in
        the bound folder."""
        return self.rebound(ctx, str(INSIDE / "pg"), str(INSIDE / "llm"))

    def import_paths(self) -> list[str]:
        """The folders shown whole: the interpreter's prefixes and the safe import paths."""
        python = self.python
        candidates = {os.path.realpath(p) for p in [*python.prefixes, *python.path] if p}
        candidates.add(os.path.dirname(os.path.realpath(python.executable)))
        if not python.own:  # the tool's Python: its import path, and the link to heron's wire
            candidates.add(wire_folder())
        safe = whole_paths(candidates, cwd=self.cwd, protected=self.protected)
        return [p for p in safe if not _is_repo(p) and os.path.isdir(p)]

    def mounts(self) -> list[str]:
        """Every bind after the base ones, in an order where a later bind lands inside an
        earlier one (bwrap applies them in order)."""
        args: list[str] = []
        for name in ETC:
            path = f"/etc/{name}"
            if os.path.lexists(path):
                args += ["--ro-bind-try", path, path]
        args += ["--ro-bind", str(self._files / "passwd"), "/etc/passwd"]
        args += ["--ro-bind", str(self._files / "group"), "/etc/group"]
        shown = self.import_paths()
        for path in [*shown, *(m for m in self.modules if not _inside_any(m, shown))]:
            args += ["--ro-bind", path, path]
        # a protected path inside a module folder the adapter needs is covered again
        for covered in self.protected:
            if any(_under(covered, Path(m)) for m in self.modules) and covered.exists():
                if covered.is_dir():
                    args += ["--tmpfs", str(covered)]
                else:
                    args += ["--ro-bind", "/dev/null", str(covered)]
        args += ["--tmpfs", HOME, "--chdir", HOME, "--dir", str(INSIDE)]
        if self.socket is not None:
            source = self._reachable_socket(self.socket[0])
            args += ["--bind", source, str(INSIDE / "pg" / f".s.PGSQL.{self.socket[1]}")]
        if self.shared is not None:
            args += ["--bind", str(self.shared), str(INSIDE / "llm")]
        return args

    def command(self, parent: int) -> list[str]:
        """The argv that starts the adapter's process in the sandbox (``bwrap`` is run through
        ``executable=``: see :meth:`executable`). ``parent`` is not passed on: inside, the
        parent is the sandbox's PID 1, and ``--die-with-parent`` ties the sandbox to us."""
        return [
            *namespace_args(self.version, network=self.network),
            *_base_mounts(),
            *self.mounts(),
            "--",
            self.python.executable,
            "-m",
            "pytest_heron.systems.child",
            "1",
        ]

    def executable(self) -> str:
        return self.binary

    def pass_fds(self) -> tuple[int, ...]:
        return ()

    def started(self) -> None:
        """Nothing to close: bwrap is given paths."""

    def _reachable_socket(self, socket: str) -> str:
        """A path to ``socket`` that bwrap can resolve from inside the sandbox's user namespace.
        bwrap resolves bind sources there, where a root harness has no capability over the
        host's files: the embedded server's folder is its own system user's (mode 0700), so a
        root harness links the socket into a folder of its own beside that one (a hard link:
        same inode, same file system; root may link another user's file) and binds the link.
        bwrap's ``--bind-fd`` does not help: it resolves the descriptor's path again."""
        if os.geteuid() != 0 or _passable(os.path.dirname(socket)):
            return socket
        if self._links is None or not self._links.is_dir():
            parent = os.path.dirname(os.path.dirname(socket))
            try:
                self._links = Path(tempfile.mkdtemp(prefix=".heron-sandbox-", dir=parent))
            except OSError:
                return socket  # bwrap then says what it cannot reach
        link = self._links / os.path.basename(socket)
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        try:
            os.link(socket, link)
        except OSError:
            return socket
        return str(link)

    def environment(self) -> dict[str, str]:
        env = child_environment(os.environ)
        return self.python.environment(env) or env

    def close(self) -> None:
        shutil.rmtree(self._files, ignore_errors=True)
        if self._links is not None:
            shutil.rmtree(self._links, ignore_errors=True)


def _passable(folder: str) -> bool:
    """Whether every folder from the root down to ``folder`` lets another user pass (``o+x``)
    or is this user's own with ``u+x``."""
    path = Path(folder)
    for step in [*reversed(path.parents), path]:
        try:
            info = step.stat()
        except OSError:
            return False
        own = info.st_uid == os.geteuid() and info.st_mode & 0o100
        if not (own or info.st_mode & 0o001):
            return False
    return True


def _inside_any(path: str, folders: Sequence[str]) -> bool:
    return any(_under(Path(path), Path(f)) for f in folders)
