"""What each metric on a run page means, in one or two sentences (behind its "definition")."""

from __future__ import annotations

from pytest_heron.scoring import REF_LATENCY_S, REF_TOKENS_PER_Q, grade_formula

METRICS = (  # key, label, definition (the run page's cards)
    (
        "ex_multistate",
        "multi-state EX@1",
        "Share of questions whose one answer returns gold's result on every state of the run "
        "(the headline). Results are compared as multisets, order only where gold orders.",
    ),
    (
        "ex1",
        "EX@1 (first state)",
        "Share of questions whose answer returns gold's result on the first state (the first "
        "seed) alone; at least the multi-state figure.",
    ),
    (
        "ex_at_k",
        "EX@k (ceiling)",
        "Unbiased pass@k over the samples of each question (1 - C(n-c, k)/C(n, k), c = samples "
        "right on every state): a capability ceiling, never the headline.",
    ),
    (
        "exact_match",
        "exact match",
        "Share of answers whose SQL equals gold's after sqlglot normalisation. Not EX: "
        "different SQL can return the same rows.",
    ),
    (
        "ex_superset",
        "superset EX",
        "Share of questions right when extra predicted columns are allowed. Reported apart; "
        "never counted as EX.",
    ),
    (
        "soft_f1",
        "Soft-F1",
        "Row-level partial credit (BIRD mini-dev): the F1 of the predicted rows against gold's, "
        "averaged over questions; 100 for an answer the comparator accepts.",
    ),
    (
        "ves",
        "VES",
        "Valid Efficiency Score: 100/N × Σ 1[right] × √(t_gold / t_pred), each time the minimum "
        "of 5 runs after a warm-up, gold and prediction timed together on the first state.",
    ),
    (
        "r_ves",
        "R-VES",
        "Reward-based VES: the time ratio t_gold/t_pred put in steps (faster earns more, much "
        "slower earns little), summed over right answers; steadier than VES on fast queries.",
    ),
    (
        "set_recall",
        "Set-Recall",
        "Mean share of gold's tables among the tables the adapter put in its context; n/a when "
        "the adapter sends the whole schema or does not say.",
    ),
    (
        "tokens_per_q",
        "billed tokens / question",
        "Prompt plus completion tokens per question as the provider billed them (never "
        "estimated); n/a when the adapter reported none.",
    ),
    (
        "cost_usd",
        "cost, USD",
        "Billed tokens at the list price recorded in the run's conditions; n/a (never 0) when "
        "the model has no price.",
    ),
    (
        "errors",
        "errors",
        "Questions whose answer did not run: not a prediction, rejected by the guard, a "
        "database error, a timeout, a result over the caps, an adapter error or timeout.",
    ),
    (
        "latency_s_median",
        "median latency, s",
        "Median seconds the adapter took to answer one question.",
    ),
    (
        "grade",
        "Grade",
        f"0-100: {grade_formula()} (token economy, reliability and latency are paid per "
        "right answer, so EX 0 grades 0; Soft-F1 is not part of it)"
        f"; alone, TokenEconomy and Latency use T_ref={REF_TOKENS_PER_Q:g} tokens/q "
        f"and L_ref={REF_LATENCY_S:g} s (on a board, the board's best).",
    ),
)
