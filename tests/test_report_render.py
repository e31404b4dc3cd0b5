"""report.html rendered by a real browser: headless Chromium (Debian's ``chromium`` package).

The browser is found, or installed as root with apt-get, before the first test
(tests/provision.py); one still missing fails the test with the package to install. The page is
rendered to a screenshot (which must not be blank and must show the bar colour of the charts) and
to its DOM (which must carry the headline numbers).
"""

from __future__ import annotations

import struct
import subprocess
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import provision
from pytest_heron.core.errors import ErrorKind
from pytest_heron.results import document as report
from pytest_heron.results.conditions import Conditions
from pytest_heron.results.document import Results
from pytest_heron.scoring.outcome import Outcome, Sample
from pytest_heron.site.report import write_report

BAR = (0x3A, 0x6E, 0xA5)  # the fill of the report's bars (site/report.py, class "bar")


def find_chromium() -> str:
    """A Chromium executable: HERON_CHROMIUM, else one on PATH (tests/provision.py, which has
    installed or exported it before the first test); a missing browser is a failure naming the
    package, never a skip."""
    found = provision.find_chromium()
    if found is None:
        pytest.fail(provision.CHROMIUM_STOP, pytrace=False)
    return found


@pytest.fixture(scope="module")
def browser() -> str:
    return find_chromium()


def _run_browser(browser: str, *args: str) -> subprocess.CompletedProcess[str]:
    flags = [
        "--headless",
        "--no-sandbox",  # tests often run as root, where Chromium's sandbox refuses to start
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # any network fetch would fail visibly
    ]
    return subprocess.run(
        [browser, *flags, *args], capture_output=True, text=True, timeout=120, check=True
    )


def _png_pixels(data: bytes) -> list[tuple[int, int, int]]:
    """The RGB pixels of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = color = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, "unexpected PNG format"
        elif kind == b"IDAT":
            idat += body
    channels = 4 if color == 6 else 3
    stride = width * channels
    raw = zlib.decompress(idat)
    rows: list[bytearray] = []
    prev = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = prev[i]
            corner = prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(line)
        prev = line
    return [(row[x], row[x + 1], row[x + 2]) for row in rows for x in range(0, stride, channels)]


def _outcome(qid: str, shape: str, correct: bool, **extra: Any) -> Outcome:
    return Outcome(
        id=qid,
        shape=shape,
        retrieval="named",
        traps=("soft_delete",) if correct else (),
        gold_tables=("crm.accounts", "crm.contacts")[: 1 + len(qid) % 2],
        correct=correct,
        correct_by_state={"42": correct, "43": correct},
        error_kind=None if correct else ErrorKind.DB_ERROR,
        error=None if correct else "relation does not exist",
        pred_sql="SELECT 1",
        tables_in_context=("crm.accounts",),
        usage={"prompt_tokens": 900, "completion_tokens": 100},
        latency_s=1.5,
        ves=1.1 if correct else None,
        soft_f1=1.0 if correct else 0.0,
        exact_match=False,
        samples=(Sample(0, correct, None, None), Sample(1, True, None, None)),
        **extra,
    )


def _document() -> Results:
    outcomes: Sequence[Outcome] = [
        _outcome(f"q{i:03d}", ("single", "join", "analytical")[i % 3], i % 4 != 0)
        for i in range(1, 13)
    ]
    conditions = Conditions(
        adapter="raw-llm",
        scale="small",
        seeds=(42, 43),
        states=2,
        model="gpt-4o-mini",
        temperature=0.0,
        samples=2,
        price={"model": "gpt-4o-mini", "prompt": 0.15, "completion": 0.6, "as_of": "x"},
        backend="embedded",
    )
    return report.results_document(conditions, outcomes)


def test_report_renders_in_headless_chromium_with_the_headline_numbers(
    browser: str, tmp_path: Path
) -> None:
    doc = _document()
    write_report(tmp_path, doc)
    page = (tmp_path / "report.html").resolve().as_uri()
    m = doc.metrics
    assert m.ex_multistate == 75.0 and m.ex_at_k == {"1": 87.5, "2": 100.0}

    dom = _run_browser(browser, "--dump-dom", page).stdout
    assert "<svg" in dom and "multi-state EX@1" in dom
    for shown in ("75.0", "87.5", "100.0", f"{m.grade:.1f}", f"{m.cost_usd:.6f}"):
        assert shown in dom, f"{shown} is not on the rendered page"
    assert "model=gpt-4o-mini" in dom and "samples=2" in dom

    shot = tmp_path / "shot.png"
    _run_browser(browser, "--window-size=1280,1600", f"--screenshot={shot}", page)
    pixels = _png_pixels(shot.read_bytes())
    assert len(pixels) == 1280 * 1600
    white = sum(p == (255, 255, 255) for p in pixels)
    assert white < 0.98 * len(pixels), "the page rendered (almost) blank"
    bars = sum(abs(p[0] - BAR[0]) + abs(p[1] - BAR[1]) + abs(p[2] - BAR[2]) < 12 for p in pixels)
    assert bars > 500, "no chart bars were drawn"
