"""A copier that keeps the public templates (issue 41): the strongest system the public files allow.

Every built-in question ships its English and gold SQL as templates with declared parameters,
and a variant changes only the values, which its English states. This adapter keeps all of
them: it reads the values back out of a question's English with a pattern made from each
English template, and renders that template's gold with heron's own ``render``; a question no
template matches gets the gold of the public question whose English shares most words with it.
On the public set and its variants it is (nearly) always right; on a sealed split, whose
questions nobody outside has seen, it has nothing to copy.

:func:`adapter_source` gives this module's text with the templates built in (the adapter runs
in its own process, jailed, where the test folder is out of sight), for a scenario folder.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

TEMPLATES: list[dict[str, Any]] = []  # filled in by adapter_source()
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)([+-][0-9]+)?(?::(raw))?\}")
_WORD = re.compile(r"[a-z0-9]+")


def templates() -> list[dict[str, Any]]:
    """What a copier keeps of the built-in set: per question its English and gold, as
    templates when it has parameters, with the parameters' defaults."""
    from pytest_heron.dataset import load_questions

    kept = []
    for q in load_questions(None):
        kept.append(
            {
                "question": q.question,
                "gold_sql": q.gold_sql,
                "template_question": q.template_question,
                "template_sql": q.template_sql,
                "defaults": {
                    p.name: p.default.isoformat() if isinstance(p.default, dt.date) else p.default
                    for p in q.parameters
                },
            }
        )
    return kept


def adapter_source() -> str:
    """This module's source with :data:`TEMPLATES` filled in."""
    text = Path(__file__).read_text(encoding="utf-8")
    blob = json.dumps(templates())
    return text.replace(
        "TEMPLATES: list[dict[str, Any]] = []  # filled in by adapter_source()",
        f"TEMPLATES: list[dict[str, Any]] = json.loads({blob!r})",
        1,
    )


def _pattern(template: str) -> re.Pattern[str]:
    parts: list[str] = []
    seen: list[str] = []
    last = 0
    for m in _PLACEHOLDER.finditer(template):
        parts.append(re.escape(template[last : m.start()]))
        name = m.group(1)
        if m.group(2) is None and name not in seen:
            parts.append(f"(?P<{name}>.+?)")
            seen.append(name)
        else:
            parts.append(".+?")
        last = m.end()
    parts.append(re.escape(template[last:]))
    return re.compile("".join(parts), re.DOTALL)


def _value(text: str, default: Any) -> Any:
    if isinstance(default, bool):
        return text.lower() == "true"
    if isinstance(default, int):
        return int(text)
    if isinstance(default, float):
        return float(text)
    if isinstance(default, str):
        try:
            return dt.date.fromisoformat(default) and dt.date.fromisoformat(text)
        except ValueError:
            return text
    return text


def answer(question: str) -> str:
    """The SQL a template keeper gives for ``question``."""
    from pytest_heron.dataset import render

    for t in TEMPLATES:
        if not t["template_question"]:
            if question.strip() == t["question"].strip():
                return str(t["gold_sql"])
            continue
        m = _pattern(t["template_question"]).fullmatch(question.strip())
        if m is None:
            continue
        values = {k: _value(v, t["defaults"][k]) for k, v in m.groupdict().items()}
        values = {k: _value(str(d), d) for k, d in t["defaults"].items()} | values
        try:
            return str(render(t["template_sql"], values, sql=True))
        except Exception:
            return str(t["gold_sql"])
    words = set(_WORD.findall(question.lower()))
    best = max(TEMPLATES, key=lambda t: len(words & set(_WORD.findall(t["question"].lower()))))
    return str(best["gold_sql"])


class Keeper:
    """The adapter: ``--heron-adapter=keeper:Keeper`` in a folder holding :func:`adapter_source`."""

    name = "template-keeper"
    version = "1"

    def prepare(self, ctx: Any) -> None:
        pass

    def generate(self, q: Any) -> str:
        return answer(q.question)
