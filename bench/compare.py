"""The result comparator on big results, timed in one process against a naive reference.

Case A: gold of 1,000,000 rows x 2 columns (a customer id with duplicates and an amount), the
prediction is the same rows shuffled, copied into new objects in their new order as a database
driver would allocate them; prints rows/s of ``compare`` (unordered; best of ``--repeat`` runs,
wall clock, with its CPU time) and its peak memory: the tracemalloc peak of a second, traced call
(Python and numpy allocations made by the comparison, the inputs excluded) and the growth of the
process's peak RSS over the untraced runs. Targets: >= 1,000,000 rows/s and <= 500 MB. Also
printed, without a target: the same comparison when the prediction's rows are gold's own objects
in shuffled order (every memory access scattered: slower, and not what a driver returns).

Case B: 100,000 rows x 8 columns (ints, text, float, numeric as Decimal, an aware timestamp,
some NULLs); the prediction has its rows shuffled and its columns permuted. The reference is the
approach of BIRD/Spider-style evaluators: canonicalise and sort the gold rows once, then for each
column permutation (``itertools.permutations`` order) permute and sort the predicted rows and
compare, stopping at the first permutation that matches. It is exact (the data needs no numeric
tolerance). Its cost grows with the rank of the right permutation: the default reverses the last
four columns (rank 23, so 24 tries), generous to the reference, since a uniformly random
permutation of 8 columns needs about 20,000 tries. Its line ``ratio=<reference/ours>``
(target: >= 10) comes last.

Case C: 20,000 rows x 6 integer columns drawn from one domain (0-99, each column with its own
distribution, every value in every column), the prediction's rows shuffled and two columns
swapped (``--swap-c``).

Every case is also timed against the field's standard, test-suite-sql-eval's ``result_eq``
(Zhong, Yu and Klein, EMNLP 2020; taoyds/test-suite-sql-eval, ``exec_eval.py``), on the same
inputs in the same process, in rounds that run ours and then theirs (a slow spell of the shared
machine falls on both): one line per case ``suite: ours=<s> theirs=<s> ratio=<theirs/ours>``,
best run of each (target: >= 10 on each). Their code is read at bench time, never kept in this
repository: ``--suite-eval`` (or ``HERON_SUITE_EVAL``) names their ``exec_eval.py`` as a path or
a URL (default: the file at the commit :data:`SUITE_COMMIT` on GitHub); the functions of their
comparison (:data:`SUITE_FUNCTIONS`) are taken from its source and run as they are written,
without the module's imports for running queries (tqdm, their SQL parser, sqlite3). When it
cannot be read, the lines say so and time :func:`suite_result_eq`, our restatement of it, instead.

    python bench/compare.py [--rows-a 1000000] [--rows-b 100000] [--rows-c 20000] [--seed 7]
                            [--repeat 5] [--swap-c 0,5] [--cases A,B,C]
                            [--suite-eval PATH_OR_URL]
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import gc
import itertools
import os
import pickle
import random
import resource
import sys
import time
import tracemalloc
import typing
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import cast

import numpy as np
import psutil

from pytest_heron.compare import compare

Row = tuple[object, ...]

TARGET_ROWS_PER_S = 1_000_000
TARGET_PEAK_MB = 500.0
TARGET_RATIO = 10.0
TARGET_SUITE_RATIO = 10.0
SUITE_COMMIT = "e97acc546ecbee8fa27fa8dbf025ef61493a876c"  # taoyds/test-suite-sql-eval, 2022-08-02
SUITE_URL = (
    f"https://raw.githubusercontent.com/taoyds/test-suite-sql-eval/{SUITE_COMMIT}/exec_eval.py"
)
# result_eq and the functions it calls, as exec_eval.py names them
SUITE_FUNCTIONS = (
    "permute_tuple",
    "unorder_row",
    "quick_rej",
    "multiset_eq",
    "get_constraint_permutation",
    "result_eq",
)
SuiteEq = Callable[[Sequence["Row"], Sequence["Row"], bool, random.Random], bool]
DEFAULT_PERM = (0, 1, 2, 3, 7, 6, 5, 4)


def _case_a_rows(n: int, seed: int) -> list[Row]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, n // 4 + 2, size=n).tolist()  # about 4 rows per customer
    cents = np.round(rng.lognormal(mean=8.0, sigma=1.5, size=n)).astype(np.int64)
    cents[rng.random(n) < 0.05] = 1999  # a popular price: duplicate rows
    amounts = (cents / 100.0).tolist()
    return list(zip(ids, amounts, strict=True))


def _case_b_rows(n: int, seed: int) -> list[Row]:
    rng = np.random.default_rng(seed)
    ids = rng.permutation(n).tolist()
    tenants = rng.integers(1, 40, size=n).tolist()
    statuses = np.array(["open", "paid", "shipped", "cancelled", "refunded"])
    status = statuses[rng.integers(0, 5, size=n)].tolist()
    names = [f"customer {k:05d}" for k in rng.integers(0, 20_000, size=n).tolist()]
    amount = (np.round(rng.lognormal(6.0, 1.2, size=n) * 100) / 100).tolist()
    cents = rng.integers(0, 10**7, size=n).tolist()
    numeric: list[Decimal | None] = [Decimal(c).scaleb(-2) for c in cents]
    for k in rng.choice(n, size=n // 20, replace=False).tolist():
        numeric[k] = None
    base = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)
    seconds = rng.integers(0, 3 * 365 * 86400, size=n).tolist()
    stamps = [base + dt.timedelta(seconds=s) for s in seconds]
    quantity = rng.integers(1, 50, size=n).tolist()
    return list(zip(ids, tenants, status, names, amount, numeric, stamps, quantity, strict=True))


def _shuffled(rows: list[Row], seed: int) -> list[Row]:
    out = list(rows)
    random.Random(seed).shuffle(out)
    return out


def _fetched(rows: list[Row]) -> list[Row]:
    """The same rows as new objects allocated in row order, as a database driver returns them."""
    return cast("list[Row]", pickle.loads(pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)))


def _best_of(repeat: int, call: Callable[[], object]) -> tuple[float, list[float], float, object]:
    """Best wall time, all wall times, the CPU time of the best run, the last result."""
    times: list[float] = []
    cpu: list[float] = []
    result: object = None
    for _ in range(repeat):
        gc.collect()
        started, cpu_started = time.perf_counter(), time.process_time()
        result = call()
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
    best = min(range(repeat), key=times.__getitem__)
    return times[best], times, cpu[best], result


def _runs(times: list[float]) -> str:
    return " ".join(f"{t:.3f}" for t in times)


def _rss_mb() -> float:
    return float(psutil.Process().memory_info().rss) / 2**20


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --------------------------------------------------------------------------------------------
# the reference: sort rows canonically, try column permutations until one matches


def _sort_key(row: Row) -> tuple[tuple[bool, object], ...]:
    # NULLs sort last; within a column every non-NULL value has the same type
    return tuple((v is None, v) for v in row)


def reference_equal(gold: Sequence[Row], pred: Sequence[Row]) -> tuple[bool, int]:
    """(equal, permutations tried), as a naive exact evaluator decides it."""
    if len(gold) != len(pred):
        return False, 0
    if not gold:
        return True, 0
    width = len(gold[0])
    if len(pred[0]) != width:
        return False, 0
    gold_sorted = sorted(gold, key=_sort_key)
    tried = 0
    for perm in itertools.permutations(range(width)):
        tried += 1
        getter = _row_getter(perm)
        candidate = sorted(map(getter, pred), key=_sort_key)
        if candidate == gold_sorted:
            return True, tried
    return False, tried


def _row_getter(perm: tuple[int, ...]) -> Callable[[Row], Row]:
    def get(row: Row) -> Row:
        return tuple(row[k] for k in perm)

    return get


# --------------------------------------------------------------------------------------------
# test-suite-sql-eval's result_eq, restated (its algorithm, our code; see the module docstring)


def _bag_key(value: object) -> str:
    return str(value) + str(type(value))


def _row_as_bag(row: Row) -> Row:
    # a row's values in an order that ignores which column they came from
    return tuple(sorted(row, key=_bag_key))


def _same_bag(first: Sequence[Row], second: Sequence[Row]) -> bool:
    """Multiset equality by counting up over one side and down over the other."""
    if len(first) != len(second):
        return False
    tally: defaultdict[Row, int] = defaultdict(int)
    for row in first:
        tally[row] += 1
    for row in second:
        tally[row] -= 1
        if tally[row] < 0:
            return False
    return True


def suite_result_eq(
    gold: Sequence[Row], pred: Sequence[Row], order_matters: bool, rng: random.Random
) -> bool:
    """Whether two results are equal the way test-suite-sql-eval decides it.

    1. Both empty: equal; different row counts or widths: unequal.
    2. A necessary condition first: each row turned into its values sorted by their text (and
       type name); these must agree as sets (as lists when order matters).
    3. Candidate column permutations: with more than 3 columns, 20 randomly drawn predicted rows
       strike out, for each gold column, the predicted columns holding a value that gold column
       never has; every combination of the survivors that is a permutation is tried, in
       lexicographic order: the permuted prediction must equal gold as a list (order matters) or
       as a set and then as a multiset.
    Values compare with Python's ``==`` (no tolerance). Its ``random`` is seeded here (``rng``).
    """
    if not gold and not pred:
        return True
    if len(gold) != len(pred):
        return False
    width = len(gold[0])
    if len(pred[0]) != width:
        return False
    gold_bags = [_row_as_bag(r) for r in gold]
    pred_bags = [_row_as_bag(r) for r in pred]
    if order_matters:
        if gold_bags != pred_bags:
            return False
    elif set(gold_bags) != set(pred_bags):
        return False
    values_of = [{row[c] for row in gold} for c in range(width)]
    allowed = [list(range(width)) for _ in range(width)]
    if width > 3:
        for _ in range(20):
            drawn = rng.choice(pred)
            for c in range(width):
                allowed[c] = [k for k in allowed[c] if drawn[k] in values_of[c]]
    gold_list = list(gold)
    for perm in itertools.product(*allowed):
        if len(set(perm)) != width:
            continue
        moved = list(pred) if width == 1 else [tuple([r[k] for k in perm]) for r in pred]
        if order_matters:
            if moved == gold_list:
                return True
        elif set(moved) == set(gold_list) and _same_bag(gold_list, moved):
            return True
    return False


def _suite_source(where: str) -> str:
    """The text of their ``exec_eval.py``, from a path or an http(s) URL (read now, not kept)."""
    if where.startswith(("http://", "https://")):
        with urllib.request.urlopen(where, timeout=30) as response:
            return cast("bytes", response.read()).decode("utf-8")
    return Path(where).read_text(encoding="utf-8")


def load_suite_result_eq(where: str) -> SuiteEq:
    """test-suite-sql-eval's own ``result_eq``, compiled from their source.

    Only the functions of :data:`SUITE_FUNCTIONS` are kept (the module's other imports run
    queries and are not installed here); they get the names they import from the standard
    library. Their ``random.choice`` is given a seeded :class:`random.Random` per call, so a run
    draws the same columns as another.
    """
    tree = ast.parse(_suite_source(where), filename="exec_eval.py")
    kept = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in SUITE_FUNCTIONS]
    missing = sorted(set(SUITE_FUNCTIONS) - {n.name for n in kept})
    if missing:
        raise ValueError(f"exec_eval.py has no {', '.join(missing)}")
    names: dict[str, object] = {
        "product": itertools.product,
        "defaultdict": defaultdict,
        **{name: getattr(typing, name) for name in ("Any", "List", "Set", "Tuple")},
    }
    exec(compile(ast.Module(body=kept, type_ignores=[]), "exec_eval.py", "exec"), names)
    theirs = cast("Callable[[Sequence[Row], Sequence[Row], bool], bool]", names["result_eq"])

    def call(gold: Sequence[Row], pred: Sequence[Row], order: bool, rng: random.Random) -> bool:
        names["random"] = rng
        return theirs(gold, pred, order)

    return call


def suite_comparator(where: str) -> tuple[SuiteEq, str]:
    """Their ``result_eq`` from ``where`` and a label; our restatement when it cannot be read."""
    try:
        return load_suite_result_eq(where), f"result_eq from {where}"
    except Exception as exc:
        print(f"test-suite-sql-eval could not be read from {where} ({type(exc).__name__}: {exc})")
        print("  timing our restatement of result_eq instead (--suite-eval PATH_OR_URL)")
        return suite_result_eq, "result_eq RESTATED (their code not read)"


_SUITE: list[tuple[SuiteEq, str]] = []  # the comparator of this run, set by main()


def suite_line(
    name: str,
    gold: Sequence[Row],
    pred: Sequence[Row],
    ours: Callable[[], object],
    ours_times: list[float],
    repeat: int,
    seed: int,
) -> float:
    """Times test-suite-sql-eval's result_eq on a case, in rounds that also time ours once more.

    Each round runs ours, then theirs, so that a slow spell of the machine falls on both; a slow
    case stops after one round. The ratio is the best run of theirs over the best run of ours
    (``ours_times``, the case's own runs of ours, count too: the same call on the same input).
    The CPU seconds of the rounds are printed too (best of each): on a shared machine the wall
    clock also counts the time spent waiting for a core, the CPU time mostly does not. The
    target is judged on the wall clock.
    """
    theirs_eq, label = _SUITE[0] if _SUITE else (suite_result_eq, "result_eq RESTATED")
    times: list[float] = []
    mine = list(ours_times)
    cpu_mine: list[float] = []
    cpu_theirs: list[float] = []
    equal = None
    for _ in range(repeat):
        gc.collect()
        started, cpu_started = time.perf_counter(), time.process_time()
        ours()
        mine.append(time.perf_counter() - started)
        cpu_mine.append(time.process_time() - cpu_started)
        gc.collect()
        started, cpu_started = time.perf_counter(), time.process_time()
        equal = theirs_eq(gold, pred, False, random.Random(seed))
        times.append(time.perf_counter() - started)
        cpu_theirs.append(time.process_time() - cpu_started)
        if times[-1] > 20.0:  # one run of a slow case: noise is small beside it
            break
    theirs, ours_best = min(times), min(mine)
    ratio = theirs / ours_best
    cpu_ratio = min(cpu_theirs) / max(min(cpu_mine), 1e-9)
    print(
        f"  suite ({name}): test-suite-sql-eval {label} equal={equal} "
        f"ours={ours_best:.3f}s (best of {len(mine)}) theirs={theirs:.3f}s "
        f"(best of {len(times)}: {_runs(times)}) ratio={ratio:.1f} "
        f"target>={TARGET_SUITE_RATIO:.0f}: {_verdict(ratio >= TARGET_SUITE_RATIO)}"
    )
    print(
        f"  suite ({name}) cpu: ours={min(cpu_mine):.3f}s theirs={min(cpu_theirs):.3f}s "
        f"cpu_ratio={cpu_ratio:.1f}"
    )
    return ratio


# --------------------------------------------------------------------------------------------


def _peak_mb(call: Callable[[], object]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 2**20


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _case_c_rows(n: int, seed: int) -> list[Row]:
    rng = np.random.default_rng(seed)
    columns = []
    for _ in range(6):  # one domain (0-99), a different distribution per column
        weights = rng.random(100) + 0.5  # every value in every column (some 100 times each)
        columns.append(rng.choice(100, size=n, p=weights / weights.sum()).tolist())
    return list(zip(*columns, strict=True))


def case_c(rows: int, seed: int, repeat: int, swap: tuple[int, int]) -> float:
    """Case C: columns of one domain, two of them swapped in the prediction."""
    gold = _case_c_rows(rows, seed)
    perm = list(range(6))
    perm[swap[0]], perm[swap[1]] = perm[swap[1]], perm[swap[0]]
    pred = _fetched([tuple(r[k] for k in perm) for r in _shuffled(gold, seed + 3)])
    best, times, cpu, result = _best_of(repeat, lambda: compare(gold, pred))
    print(f"case C: {rows:,} rows x 6 integer columns of one domain, columns {swap} swapped")
    print(
        f"  ours: equal={getattr(result, 'equal', None)} seconds={best:.3f} "
        f"cpu_seconds={cpu:.3f} runs: {_runs(times)}"
    )
    return suite_line("C", gold, pred, lambda: compare(gold, pred), times, repeat, seed)


def case_a(rows: int, seed: int, repeat: int) -> float:
    """Case A: a big result, same columns, rows shuffled."""
    gold = _case_a_rows(rows, seed)
    shuffled = _shuffled(gold, seed + 1)
    pred = _fetched(shuffled)
    compare(gold[:60_000], pred[:60_000])  # warm-up (first-use imports and caches)
    rss_before = _rss_mb()
    maxrss_before = _maxrss_mb()
    best, times, cpu, result = _best_of(repeat, lambda: compare(gold, pred))
    rss_growth = max(0.0, _maxrss_mb() - max(rss_before, maxrss_before))
    peak = _peak_mb(lambda: compare(gold, pred))
    rate = rows / best
    print(f"case A: {rows:,} rows x 2 columns (int, float), prediction = the rows shuffled")
    print(f"  equal={getattr(result, 'equal', None)} seconds={best:.3f} cpu_seconds={cpu:.3f}")
    print(f"  runs: {_runs(times)}")
    ok = rate >= TARGET_ROWS_PER_S
    print(f"  rows_per_s={rate:,.0f} target>={TARGET_ROWS_PER_S:,}: {_verdict(ok)}")
    print(f"  tracemalloc_peak_mb={peak:.0f} (Python and numpy allocations, one traced compare)")
    print(f"  peak_rss_growth_mb={rss_growth:.0f} (process peak RSS over the RSS before the runs)")
    peak_ok = max(peak, rss_growth) <= TARGET_PEAK_MB
    print(f"  peak target<={TARGET_PEAK_MB:.0f} MB: {_verdict(peak_ok)}")
    # the same rows without copying them: the prediction's tuples and values are gold's objects,
    # so reading them in shuffled order scatters every memory access (a worst case for caches)
    best_shared, times_shared, _, _ = _best_of(repeat, lambda: compare(gold, shuffled))
    print(
        f"  shared objects (rows not copied): seconds={best_shared:.3f} "
        f"rows_per_s={rows / best_shared:,.0f} runs: {_runs(times_shared)}"
    )
    return suite_line("A", gold, pred, lambda: compare(gold, pred), times, repeat, seed)


def case_b(rows: int, seed: int, repeat: int, perm: tuple[int, ...]) -> tuple[float, float]:
    """Case B: mixed types, rows shuffled, columns permuted; (suite ratio, naive ratio)."""
    gold = _case_b_rows(rows, seed)
    pred = _fetched([tuple(r[k] for k in perm) for r in _shuffled(gold, seed + 2)])
    best, times, cpu, result = _best_of(repeat, lambda: compare(gold, pred))
    started = time.perf_counter()
    ref_equal, tried = reference_equal(gold, pred)
    ref_s = time.perf_counter() - started
    ratio = ref_s / best
    print(f"case B: {rows:,} rows x 8 columns, rows shuffled, columns permuted {perm}")
    print(
        f"  ours: equal={getattr(result, 'equal', None)} seconds={best:.3f} "
        f"cpu_seconds={cpu:.3f} runs: {_runs(times)}"
    )
    print(f"  reference: equal={ref_equal} seconds={ref_s:.3f} permutations_tried={tried}")
    print(
        f"  ratio={ratio:.1f} (naive reference / ours) target>={TARGET_RATIO:.0f}: "
        f"{_verdict(ratio >= TARGET_RATIO)}"
    )
    suite = suite_line("B", gold, pred, lambda: compare(gold, pred), times, repeat, seed)
    return suite, ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows-a", type=int, default=1_000_000)
    parser.add_argument("--rows-b", type=int, default=100_000)
    parser.add_argument("--rows-c", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="timed runs of ours, then rounds of (ours, theirs) against result_eq (best kept)",
    )
    parser.add_argument(
        "--perm",
        default=",".join(map(str, DEFAULT_PERM)),
        help="case B: predicted column k is gold column perm[k]",
    )
    parser.add_argument("--swap-c", default="0,5", help="case C: the two columns swapped")
    parser.add_argument("--cases", default="A,B,C", help="which cases to run (default: all)")
    parser.add_argument(
        "--suite-eval",
        default=os.environ.get("HERON_SUITE_EVAL", SUITE_URL),
        help="test-suite-sql-eval's exec_eval.py, a path or a URL (default: $HERON_SUITE_EVAL, "
        "else the file on GitHub at the pinned commit)",
    )
    args = parser.parse_args()
    _SUITE.append(suite_comparator(args.suite_eval))
    cases = {c.strip().upper() for c in args.cases.split(",") if c.strip()}
    if not cases or not cases <= {"A", "B", "C"}:
        parser.error("--cases takes a comma-separated subset of A,B,C")
    perm = tuple(int(p) for p in args.perm.split(","))
    first, second = (int(p) for p in args.swap_c.split(","))
    swap = (first, second)

    suites: dict[str, float] = {}
    ratio: float | None = None
    if "A" in cases:
        suites["A"] = case_a(args.rows_a, args.seed, args.repeat)
        gc.collect()
    if "B" in cases:
        suites["B"], ratio = case_b(args.rows_b, args.seed, args.repeat, perm)
        gc.collect()
    if "C" in cases:
        suites["C"] = case_c(args.rows_c, args.seed, args.repeat, swap)
    shown = " ".join(f"{name}={value:.1f}" for name, value in suites.items())
    print(
        f"suite ratios (test-suite-sql-eval {_SUITE[0][1]} / ours): {shown}; "
        f"target>={TARGET_SUITE_RATIO:.0f} "
        f"on each: {_verdict(min(suites.values()) >= TARGET_SUITE_RATIO)}"
    )
    if ratio is not None:
        print(f"ratio={ratio:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
