"""``heron leaderboard``: ``board/leaderboard.{json,csv,md,svg}`` from verified submissions.

Only a submission whose ``verdict.json`` (written by CI's verification) is accepted *and* was
made for the folder's current content (its digest) becomes a row; rejected ones are listed with
their reasons and EX-family figures, never dropped; a folder without a valid verdict is listed as
unverified. Whether a row is the reference or ranked is decided again here from the adapter the
run recorded (:mod:`.standing`), never from the ``tool`` it calls itself, so an accepted verdict
of a run that no system produced is listed as rejected with the reason. Every row names how
it was checked (:mod:`.tiers`); only rows re-run on unseen questions are ranked, the others are
listed beneath them, unranked. Every figure on the board is the verifier's reproduced one,
never the claimed one.
The output is a pure function of the submission folders: same folders, same bytes.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pytest_heron.board.standing import EX_FAMILY_KEYS, REFERENCE, standing
from pytest_heron.board.submission import DIGEST, VERDICT, content_names, folder_digest
from pytest_heron.board.tiers import REEXECUTED, REPLAYED, RERUN, ranked_tier, tier
from pytest_heron.board.verifier import read_verdict
from pytest_heron.core.errors import HeronError, ResultsFileError
from pytest_heron.core.safe_text import csv_cell, html_text, markdown_cell, one_line
from pytest_heron.scoring import grade, mcnemar_exact

BOARD_FORMAT = 1
FILES = ("leaderboard.json", "leaderboard.csv", "leaderboard.md", "leaderboard.svg")
COLUMNS = (
    ("rank", "rank"),
    ("tier", "checked by"),
    ("tool", "tool"),
    ("tool_version", "version"),
    ("approach", "approach"),
    ("grade", "Grade"),
    ("ex_multistate", "multi-state EX@1"),
    ("ex_multistate_ci95", "95% interval"),
    ("ex1", "EX@1"),
    ("ex_hidden_seed", "EX hidden seed"),
    ("ves", "VES"),
    ("soft_f1", "Soft-F1"),
    ("set_recall", "Set-Recall"),
    ("tokens_per_q", "tokens/q"),
    ("cost_usd", "cost USD"),
    ("errors", "errors"),
    ("mcnemar_p", "McNemar p vs above"),
)


def board_grade(
    reproduced: Mapping[str, Any], n: int, t_ref: float | None, l_ref: float | None
) -> float | None:
    """DESIGN's Grade with the board's best tokens per question and latency as references
    (:func:`~pytest_heron.scoring.metrics.grade`, so a board with no answers grades 0 too)."""
    ex = reproduced.get("ex_multistate")
    if ex is None or n == 0:
        return None
    ves = reproduced.get("ves")
    tokens = reproduced.get("tokens_per_q")
    latency = reproduced.get("latency_s_median")
    return grade(
        float(ex),
        None if ves is None else float(ves),
        None if tokens is None else float(tokens),
        int(reproduced.get("errors") or 0),
        n,
        None if latency is None else float(latency),
        t_ref=t_ref,
        l_ref=l_ref,
    )


def _collect(submissions: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Any]]:
    accepted: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    unverified: list[dict[str, str]] = []
    for folder in sorted(p for p in submissions.iterdir() if p.is_dir() and not p.is_symlink()):
        verdict_path = folder / VERDICT
        if not verdict_path.is_file() or verdict_path.is_symlink():
            unverified.append({"name": folder.name, "why": "no verdict.json yet"})
            continue
        try:
            verdict = read_verdict(verdict_path)
        except ResultsFileError as exc:
            unverified.append({"name": folder.name, "why": f"unreadable verdict ({exc})"[:300]})
            continue
        if verdict.get("submission") != folder.name:
            unverified.append({"name": folder.name, "why": "the verdict names another folder"})
            continue
        if verdict["accepted"]:
            names = content_names(folder)
            recorded = (
                (folder / DIGEST).read_text(encoding="utf-8").strip()
                if (folder / DIGEST).is_file()
                else None
            )
            if recorded != folder_digest(folder, names) or verdict.get("digest") != recorded:
                unverified.append(
                    {"name": folder.name, "why": "changed since its verdict (digest differs)"}
                )
                continue
            why = standing_reason(verdict)
            if why is None:
                accepted.append(verdict)
            else:
                rejected.append({**verdict, "reasons": [*verdict["reasons"], why]})
        else:
            rejected.append(verdict)
    return accepted, rejected, unverified


def _adapter(verdict: Mapping[str, Any]) -> str | None:
    meta = verdict.get("meta")
    conditions = meta.get("conditions") if isinstance(meta, dict) else None
    adapter = conditions.get("adapter") if isinstance(conditions, dict) else None
    return adapter if isinstance(adapter, str) else None


def standing_reason(verdict: Mapping[str, Any]) -> str | None:
    """Why an accepted verdict still cannot be a row (None: it can), from the adapter its run
    recorded and the tool it names (:func:`~.standing.standing`)."""
    meta = verdict.get("meta")
    tool = meta.get("tool") if isinstance(meta, dict) else None
    return standing(_adapter(verdict), tool if isinstance(tool, str) else None).reason


def _row(verdict: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    meta = verdict.get("meta") or {}
    reproduced = verdict.get("reproduced") or {}
    ci = reproduced.get("ex_multistate_ci95")
    return {
        "rank": None,
        "reference": standing(_adapter(verdict), meta.get("tool")).kind == REFERENCE,
        "tier": tier(verdict),
        "name": verdict["submission"],
        "tool": meta.get("tool"),
        "tool_version": meta.get("tool_version"),
        "approach": meta.get("approach"),
        "grade": None,
        "ex_multistate": reproduced.get("ex_multistate"),
        "ex_multistate_ci95": None if ci is None else list(ci),
        "ex1": reproduced.get("ex1"),
        "ex_hidden_seed": verdict.get("ex_hidden_seed"),
        "ves": reproduced.get("ves"),
        "soft_f1": reproduced.get("soft_f1"),
        "set_recall": reproduced.get("set_recall"),
        "tokens_per_q": reproduced.get("tokens_per_q"),
        "tokens_as_reported": True,
        "cost_usd": reproduced.get("cost_usd"),
        "errors": reproduced.get("errors"),
        "mcnemar_p": None,
        "hidden_seed": verdict.get("hidden_seed"),
        "verified_at": verdict.get("verified_at"),
        "breakdown": f"{prefix}/{verdict['submission']}/{VERDICT}#breakdown",
        "conditions": meta.get("conditions"),
        "_reproduced": reproduced,
        "_correct": verdict.get("correct") or {},
    }


def rank_rows(verdicts: Sequence[Mapping[str, Any]], prefix: str) -> list[dict[str, Any]]:
    """Rows in board order: the reference row(s) first (not ranked), then the rows re-run on
    unseen questions, ranked by multi-state EX, Grade and name (each one's McNemar p is against
    the ranked row above it), then every other row, unranked, in the same order
    (:mod:`.tiers`)."""
    rows = [_row(v, prefix) for v in verdicts]
    tokens = [float(r["tokens_per_q"]) for r in rows if r["tokens_per_q"]]
    latencies = [
        float(r["_reproduced"]["latency_s_median"])
        for r in rows
        if r["_reproduced"].get("latency_s_median")
    ]
    t_ref = min(tokens) if tokens else None
    l_ref = min(latencies) if latencies else None
    for r in rows:
        r["grade"] = board_grade(r["_reproduced"], len(r["_correct"]), t_ref, l_ref)

    def key(r: Mapping[str, Any]) -> tuple[Any, ...]:
        return (-(r["ex_multistate"] or 0.0), -(r["grade"] or 0.0), r["name"])

    reference = sorted((r for r in rows if r["reference"]), key=key)
    others = [r for r in rows if not r["reference"]]
    ranked = sorted((r for r in others if ranked_tier(r["tier"])), key=key)
    unranked = sorted((r for r in others if not ranked_tier(r["tier"])), key=key)
    for i, r in enumerate(ranked):
        r["rank"] = i + 1
        if i:
            above = ranked[i - 1]["_correct"]
            mine = r["_correct"]
            common = sorted(set(above) & set(mine))
            wins = sum(bool(mine[q]) and not above[q] for q in common)
            losses = sum(bool(above[q]) and not mine[q] for q in common)
            r["mcnemar_p"] = round(mcnemar_exact(wins, losses), 6)
    out = []
    for r in [*reference, *ranked, *unranked]:
        out.append({k: v for k, v in r.items() if not k.startswith("_")})
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def ex_figures(table: Mapping[str, Any], side: str) -> dict[str, float | None]:
    """The EX-family figures of a verdict's metric table as plain numbers (``claimed`` or
    ``reproduced`` side): EX@1, multi-state EX, superset EX, and each EX@k as ``ex_at_<k>``.
    Anything else (intervals, tokens, the tables of other figures) is left out.

    >>> ex_figures({"ex1": {"claimed": 50, "reproduced": 40.0},
    ...             "ex_at_k": {"claimed": {"3": 60.0}, "reproduced": {"3": "x"}},
    ...             "ex_multistate_ci95": {"claimed": [1, 2]}}, "claimed")
    {'ex1': 50.0, 'ex_at_3': 60.0}
    """
    out: dict[str, float | None] = {}
    for name in EX_FAMILY_KEYS:
        cell = table.get(name)
        if isinstance(cell, dict) and side in cell:
            out[name] = _number(cell[side])
    cell = table.get("ex_at_k")
    at_k = cell.get(side) if isinstance(cell, dict) else None
    if isinstance(at_k, dict):
        for k in sorted(at_k, key=lambda k: (len(str(k)), str(k))):
            if str(k).isdigit():
                out[f"ex_at_{k}"] = _number(at_k[k])
    return out


def _rejected_entry(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """What a reader of the board needs about a rejection: who, why, and the EX-family figures
    claimed and reproduced as plain numbers (the shape ``heron site --board`` reads)."""
    table = verdict.get("metrics")
    table = table if isinstance(table, dict) else {}
    meta = verdict.get("meta")
    tool = meta.get("tool") if isinstance(meta, dict) else None
    return {
        "name": verdict["submission"],
        "tool": tool if isinstance(tool, str) else None,
        "reasons": [str(r) for r in verdict.get("reasons") or []],
        "claimed": ex_figures(table, "claimed"),
        "reproduced": ex_figures(table, "reproduced"),
        "ex_hidden_seed": _number(verdict.get("ex_hidden_seed")),
        "gold_share": _number(verdict.get("gold_share")),
    }


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, list) and len(value) == 2:
        return f"{_fmt(value[0])}–{_fmt(value[1])}"
    return str(value)


def _cell(row: Mapping[str, Any], key: str) -> str:
    if key == "rank":
        return "ref" if row["reference"] else "—" if row["rank"] is None else str(row["rank"])
    if key == "mcnemar_p":
        return _fmt(row[key], 3)
    if key == "cost_usd":
        return _fmt(row[key], 4)
    return _fmt(row[key])


def _link(path: str) -> str:
    """A relative link target: every character outside a plain path percent-encoded (the
    folder name is checked by the verifier, but the board does not rely on it)."""
    return quote(one_line(path), safe="/#._-")


def _markdown(rows: Sequence[Mapping[str, Any]], rejected: Sequence[Mapping[str, Any]]) -> str:
    lines = [
        "<!-- generated by `heron leaderboard`; do not edit (CI checks it) -->",
        "",
        "| " + " | ".join(title for _, title in COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for r in rows:
        cells = [markdown_cell(_cell(r, key)) for key, _ in COLUMNS]
        cells[2] = f"[{cells[2]}](../{_link(r['breakdown'])})"
        lines.append("| " + " | ".join(cells) + " |")
    if not rows:
        lines.append("| " + " | ".join(["—"] * len(COLUMNS)) + " |")
    lines += [
        "",
        "`ref`: the harness's gold adapter, the reference row (not ranked). Figures are the "
        "verifier's, reproduced from the submitted SQL; tokens and cost are as reported.",
        "",
        f"`checked by`: only rows {RERUN} (the verifier ran the system on a sealed split or on "
        f"variants drawn at verification time) are ranked; rows {REPLAYED} (the shipped "
        f"transcript gave back the SQL) or only {REEXECUTED} (the SQL was run again) are "
        "listed beneath them, unranked (`—`).",
        "",
        f"Rejected submissions: {len(rejected)} (see `rejected` in leaderboard.json).",
        "",
    ]
    return "\n".join(lines)


def _csv(rows: Sequence[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    keys = [key for key, _ in COLUMNS] + ["reference", "name", "breakdown"]
    writer.writerow(keys)
    for r in rows:
        cells = []
        for key in keys:
            value = r.get(key)
            if key == "ex_multistate_ci95":
                cells.append("" if value is None else f"{value[0]}-{value[1]}")
            else:
                cells.append("" if value is None else str(value))
        writer.writerow([csv_cell(c) for c in cells])
    return buf.getvalue()


def _svg(rows: Sequence[Mapping[str, Any]]) -> str:
    """Multi-state EX with its 95 % interval per row, as horizontal bars."""
    left, width, step, top = 220, 440, 26, 40
    height = top + step * max(1, len(rows)) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 40}" '
        f'height="{height}" font-family="sans-serif" font-size="12">',
        '<text x="10" y="20" font-weight="bold">multi-state EX@1 (%) with 95% interval</text>',
    ]
    for tick in range(0, 101, 20):
        x = left + width * tick / 100
        out.append(
            f'<line x1="{x:.1f}" y1="{top - 8}" x2="{x:.1f}" y2="{height - 24}" stroke="#ddd"/>'
        )
        out.append(f'<text x="{x:.1f}" y="{height - 10}" text-anchor="middle">{tick}</text>')
    if not rows:
        out.append(f'<text x="{left}" y="{top + 14}">no verified submission yet</text>')
    for i, r in enumerate(rows):
        y = top + step * i
        label = html_text(f"{_cell(r, 'rank')}. {r['tool']} {r['tool_version'] or ''}".strip()[:40])
        ex = float(r["ex_multistate"] or 0.0)
        colour = "#999" if r["reference"] else "#3b6ea8"
        out.append(f'<text x="{left - 8}" y="{y + 14}" text-anchor="end">{label}</text>')
        out.append(
            f'<rect x="{left}" y="{y + 3}" width="{width * ex / 100:.1f}" height="14" '
            f'fill="{colour}"/>'
        )
        ci = r["ex_multistate_ci95"]
        if ci is not None:
            x1, x2 = left + width * ci[0] / 100, left + width * ci[1] / 100
            out.append(
                f'<line x1="{x1:.1f}" y1="{y + 10}" x2="{x2:.1f}" y2="{y + 10}" '
                'stroke="#000" stroke-width="1.5"/>'
            )
            for x in (x1, x2):
                out.append(
                    f'<line x1="{x:.1f}" y1="{y + 5}" x2="{x:.1f}" y2="{y + 15}" stroke="#000"/>'
                )
        out.append(f'<text x="{left + width + 4}" y="{y + 14}">{ex:.1f}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def build_board(submissions: Path) -> dict[str, str]:
    """The four board files (name -> text) for the submission folders under ``submissions``."""
    if not submissions.is_dir():
        raise HeronError(f"{submissions}: not a folder of submissions")
    accepted, rejected, unverified = _collect(submissions)
    rows = rank_rows(accepted, submissions.name)
    rejects = [_rejected_entry(v) for v in rejected]
    document = {
        "format": BOARD_FORMAT,
        "rows": rows,
        "rejected": rejects,
        "unverified": unverified,
    }
    return {
        "leaderboard.json": json.dumps(document, indent=2, ensure_ascii=False) + "\n",
        "leaderboard.csv": _csv(rows),
        "leaderboard.md": _markdown(rows, rejects),
        "leaderboard.svg": _svg(rows),
    }


def write_board(files: Mapping[str, str], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in FILES:
        path = out / name
        path.write_bytes(files[name].encode("utf-8"))
        written.append(path)
    return written


def check_board(files: Mapping[str, str], out: Path) -> list[str]:
    """The board files in ``out`` that are missing or differ byte for byte."""
    differ = []
    for name in FILES:
        path = out / name
        if not path.is_file() or path.read_bytes() != files[name].encode("utf-8"):
            differ.append(name)
    return differ
