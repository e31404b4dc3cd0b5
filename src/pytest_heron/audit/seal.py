"""``heron seal FOLDER --out split.sealed``: audit a question folder, then seal it.

The folder must load (the loader's checks), pass the static audit of every question
(:func:`.static.static_problems`: gold parses, reads the tables it declares, is not volatile,
orders what it limits, has no NULL-order ambiguity), hold no duplicates, and share no gold
query with the public set: a sealed question whose gold has a built-in question's pglast
fingerprint (constants ignored) could be answered by anyone who kept the public templates.
Only then is it encrypted (:mod:`pytest_heron.dataset.sealed`). The dynamic audit (gold on
every state, mutants) needs a server: run ``python -m pytest_heron.audit --questions FOLDER``
before sealing (docs/sealed.md). Problems are printed for the author, who holds the folder;
nothing of the folder is printed once it is sealed.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_heron.audit.static import duplicate_problems, static_problems
from pytest_heron.core.errors import ConfigError, HeronError


@dataclass(frozen=True)
class Sealed:
    questions: int
    digest: str
    path: Path


def _print(sql: str) -> str | None:
    from pglast.parser import fingerprint

    try:
        return str(fingerprint(sql))
    except Exception:
        return None


def audit_for_sealing(folder: Path) -> tuple[list[tuple[str, Any]], list[str]]:
    """The folder's raw entries and every problem that keeps it from being sealed."""
    from pytest_heron.dataset import from_entries, load_questions, raw_entries

    entries = raw_entries(folder)
    questions = from_entries(entries, str(folder))
    public = {_print(q.gold_sql): q.id for q in load_questions(None)}
    problems: list[str] = []
    dups = duplicate_problems(questions)
    for q in questions:
        found = dict(static_problems(q))
        if q.id in dups:
            found["duplicate"] = dups[q.id]
        mine = _print(q.gold_sql)
        if mine is not None and mine in public:
            found["public"] = f"gold has the fingerprint of public question {public[mine]}"
        problems.extend(f"{q.id}: {k}: {v}" for k, v in found.items())
    return entries, problems


def seal_folder(folder: Path, out: Path, recipients: list[str]) -> Sealed:
    """Audit ``folder`` and write it sealed to ``out`` for ``recipients`` (age public keys)."""
    from pytest_heron.dataset import seal_entries, sealed_digest

    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder of question files")
    entries, problems = audit_for_sealing(folder)
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise HeronError(f"{folder} does not pass the audit, so it is not sealed:\n  {shown}{more}")
    data = seal_entries(entries, recipients)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    return Sealed(len(entries), sealed_digest(data), out)


def add_seal_parser(sub: Any) -> None:
    """``heron seal`` on the heron command's subparsers."""
    from pytest_heron.dataset import DEFAULT_KEY_ENV

    seal = sub.add_parser(
        "seal", help="audit a question folder and encrypt it into one sealed file (age)"
    )
    seal.add_argument("folder", nargs="?", help="the question folder to seal")
    seal.add_argument("--out", help="the sealed file to write (e.g. split.sealed)")
    seal.add_argument(
        "--recipient",
        action="append",
        default=[],
        help="an age public key (age1...) to seal for; repeatable (default: the key in "
        "--key-env's variable)",
    )
    seal.add_argument(
        "--key-env",
        default=DEFAULT_KEY_ENV,
        help=f"environment variable holding the age identity (default: {DEFAULT_KEY_ENV})",
    )
    seal.add_argument(
        "--keygen", action="store_true", help="print a new age identity and its recipient"
    )
    seal.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    from pytest_heron.dataset import new_key, recipient_of

    if args.keygen:
        identity, recipient = new_key()
        print(f"# recipient: {recipient}\n{identity}")
        return 0
    if not args.folder or not args.out:
        raise ConfigError("heron seal FOLDER --out FILE (or heron seal --keygen)")
    recipients = list(args.recipient)
    if not recipients:
        secret = os.environ.get(args.key_env, "")
        if not secret.strip():
            raise ConfigError(
                f"heron seal: give --recipient age1... or put the age identity in {args.key_env}"
            )
        recipients = [recipient_of(secret)]
    done = seal_folder(Path(args.folder), Path(args.out), recipients)
    print(f"sealed {done.questions} question(s) into {done.path}: {done.digest}")
    print(
        f"heron: publish the digest; keep {args.folder} and the key private",
        file=sys.stderr,
    )
    return 0
