"""Stage 6: one question scored (:mod:`.score`, its record :mod:`.outcome`), metrics over all
outcomes (:mod:`.metrics`), the Grade (:mod:`.grading`), Set-Recall@k of the retrieval baselines
(:mod:`.recall`), and list prices (:mod:`.pricing`)."""

from typing import TYPE_CHECKING

from pytest_heron.core.door import opener

# The door: what other stages may import from this one, each name loaded on first use
# (tests/test_layers.py holds every other stage to these names).
if TYPE_CHECKING:
    from pytest_heron.scoring.context import RUN_KS as RUN_KS
    from pytest_heron.scoring.grading import GRADE_WEIGHTS as GRADE_WEIGHTS
    from pytest_heron.scoring.grading import PER_RIGHT_ANSWER as PER_RIGHT_ANSWER
    from pytest_heron.scoring.grading import REF_LATENCY_S as REF_LATENCY_S
    from pytest_heron.scoring.grading import REF_TOKENS_PER_Q as REF_TOKENS_PER_Q
    from pytest_heron.scoring.grading import grade as grade
    from pytest_heron.scoring.grading import grade_formula as grade_formula
    from pytest_heron.scoring.grading import grade_note as grade_note
    from pytest_heron.scoring.metrics import Breakdown as Breakdown
    from pytest_heron.scoring.metrics import Bucket as Bucket
    from pytest_heron.scoring.metrics import Summary as Summary
    from pytest_heron.scoring.metrics import breakdown as breakdown
    from pytest_heron.scoring.metrics import error_kinds as error_kinds
    from pytest_heron.scoring.metrics import ex_multistate as ex_multistate
    from pytest_heron.scoring.metrics import failure_mode as failure_mode
    from pytest_heron.scoring.metrics import mcnemar_exact as mcnemar_exact
    from pytest_heron.scoring.metrics import summary as summary
    from pytest_heron.scoring.outcome import FIELDS as FIELDS
    from pytest_heron.scoring.outcome import WITHHELD as WITHHELD
    from pytest_heron.scoring.outcome import Outcome as Outcome
    from pytest_heron.scoring.outcome import Sample as Sample
    from pytest_heron.scoring.pricing import load_prices as load_prices
    from pytest_heron.scoring.pricing import price_for as price_for
    from pytest_heron.scoring.recall import markdown as markdown
    from pytest_heron.scoring.recall import outcome_table as outcome_table
    from pytest_heron.scoring.recall import rank_questions as rank_questions
    from pytest_heron.scoring.recall import recall_table as recall_table
    from pytest_heron.scoring.recall import reported_table as reported_table
    from pytest_heron.scoring.recall import side_by_side as side_by_side
    from pytest_heron.scoring.recall_report import recall_command as recall_command
    from pytest_heron.scoring.score import TIME_RUNS as TIME_RUNS
    from pytest_heron.scoring.score import score_question as score_question
    from pytest_heron.scoring.score import score_retrieval as score_retrieval
    from pytest_heron.scoring.score import score_sql as score_sql
    from pytest_heron.scoring.volatility import volatile_calls as volatile_calls

_DOOR = {
    "Breakdown": "metrics",
    "Bucket": "metrics",
    "FIELDS": "outcome",
    "GRADE_WEIGHTS": "grading",
    "Outcome": "outcome",
    "PER_RIGHT_ANSWER": "grading",
    "REF_LATENCY_S": "grading",
    "RUN_KS": "context",
    "REF_TOKENS_PER_Q": "grading",
    "WITHHELD": "outcome",
    "Sample": "outcome",
    "Summary": "metrics",
    "TIME_RUNS": "score",
    "breakdown": "metrics",
    "error_kinds": "metrics",
    "ex_multistate": "metrics",
    "failure_mode": "metrics",
    "grade": "grading",
    "grade_formula": "grading",
    "grade_note": "grading",
    "load_prices": "pricing",
    "markdown": "recall",
    "mcnemar_exact": "metrics",
    "price_for": "pricing",
    "rank_questions": "recall",
    "recall_command": "recall_report",
    "recall_table": "recall",
    "outcome_table": "recall",
    "reported_table": "recall",
    "side_by_side": "recall",
    "score_question": "score",
    "score_retrieval": "score",
    "score_sql": "score",
    "summary": "metrics",
    "volatile_calls": "volatility",
}
__getattr__ = opener(globals(), _DOOR)
