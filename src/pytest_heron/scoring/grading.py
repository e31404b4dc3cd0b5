"""The Grade: one 0-100 figure that pays for right answers (pure functions, no I/O).

EX and VES count as they are; token economy, reliability and latency are credited per right
answer (scaled by the share of questions right on every state), so a system whose answers run
but are wrong grades 0 however cheap and fast it is. Soft-F1 is partial credit shown beside EX
and never part of the Grade. docs/metrics.md gives the formula with a worked example.
"""

from __future__ import annotations

GRADE_WEIGHTS = {
    "ex": 0.45,
    "ves": 0.20,
    "token_economy": 0.15,
    "reliability": 0.10,
    "latency": 0.10,
}
PER_RIGHT_ANSWER = ("token_economy", "reliability", "latency")
"""The Grade's parts that are credited per right answer: each is scaled by C = EX/100, the share
of questions right on every state, so a system that answers nothing right earns none of them."""
# References for a run scored alone (on a leaderboard the refs are the board's best).
REF_TOKENS_PER_Q = 5000.0
REF_LATENCY_S = 5.0


def grade_parts(
    ex: float,
    ves_score: float | None,
    tokens_per_q: float | None,
    errors: int,
    n: int,
    latency_s: float | None,
    *,
    t_ref: float | None = REF_TOKENS_PER_Q,
    l_ref: float | None = REF_LATENCY_S,
) -> dict[str, float | None]:
    """Each part of the Grade (0-100) as it is weighted, keyed as :data:`GRADE_WEIGHTS`: the
    parts of :data:`PER_RIGHT_ANSWER` already scaled by C = EX/100 (see :func:`grade`); None
    for a part the run does not carry (VES, when no right answer was timed).

    >>> grade_parts(0.0, 0.0, None, 0, 100, 0.01)  # every answer ran, fast and free, none right
    {'ex': 0.0, 'ves': 0.0, 'token_economy': 0.0, 'reliability': 0.0, 'latency': 0.0}
    """
    right = max(0.0, min(1.0, ex / 100.0))
    token_economy = (
        100.0 if not tokens_per_q or not t_ref else 100.0 * min(1.0, t_ref / tokens_per_q)
    )
    latency = 100.0 if not latency_s or not l_ref else 100.0 * min(1.0, l_ref / latency_s)
    raw = {
        "ex": ex,
        "ves": None if ves_score is None else min(100.0, ves_score),
        "token_economy": token_economy,
        "reliability": 100.0 * (1 - errors / n),
        "latency": latency,
    }
    return {
        k: None if v is None else right * v if k in PER_RIGHT_ANSWER else v for k, v in raw.items()
    }


def grade(
    ex: float | None,
    ves_score: float | None,
    tokens_per_q: float | None,
    errors: int,
    n: int,
    latency_s: float | None,
    *,
    t_ref: float | None = REF_TOKENS_PER_Q,
    l_ref: float | None = REF_LATENCY_S,
) -> float | None:
    """The 0-100 Grade: ``0.45 EX + 0.20 VES + C (0.15 TokenEconomy + 0.10 Reliability +
    0.10 Latency)``, with C = ``EX/100`` the share of questions right on every state,
    Reliability = ``100 (1 - errors/n)``, TokenEconomy = ``100 min(1, T_ref/T)`` (100 when no
    tokens were billed or there is no reference), Latency = ``100 min(1, L_ref/L)``. Thrift,
    speed and reliability are paid per right answer: an answer that runs but is wrong buys
    none of them, so a run with EX 0 has Grade 0 however cheap, fast and error-free it was
    (VES is 0 there too: it credits correct answers only). With EX 100 C is 1 and the Grade is
    the plain weighted sum. Soft-F1 (partial credit) is never part of it. Every part is at most
    100 (VES, which rewards answers faster than gold, counts at most 100 here) and the weights
    sum to 1, so the Grade is at most 100.

    A part the run does not carry (VES, when no right answer was timed, as in a browser run) is
    left out and the weights of the parts present are renormalised to sum to 1: a missing
    figure is never scored as 0 (:attr:`Summary.absent` names it wherever the Grade is shown).

    >>> grade(100.0, 150.0, None, 0, 10, 0.1)
    100.0
    >>> grade(0.0, None, None, 0, 10, 0.01)  # every answer ran (SELECT 1), none right
    0.0
    >>> grade(50.0, 40.0, 10000.0, 0, 10, 10.0)  # 22.5 + 8 + 0.5 (7.5 + 10 + 5)
    41.75
    >>> grade(50.0, None, None, 0, 10, 0.1)  # (22.5 + 0.5 (15 + 10 + 10)) / 0.8: VES absent
    50.0
    """
    if ex is None or n == 0:
        return None
    parts = grade_parts(ex, ves_score, tokens_per_q, errors, n, latency_s, t_ref=t_ref, l_ref=l_ref)
    present = {k: v for k, v in parts.items() if v is not None}
    weight = sum(GRADE_WEIGHTS[k] for k in present)
    return round(sum(GRADE_WEIGHTS[k] * v for k, v in present.items()) / weight, 4)


def grade_note(ex: float | None, value: float | None) -> str | None:
    """Why a Grade is 0 when the reason is that no answer was right (None otherwise).

    >>> grade_note(0.0, 0.0).startswith("Grade 0: no answer was right on every state")
    True
    >>> grade_note(50.0, 40.0) is None
    True
    """
    if ex is None or value is None or ex > 0 or value > 0:
        return None
    return (
        "Grade 0: no answer was right on every state (EX 0), and reliability, token economy "
        "and latency are credited per right answer"
    )


def grade_formula() -> str:
    """The Grade's formula as the summary and the site print it.

    >>> grade_formula()
    '0.45·ex + 0.20·ves + C·(0.15·token_economy + 0.10·reliability + 0.10·latency), C = EX/100'
    """
    plain = [f"{w:.2f}·{k}" for k, w in GRADE_WEIGHTS.items() if k not in PER_RIGHT_ANSWER]
    paid = [f"{w:.2f}·{k}" for k, w in GRADE_WEIGHTS.items() if k in PER_RIGHT_ANSWER]
    return " + ".join(plain) + " + C·(" + " + ".join(paid) + "), C = EX/100"
