"""A resumed run exits as the whole run would have: wrong answers recorded before the interrupt
(taken from the journal, not asked again) still fail a run without a gate."""

from __future__ import annotations

import pytest

from test_plugin import FAST, GOLD, IN_PROCESS, _private

pytest_plugins = ["pytester"]

WRONG_THEN_DYING = (
    GOLD
    + """
import os

class WrongThenDying:
    name = "wrong-then-dying"
    def prepare(self, ctx): pass
    def generate(self, q):
        if q.id == "v002" and os.path.exists("die"):
            os._exit(3)  # the run stops here, as on Ctrl-C, a power cut or kill -9
        return "SELECT 0" if q.id == "v001" else GOLD[q.id]
"""
)


def test_a_resumed_run_without_a_gate_fails_on_the_wrong_answers_before_the_interrupt(
    pytester: pytest.Pytester,
) -> None:
    private = _private(pytester)
    pytester.makepyfile(flaky=WRONG_THEN_DYING)
    args = ["--heron-adapter=flaky:WrongThenDying", IN_PROCESS, f"--heron-questions={private}"]
    args += ["--heron-output=r.json", *FAST]
    (pytester.path / "die").write_text("")
    died = pytester.runpytest_subprocess(*args)
    assert died.ret == 3  # v001 (wrong) is in the journal, v002 killed the run
    (pytester.path / "die").unlink()

    resumed = pytester.runpytest_subprocess(*args, "--heron-resume")
    resumed.assert_outcomes(passed=2, deselected=1, failed=1)  # "1 failed in the journal"
    assert resumed.ret == pytest.ExitCode.TESTS_FAILED, resumed.stdout.str()
    resumed.stdout.fnmatch_lines(
        [
            "resumed: 1 questions taken from the journal, 1 of them failed: v001",
            "*1 failed in the journal*",
        ]
    )
    whole = pytester.runpytest_subprocess(*args[:-5], "--heron-output=whole.json", *FAST)
    whole.assert_outcomes(passed=2, failed=1)
    assert resumed.ret == whole.ret  # the same run, interrupted or not

    finished = pytester.runpytest_subprocess(*args, "--heron-resume")  # all in the journal
    assert finished.ret == pytest.ExitCode.TESTS_FAILED  # neither 0 nor 5 ("no tests ran")
    finished.assert_outcomes(deselected=3, failed=1)

    gated = pytester.runpytest_subprocess(*args, "--heron-resume", "--heron-min-ex=50")
    assert gated.ret == pytest.ExitCode.OK  # with a gate, the gate decides: 66.7% >= 50
    gated.stdout.fnmatch_lines(["resumed: 3 questions taken from the journal"])
