"""Sealed question sets: a question folder encrypted into one file nobody outside can read.

``heron seal FOLDER --out split.sealed`` (:mod:`pytest_heron.audit.seal`) audits a folder, gives
every question an opaque id, and encrypts the questions to an age recipient (``pyrage``, the
``sealed`` extra). The file is one clear line, :data:`MAGIC`, then the age ciphertext; its
public digest is the SHA-256 of the whole file (:func:`sealed_digest`), published so that
anyone can tell which split a result was scored on without being able to read it.

``--heron-questions split.sealed`` and the verifier read it with the age identity
(``AGE-SECRET-KEY-1...``) held in an environment variable, ``HERON_SEALED_KEY`` unless
``--heron-sealed-key-env`` names another. The questions come back marked ``sealed``: the
harness then withholds their English, gold SQL, gold rows and every text derived from them from
all it writes (docs/sealed.md). Errors here never quote the file's contents or the key.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Sequence
from dataclasses import replace
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from pytest_heron.core.errors import ConfigError, QuestionFileError
from pytest_heron.dataset.questions import (
    GoldQuestion,
    StrictLoader,
    entries_of,
    from_entries,
    load_folder,
)

MAGIC = b"heron-sealed/1\n"
DEFAULT_KEY_ENV = "HERON_SEALED_KEY"
SEALED_SUFFIX = ".sealed"
ID_PREFIX = "s"
ID_HEX = 10  # 40 random bits per id: opaque, and unique across any split anyone will write
MAX_SEALED_BYTES = 20_000_000
_EXTRA = "pip install 'pytest-heron[sealed]'"


def _pyrage() -> Any:
    try:
        import pyrage
    except ImportError:
        raise ConfigError(f"sealed question sets need pyrage: {_EXTRA}") from None
    return pyrage


def is_sealed(path: Path) -> bool:
    """Whether ``path`` is a file that starts like a sealed question set."""
    try:
        with path.open("rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def sealed_digest(data: bytes) -> str:
    """The public digest of a sealed file's bytes: ``sha256:`` and 64 hex.

    >>> sealed_digest(b"")[:15]
    'sha256:e3b0c442'
    """
    return "sha256:" + hashlib.sha256(data).hexdigest()


def new_key() -> tuple[str, str]:
    """A fresh age identity and its recipient: ``(AGE-SECRET-KEY-1..., age1...)``."""
    identity = _pyrage().x25519.Identity.generate()
    return str(identity), str(identity.to_public())


def recipient_of(identity: str) -> str:
    """The public recipient (``age1...``) of an age identity; the identity is never quoted."""
    try:
        return str(_pyrage().x25519.Identity.from_str(identity.strip()).to_public())
    except Exception:
        raise ConfigError("the key is not an age identity (AGE-SECRET-KEY-1...)") from None


def opaque_ids(count: int) -> list[str]:
    """``count`` distinct random ids (``s`` and hex), sorted: nothing of a question in them.

    >>> ids = opaque_ids(3)
    >>> len(set(ids)), all(i.startswith("s") and len(i) == 11 for i in ids), ids == sorted(ids)
    (3, True, True)
    """
    ids: list[str] = []
    while len(ids) < count:
        candidate = ID_PREFIX + secrets.token_hex(ID_HEX // 2)
        if candidate not in ids:
            ids.append(candidate)
    return sorted(ids)


def seal_entries(entries: Sequence[tuple[str, Any]], recipients: Sequence[str]) -> bytes:
    """The sealed file's bytes for the raw question mappings ``entries`` (already loaded and
    audited by the caller), each under a new opaque id, in the order of those ids (so the
    order says nothing of the folder either)."""
    pyrage = _pyrage()
    try:
        keys = [pyrage.x25519.Recipient.from_str(r.strip()) for r in recipients]
    except Exception:
        raise ConfigError("a recipient is not an age public key (age1...)") from None
    if not keys:
        raise ConfigError("sealing needs at least one recipient")
    ids = opaque_ids(len(entries))
    order = secrets.SystemRandom().sample(range(len(entries)), len(entries))
    raws = [{**dict(entries[i][1]), "id": qid} for qid, i in zip(ids, order, strict=True)]
    plain = yaml.safe_dump({"questions": raws}, sort_keys=True, allow_unicode=True).encode()
    return MAGIC + bytes(pyrage.encrypt(plain, keys))


def load_sealed(path: Path, *, key_env: str | None = None) -> list[GoldQuestion]:
    """The questions of a sealed file, marked ``sealed``, read with the identity in the
    environment variable ``key_env`` (default :data:`DEFAULT_KEY_ENV`)."""
    name = key_env or DEFAULT_KEY_ENV
    where = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise QuestionFileError(where, None, None, f"cannot be read ({exc.strerror})") from None
    if not data.startswith(MAGIC):
        raise QuestionFileError(
            where, None, None, "is neither a folder of question files nor a sealed question set"
        )
    if len(data) > MAX_SEALED_BYTES:
        raise QuestionFileError(where, None, None, f"is larger than {MAX_SEALED_BYTES:,} bytes")
    secret = os.environ.get(name, "").strip()
    if not secret:
        raise ConfigError(
            f"{where} is a sealed question set: put its age identity in the environment "
            f"variable {name} (or name another with --heron-sealed-key-env)"
        )
    pyrage = _pyrage()
    try:
        identity = pyrage.x25519.Identity.from_str(secret)
    except Exception:
        raise ConfigError(f"{name} does not hold an age identity (AGE-SECRET-KEY-1...)") from None
    try:
        plain = bytes(pyrage.decrypt(data[len(MAGIC) :], [identity]))
    except Exception:
        raise ConfigError(
            f"{where} cannot be opened with the key in {name} (sealed for another key, or "
            f"damaged; its digest is {sealed_digest(data)})"
        ) from None
    try:
        doc = yaml.load(plain.decode("utf-8"), Loader=StrictLoader)
        entries = [(path.name, raw) for raw in entries_of(doc, path.name)]
        loaded = from_entries(entries, path.name)
    except Exception:  # the message could quote the contents: withheld
        raise QuestionFileError(
            where, None, None, "its contents do not load as questions (details withheld: sealed)"
        ) from None
    return [replace(q, sealed=True, source=path.name) for q in loaded]


def load_questions(
    folder: Traversable | Path | None = None, *, key_env: str | None = None
) -> list[GoldQuestion]:
    """Every question in ``folder`` (default: the built-in set), sorted by id: a question folder
    (:func:`pytest_heron.dataset.questions.load_folder`), or a sealed file (``heron seal``),
    read with the key in the environment variable ``key_env`` (default ``HERON_SEALED_KEY``)."""
    if isinstance(folder, Path) and folder.is_file():
        return load_sealed(folder, key_env=key_env)
    return load_folder(folder)
