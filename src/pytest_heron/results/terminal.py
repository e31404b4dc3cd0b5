"""The terminal summary of a results document."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_heron.scoring import metrics


def _fmt(value: Any, suffix: str = "%") -> str:
    return "n/a" if value is None else f"{value:.1f}{suffix}"


def _interval(ci: Any) -> str:
    return "n/a" if not ci else f"[{ci[0]:.1f}%, {ci[1]:.1f}%]"


def conditions_line(c: Mapping[str, Any]) -> str:
    seeds = ",".join(str(s) for s in c.get("seeds") or [])
    return (
        f"adapter={c.get('adapter')} scale={c.get('scale')} seeds={seeds} states={c.get('states')}"
        f" ({'multi' if (c.get('states') or 1) > 1 else 'single'}-state)"
        f" model={c.get('model') or 'n/a'} temperature={c.get('temperature')}"
        f" samples={c.get('samples')}"
        + (f" strategy={c['strategy']}" if c.get("strategy") else "")
        + f" n={c.get('n_questions')}"
        f" backend={c.get('backend')} postgres={c.get('postgres_version')}"
        f" data={c.get('tables')} tables/{c.get('rows')} rows"
    )


def usage_line(c: Mapping[str, Any], m: Mapping[str, Any]) -> str:
    """EX@k (a ceiling, never the headline), R-VES, billed tokens and cost."""
    samples = c.get("samples") or 1
    if m.get("ex_at_k"):
        at_k = ", ".join(f"EX@{k} {_fmt(v)}" for k, v in m["ex_at_k"].items())
        at_k = f"{at_k} (pass@k over {samples} samples, multi-state; a ceiling)"
    else:
        at_k = "EX@k: n/a (1 sample; use --heron-samples N)"
    if m.get("tokens_prompt") is None and m.get("tokens_completion") is None:
        tokens = "billed tokens: n/a (the adapter reported no usage)"
    else:
        tokens = (
            f"billed tokens prompt/completion: {m.get('tokens_prompt') or 0}/"
            f"{m.get('tokens_completion') or 0} ({m.get('tokens_per_q') or 0:.0f}/q)"
        )
    price = c.get("price")
    if m.get("cost_usd") is not None and price:
        cost = f"cost: ${m['cost_usd']:.6f} ({price['model']} list price as of {price['as_of']})"
    elif c.get("model") and not price:
        cost = f"cost: n/a (no price for {c['model']!r}; see --heron-prices)"
    else:
        cost = "cost: n/a"
    superset = f"superset EX (extra columns allowed; not EX): {_fmt(m.get('ex_superset'))}"
    return f"{at_k}   R-VES: {_fmt(m.get('r_ves'), '')}   {superset}   {tokens}   {cost}"


def summary_lines(doc: Mapping[str, Any]) -> list[str]:
    """The terminal summary: conditions first, then the headline and the breakdown."""
    c, m = doc["conditions"], doc["metrics"]
    n = len(doc["questions"])
    states = c.get("states")
    lines = [
        conditions_line(c),
        f"multi-state EX@1 (all {states} states): {_fmt(m['ex_multistate'])}   "
        f"EX@1 (seed {c['seeds'][0]} only): {_fmt(m['ex1'])}   "
        f"errors: {m['errors']}/{n}   Set-Recall: {_fmt(m['set_recall'])}   "
        f"latency median/p90: {_fmt(m['latency_s_median'], 's')}/"
        f"{_fmt(m.get('latency_s_p90'), 's')}",
        f"95% bootstrap interval of multi-state EX: {_interval(m.get('ex_multistate_ci95'))}   "
        f"exact match (sqlglot-normalised SQL, not EX): {_fmt(m['exact_match'])}   "
        f"Soft-F1: {_fmt(m['soft_f1'])}   VES (seed {c['seeds'][0]}): {_fmt(m['ves'], '')}",
        f"Grade: {_fmt(m['grade'], '')} = "
        + " + ".join(f"{w:.2f}·{k}" for k, w in metrics.GRADE_WEIGHTS.items())
        + f" (alone: T_ref={metrics.REF_TOKENS_PER_Q:g} tokens/q,"
        f" L_ref={metrics.REF_LATENCY_S:g}s)",
    ]
    lines.append(usage_line(c, m))
    kinds = metrics.error_kinds(doc["questions"])
    if kinds:
        lines.append("errors by kind: " + ", ".join(f"{k}={v}" for k, v in kinds.items()))
    for axis, buckets in doc["breakdown"].items():
        if not buckets:
            continue
        cells = [f"{name} {_fmt(b['ex_multistate'])} (n={b['n']})" for name, b in buckets.items()]
        lines.append(f"by {axis}: " + "; ".join(cells))
    return lines
