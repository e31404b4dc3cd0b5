"""The one reader for files that come from elsewhere: JSON, JSON lines and YAML, with bounds.

A results file, a journal, a submission's ``claimed.json``, ``submission.yaml`` or
``predictions.jsonl``, a board's verdicts: any of these may have been written by someone who
wants the reader to crash. ``json.loads`` on 100,000 ``[`` raises RecursionError (a traceback,
not a verdict); a YAML alias bomb expands a kilobyte into gigabytes. Every such file goes
through this module, which refuses, *before* parsing where it matters:

- anything but a regular file (a FIFO, a device, a socket, a directory), told by ``lstat``
  before the file is opened, so ``open`` cannot wait on a FIFO forever or read a device without
  end;
- more bytes than ``Limits.max_bytes`` (checked on the file's size before it is read);
- text that is not UTF-8;
- nesting deeper than ``Limits.max_depth`` (for JSON a pre-scan of the brackets outside strings,
  so the parser never recurses that deep; for YAML a check in the compose step);
- more than ``Limits.max_items`` entries in one object or array, or more than
  ``Limits.max_nodes`` values in the whole document;
- duplicate keys in an object or mapping (the second would silently win);
- YAML aliases (``*name``), so no alias can multiply a document.

Every refusal is an :class:`OutsideFileError` naming the file and the limit. It is a
:class:`~pytest_heron.core.errors.ResultsFileError`, so callers that already turn those into one
sentence do the same for these. This module imports only the standard library, the error
hierarchy and (lazily) PyYAML.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_heron.core.errors import ResultsFileError


class OutsideFileError(ResultsFileError):
    """A file from elsewhere is malformed or passes one of the reader's limits; the message
    names the file (and line) and the limit."""


@dataclass(frozen=True)
class Limits:
    """Bounds for one kind of outside file. The defaults fit a results file of a few thousand
    questions with room to spare; callers with a known smaller file pass a smaller ``max_bytes``."""

    max_bytes: int = 256 * 1024 * 1024
    max_depth: int = 64
    max_items: int = 1_000_000  # entries in one object or array
    max_nodes: int = 20_000_000  # values in the whole document


DEFAULT = Limits()

# a JSON string, unrolled so the regex engine does not backtrack: quote, then runs of plain
# characters separated by escapes, then quote
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def _regular(name: str, path: Path) -> os.stat_result:
    """The status of ``path`` once it is known to be a regular file (a symbolic link is
    followed only to a regular file), else :class:`OutsideFileError` naming what it is.
    Nothing is opened: a FIFO's ``open`` waits for a writer forever, a device or socket
    never ends."""
    first = path.lstat()
    if stat.S_ISLNK(first.st_mode):
        first = path.stat()
    if not stat.S_ISREG(first.st_mode):
        raise OutsideFileError(f"{name}: {_kind(first.st_mode)}, not a regular file; not read")
    return first


def read_text(path: Path, where: str | None = None, limits: Limits = DEFAULT) -> str:
    """The file's text: refused unopened unless it is a regular file (:func:`_regular`), its
    size checked before it is read, then decoded as strict UTF-8. It is opened without
    blocking and must still be the file that was checked (device and inode), so a file
    swapped for a FIFO between the check and the open is refused too."""
    name = where or str(path)
    try:
        checked = _regular(name, path)
        size = checked.st_size
        if size > limits.max_bytes:
            raise OutsideFileError(f"{name}: {size} bytes, over the limit of {limits.max_bytes}")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as fh:
            opened = os.fstat(fh.fileno())
            if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
                checked.st_dev,
                checked.st_ino,
            ):
                raise OutsideFileError(f"{name}: changed while it was being opened; not read")
            raw = fh.read(limits.max_bytes + 1)
    except OSError as exc:
        raise OutsideFileError(f"{name}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > limits.max_bytes:  # grew between stat and read, or not a regular file
        raise OutsideFileError(f"{name}: over the limit of {limits.max_bytes} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OutsideFileError(f"{name}: not UTF-8 (byte {exc.start})") from None


def json_depth(text: str) -> int:
    """How deeply the brackets of ``text`` nest, outside strings (a bound on the depth a JSON
    parser would recurse to; text that is not JSON gets some number, and the parser refuses
    it anyway).

    >>> json_depth('{"a": [1, {"b": "[[[["}]}'), json_depth("1")
    (3, 0)
    """
    depth = deepest = 0
    for bracket in _BRACKETS.finditer(_STRING.sub("", text)):
        if bracket.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _refuse_duplicates(where: str, limits: Limits) -> Any:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len(pairs) > limits.max_items:
            raise OutsideFileError(
                f"{where}: an object of {len(pairs)} keys, over the limit of {limits.max_items}"
            )
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise OutsideFileError(f"{where}: duplicate key {key[:40]!r}")
            out[key] = value
        return out

    return hook


def _check_sizes(value: Any, where: str, limits: Limits) -> None:
    """Count every value (no recursion: the depth is already bounded, but a stack is cheaper)."""
    nodes = 0
    stack = [value]
    while stack:
        item = stack.pop()
        nodes += 1
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if len(children) > limits.max_items:
            raise OutsideFileError(
                f"{where}: a container of {len(children)} entries, over the limit of "
                f"{limits.max_items}"
            )
        stack.extend(children)
        if nodes + len(stack) > limits.max_nodes:
            raise OutsideFileError(f"{where}: over the limit of {limits.max_nodes} values")


def loads_json(text: str, where: str, limits: Limits = DEFAULT) -> Any:
    """One JSON document, within ``limits`` (see the module's docstring)."""
    if len(text) > limits.max_bytes:
        raise OutsideFileError(f"{where}: {len(text)} characters, over the limit")
    if text.count("[") + text.count("{") > limits.max_depth:  # else it cannot nest too deep
        depth = json_depth(text)
        if depth > limits.max_depth:
            raise OutsideFileError(
                f"{where}: nested {depth} levels deep, over the limit of {limits.max_depth}"
            )
    try:
        value = json.loads(text, object_pairs_hook=_refuse_duplicates(where, limits))
    except RecursionError:  # not reachable after the pre-scan; kept so no traceback escapes
        raise OutsideFileError(f"{where}: nested too deeply") from None
    except ValueError as exc:
        if isinstance(exc, OutsideFileError):
            raise
        raise OutsideFileError(f"{where}: not JSON ({str(exc)[:120]})") from None
    _check_sizes(value, where, limits)
    return value


def read_json(path: Path, where: str | None = None, limits: Limits = DEFAULT) -> Any:
    """A JSON file from elsewhere (:func:`read_text`, then :func:`loads_json`)."""
    name = where or str(path)
    return loads_json(read_text(path, name, limits), name, limits)


def loads_json_lines(text: str, where: str, limits: Limits = DEFAULT) -> list[Any]:
    """Every line of a JSON-lines text as a value (blank lines skipped). The first bad line
    raises, naming its number; callers that keep going past bad lines use :func:`loads_json`
    line by line."""
    if len(text) > limits.max_bytes:
        raise OutsideFileError(f"{where}: {len(text)} characters, over the limit")
    values = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            values.append(loads_json(line, f"{where}, line {number}", limits))
            if len(values) > limits.max_items:
                raise OutsideFileError(f"{where}: over the limit of {limits.max_items} lines")
    return values


def _yaml_loader(where: str, limits: Limits) -> Any:
    import yaml

    class Loader(yaml.SafeLoader):
        """Safe YAML with bounded depth and size, no aliases, no duplicate keys."""

        depth = 0
        nodes = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise OutsideFileError(
                    f"{where}: YAML aliases (*name) are not allowed (line {mark.line + 1})"
                )
            Loader.nodes += 1
            if Loader.nodes > limits.max_nodes:
                raise OutsideFileError(f"{where}: over the limit of {limits.max_nodes} values")
            Loader.depth += 1
            try:
                if Loader.depth > limits.max_depth:
                    raise OutsideFileError(
                        f"{where}: nested more than {limits.max_depth} levels deep"
                    )
                node: Any = super().compose_node(parent, index)
            finally:
                Loader.depth -= 1
            entries = getattr(node, "value", None)
            if isinstance(entries, list) and len(entries) > limits.max_items:
                raise OutsideFileError(
                    f"{where}: a container of {len(entries)} entries, over the limit of "
                    f"{limits.max_items}"
                )
            return node

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: list[Any] = []
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise OutsideFileError(
                        f"{where}: duplicate key {str(key)[:40]!r} "
                        f"(line {key_node.start_mark.line + 1})"
                    )
                seen.append(key)
            return super().construct_mapping(node, deep=deep)

    return Loader


def loads_yaml(text: str, where: str, limits: Limits = DEFAULT) -> Any:
    """One YAML document, within ``limits``: safe tags only, no aliases, no duplicate keys."""
    import yaml

    if len(text) > limits.max_bytes:
        raise OutsideFileError(f"{where}: {len(text)} characters, over the limit")
    try:
        return yaml.load(text, Loader=_yaml_loader(where, limits))  # a SafeLoader subclass
    except RecursionError:  # not reachable with the depth check; no traceback either way
        raise OutsideFileError(f"{where}: nested too deeply") from None
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise OutsideFileError(f"{where}: not valid YAML ({first[:160]})") from None


def read_yaml(path: Path, where: str | None = None, limits: Limits = DEFAULT) -> Any:
    """A YAML file from elsewhere (:func:`read_text`, then :func:`loads_yaml`)."""
    name = where or str(path)
    return loads_yaml(read_text(path, name, limits), name, limits)
