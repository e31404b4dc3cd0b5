"""The README's commands, and those of the reference pages under docs/, are test data: every
shell command in them is either run here (cheaply: at tiny scale, or only parsed where running it
would take too long or needs what a test machine has not) or listed in :data:`NOT_RUN` with the
reason, and a new command that is neither fails.

Shell commands live in fenced ``sh`` blocks; every other fenced block says what it is (``text``,
``sql``, ``python``, ``yaml``), and the README has no indented code blocks, so nothing that looks
like a command escapes this test."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_heron.cli import build_parser
from pytest_heron.options import OPTIONS

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PAGES = {path.name: path.read_text() for path in sorted((ROOT / "docs").glob("*.md"))}
ALL = "\n".join([README, *PAGES.values()])  # the README and every reference page
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
LANGUAGES = {"sh", "text", "sql", "python", "yaml"}

PRINTF = (
    'printf \'%s\\n\' \'{"id": "q001", "sql": "SELECT count(*) FROM orders.customers WHERE '
    'tenant_id = 2 AND deleted_at IS NULL"}\' \'{"id": "q011", "sql": "SELECT 1"}\' > '
    "predictions.jsonl"
)
# command -> the test that runs it for real (below, or elsewhere at tiny scale)
RUN = {
    "heron seed --scale tiny --seed 42": "test_cheap_commands_run",
    "heron checksum --scale tiny --seed 42": "test_cheap_commands_run",
    PRINTF: "test_the_predictions_example_scores_a_subset",
    (
        "pytest --heron-adapter=file --heron-predictions=predictions.jsonl --heron-scale=tiny "
        "-k 'q001 or q011'"
    ): "test_the_predictions_example_scores_a_subset",
    (
        "pytest --heron-adapter=mytool_adapter:MyTool --heron-endpoint=http://127.0.0.1:8089/v1 "
        "--heron-model=heron-stub --heron-scale=tiny"
    ): "test_the_llm_examples_run_against_the_stub",
    (
        "pytest --heron-adapter=raw-llm --heron-endpoint=http://127.0.0.1:8089/v1 "
        "--heron-model=heron-stub --heron-scale=tiny"
    ): "test_the_llm_examples_run_against_the_stub",
}
# command -> why this test does not run it (each is parsed: test_every_command_parses)
NOT_RUN = {
    "python -m pytest_heron.audit --questions my-split": (
        "my-split is the reader's private folder; the audit runs on built-in questions in "
        "test_audit.py"
    ),
    "heron seal --keygen > split.key": (
        "writes a secret key; test_sealed.py runs heron seal --keygen and seals a demo split"
    ),
    'export HERON_SEALED_KEY="$(tail -n 1 split.key)"': "the reader's key, made just above",
    "heron seal my-split --out split.sealed": (
        "my-split is the reader's private folder; test_sealed.py seals examples/sealed-demo"
    ),
    (
        "pytest --heron-adapter=my_system --heron-questions=split.sealed"
    ): "my_system is the reader's adapter; test_sealed.py runs gold and a copier on a sealed split",
    (
        "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/pytest "
        "--heron-adapter=gold -n 2"
    ): (
        "a fresh venv and install (minutes); its benchmark part runs at tiny scale in "
        "test_plugin.py::test_gold_scores_100_on_builtin_questions_and_xdist_agrees"
    ),
    (
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && "
        ".venv/bin/python -m pytest"
    ): "the whole test suite: .ci/run runs it verbatim (test_ci_runs_the_readme_test_command)",
    (
        'heron seed --scale bench --seed 42 --dsn "postgresql://user:pw@dbhost/postgres" --jobs 8'
    ): "bench scale (19 GB) on the reader's server; heron seed runs here at tiny",
    (
        "pytest --heron-adapter=gold --heron-scale=bench "
        '--heron-dsn "postgresql://user:pw@dbhost/postgres"'
    ): "bench scale on the reader's server; gold runs at tiny in test_plugin.py",
    "export OPENAI_API_KEY=sk-...": "a placeholder key",
    "python3 -m venv /opt/mytool '&&' /opt/mytool/bin/pip install mytool": (
        "a placeholder tool; test_adapter_python.py makes a bare venv with a package of its own"
    ),
    (
        "pytest --heron-adapter=my_adapter:MyTool --heron-adapter-python=/opt/mytool/bin/python "
        "--heron-scale=tiny"
    ): "the placeholder tool above; test_adapter_python.py runs this form with its own venv",
    "heron dsn --scale tiny --seed 42": (
        "stays in the foreground until Ctrl-C; test_dsn.py runs it, connects with what it "
        "printed and interrupts it"
    ),
    'psql "$(heron dsn --scale tiny --seed 42 --dsn "$SERVER" --form url)"': (
        "psql and the reader's server; test_dsn.py runs heron dsn --dsn with each --form and "
        "connects with what it printed"
    ),
    (
        "pytest --heron-adapter=raw-llm --heron-endpoint=https://api.openai.com/v1 "
        "--heron-model=gpt-4o-mini --heron-strategy=few-shot --heron-output=runs/4o-mini.json"
    ): (
        "needs a provider key and the network; raw-llm runs against a local endpoint in "
        "test_llm_adapters.py"
    ),
    "pytest --heron-adapter=mypkg.sql:MyAdapter --heron-save --heron-compare-fail=ex:2": (
        "mypkg is the reader's package; the same options run in test_saved_runs.py and "
        "test_first_hour.py"
    ),
    "pytest --heron-adapter=mypkg.sql:MyAdapter --heron-min-ex=40": (
        "mypkg is the reader's package; the gate runs in test_first_hour.py and on "
        "examples/vendor in test_vendor_kit.py"
    ),
    "heron variants --seed 7 --count 3": (
        "draws and audits 300 variants on three states (minutes): the audit tier runs it "
        "(tests/test_variants.py, marked audit); a few questions' variants in test_variants.py"
    ),
    "pytest --heron-adapter=my_system --heron-variants=7:3": (
        "my_system is the reader's adapter; gold on variants runs in test_variants.py"
    ),
    (
        "heron seed --layout citus --scale tiny --seed 42 "
        '--dsn "postgresql://user:pw@coordinator-host/postgres" --jobs 2'
    ): (
        "needs a Citus cluster; the Citus tier (scripts/citus_tier.sh, "
        "tests/test_citus_cluster.py) seeds tiny on a real one"
    ),
    (
        "pytest --heron-adapter=gold --heron-layout=citus --heron-scale=tiny "
        '--heron-dsn "postgresql://user:pw@coordinator-host/postgres"'
    ): "needs a Citus cluster; the Citus tier runs gold on one (tests/test_citus_cluster.py)",
    (
        "heron checksum --layout citus --scale tiny --seed 42 "
        '--dsn "postgresql://user:pw@coordinator-host/postgres"'
    ): "needs a Citus cluster; the Citus tier compares its checksums (tests/test_citus_cluster.py)",
    (
        "heron seed --layout citus --scale small --seed 42 --jobs 2 "
        "--dsn postgresql://postgres@127.0.0.1:59811/postgres"
    ): "small on a Citus cluster (minutes); the Citus tier seeds tiny on a real one",
    (
        "pytest -p no:randomly -p no:cacheprovider -n 2 -q --heron-adapter=gold "
        "--heron-dsn=postgresql://postgres@127.0.0.1:59811/postgres --heron-layout=citus "
        "--heron-scale=small --heron-output=results.json"
    ): "small on a Citus cluster (minutes); the Citus tier runs gold at tiny on a real one",
    (
        "nice -n 19 ionice -c2 -n7 heron seed --layout citus --scale bench --seed 42 --jobs 2 "
        "--dsn postgresql://postgres@127.0.0.1:59821/postgres"
    ): "bench on a Citus cluster (40 min, 22 GB): measured once, docs/citus.md",
    "heron ddl --layout citus > heron_citus.sql": (
        "writes a file in the reader's folder; the same script is printed in "
        "tests/test_cli.py::test_ddl_prints_the_citus_script"
    ),
    "heron stub-llm": (
        "serves until Ctrl-C; the same endpoint (pytest_heron.systems.llm.stub.serve) answers "
        "test_the_llm_examples_run_against_the_stub and test_vendor_kit.py"
    ),
    "heron seed --scale small --seed 42 --dsn postgresql://user@host/postgres --jobs 2": (
        "a placeholder server"
    ),
    (
        "pytest --heron-adapter=NAME --heron-protocol board/protocol.yaml "
        "--heron-model gpt-4o-mini --heron-output results.json"
    ): "NAME is the reader's adapter; a protocol run is in test_submissions.py",
    (
        'heron submit results.json --name my-tool --approach "one line" '
        "--contact you@example.org --link https://..."
    ): "needs a protocol run's results; heron submit runs in test_submissions.py",
    "pytest --heron-adapter=gold --heron-output=runs/gold.json": (
        "the small scale's three states (minutes); gold runs at tiny in test_plugin.py and "
        "feeds a site in test_site.py::test_heron_site_on_two_plugin_runs"
    ),
    "heron site --board board --runs runs --out site": (
        "needs the run above; the same command on the committed board and tiny runs is "
        "test_site.py::test_heron_site_command_builds_board_runs_and_compare"
    ),
    "heron runner --out runner": (
        "fetches PGlite with npm and generates the tiny state (a minute); the same build runs in "
        "tests/test_browser_runner.py and test_site.py::"
        "test_heron_site_runner_adds_the_runner_page_and_its_navigation"
    ),
    "python3 -m http.server -d runner 8000": (
        "serves until stopped; the runner tests serve the page the same way"
    ),
    "pip install pytest_heron-0.1.0-py3-none-any.whl": (
        "the wheel form: test_packaging.py::test_the_wheel_ships_the_board_protocol builds that "
        "wheel with pip and reads the protocol out of it"
    ),
    "pip install 'pytest-heron @ git+URL'": (
        "URL stands for the reader's clone URL (the network); the same source as the path form"
    ),
    "pip install /path/to/pytest-heron": (
        "the path form, which the Quick start's `pip install -q .` runs in the clone"
    ),
    "heron convert bird predict_dev.json --out predictions.jsonl": (
        "predict_dev.json is the reader's BIRD output; test_convert.py converts one and scores it"
    ),
    "heron convert spider pred.txt --out predictions.jsonl": (
        "pred.txt is the reader's Spider output; test_convert.py converts the format"
    ),
    "heron verify-submission submissions/my-tool": (
        "builds four small states (minutes); the verifier runs in test_submissions.py"
    ),
}


def _blocks(text: str = ALL) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def _commands() -> list[str]:
    """Every command of the ``sh`` blocks: continuation lines joined, comments dropped."""
    commands = []
    for language, body in _blocks():
        if language != "sh":
            continue
        for line in body.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                commands.append(shlex.join(words).replace("'>'", ">"))
    return commands


def _normal(command: str) -> str:
    return shlex.join(shlex.split(command)).replace("'>'", ">")


def test_every_fenced_block_says_what_it_is_and_none_is_indented() -> None:
    assert {language for language, _ in _blocks()} <= LANGUAGES
    outside = FENCE.sub("", ALL).splitlines()
    indented = [
        line
        for before, line in itertools.pairwise(outside)
        if not before.strip() and line.startswith("    ")
    ]
    assert indented == [], "use a fenced sh or text block, not an indented one"


def test_every_readme_command_is_run_or_listed_with_a_reason() -> None:
    known = {_normal(c) for c in [*RUN, *NOT_RUN]}
    found = set(_commands())
    assert sorted(found - known) == [], "a README command no test runs or lists"
    assert sorted(known - found) == [], "a listed command is no longer in the README"


def test_every_command_parses() -> None:
    """heron commands are accepted by the heron parser; every --heron-* option of a pytest
    command exists."""
    names = {f"--{o.name}" for o in OPTIONS}
    parser = build_parser()
    for command in _commands():
        words = shlex.split(command)
        parts: list[list[str]] = [[]]
        for word in words:
            if word == "&&":
                parts.append([])
            else:
                parts[-1].append(word)
        for part in parts:
            part = part[: part.index(">")] if ">" in part else part
            tool = Path(part[0]).name
            if tool == "heron":
                parser.parse_args(part[1:])
            if tool == "pytest" or part[1:3] == ["-m", "pytest"]:
                used = {w.split("=")[0] for w in part if w.startswith("--heron-")}
                assert used <= names, (command, used - names)


def _env() -> dict[str, str]:
    """The environment a user's shell has: none of the lean inner-session variables the
    conftest sets for pytester tests (the README's commands load plugins as installed)."""
    lean = {"PYTHONPATH", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS"}
    env = {k: v for k, v in os.environ.items() if k not in lean}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_every_run_command_names_a_test_here() -> None:
    assert set(RUN.values()) <= {name for name in globals() if name.startswith("test_")}


def test_cheap_commands_run(tmp_path: Path) -> None:
    done = {}
    for command in [c for c, test in RUN.items() if test == "test_cheap_commands_run"]:
        result = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, (command, result.stderr[-2000:])
        done[command] = result.stdout
    seeded = json.loads(done["heron seed --scale tiny --seed 42"].strip().splitlines()[-1])
    assert seeded["tables"] == 211 and seeded["database"].startswith("heron_tiny_42_")
    total = done["heron checksum --scale tiny --seed 42"].strip().splitlines()[-1]
    assert re.fullmatch(r"total\t\d+\t[0-9a-f]{64}", total)


def _private_example() -> str:
    (yaml,) = [body for language, body in _blocks(PAGES["questions.md"]) if language == "yaml"]
    return yaml


def test_the_private_question_example_fails_a_constant(pytester: pytest.Pytester) -> None:
    folder = pytester.mkdir("mine")
    (folder / "set.yaml").write_text(_private_example())
    (pytester.path / "zero.jsonl").write_text('{"id": "p001", "sql": "SELECT 0"}\n')
    fast = ["--heron-scale=tiny", "--heron-states=2", "-p", "no:cacheprovider"]
    gold = pytester.runpytest_subprocess(
        "--heron-adapter=gold", f"--heron-questions={folder}", *fast
    )
    gold.assert_outcomes(passed=1)
    zero = pytester.runpytest_subprocess(
        "--heron-adapter=file",
        "--heron-predictions=zero.jsonl",
        f"--heron-questions={folder}",
        *fast,
    )
    zero.assert_outcomes(failed=1)


ADAPTER = """
class Mine:
    name = "mine"

    def prepare(self, ctx):
        pass

    def generate(self, q):
        return "SELECT x FROM (VALUES (1), (3)) AS t(x) ORDER BY x"
"""
ONE = """\
- id: v001
  question: Which numbers from one to three are odd, in order?
  gold_sql: SELECT x FROM (VALUES (1), (2), (3)) AS t(x) WHERE x % 2 = 1 ORDER BY x
  gold_tables: []
  shape: single
  retrieval: named
"""


def test_plain_pytest_finds_module_class_in_the_rootdir(pytester: pytest.Pytester) -> None:
    """``pytest`` (the script, not ``python -m pytest``) does not put the current folder on
    sys.path; ``module:Class`` still finds ``mine_adapter.py`` there."""
    (pytester.path / "mine_adapter.py").write_text(ADAPTER)
    (pytester.path / "q").mkdir()
    (pytester.path / "q" / "set.yaml").write_text(ONE)
    (pytester.path / "pytest.ini").write_text("[pytest]\n")
    sub = pytester.path / "sub"  # run from below the rootdir: found there too
    sub.mkdir()
    for cwd in (pytester.path, sub):
        result = subprocess.run(
            [
                str(BIN / "pytest"),
                "--heron-adapter=mine_adapter:Mine",
                f"--heron-questions={pytester.path / 'q'}",
                "--heron-scale=tiny",
                "--heron-states=1",
                "-p",
                "no:cacheprovider",
            ],
            cwd=cwd,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        assert "1 passed" in result.stdout


def _quick_start() -> list[str]:
    block = re.search(r"^## Quick start\n.*?^```sh\n(.*?)^```", README, re.S | re.M)
    assert block, "README.md has no '## Quick start' section with a fenced sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_has_exactly_two_commands() -> None:
    commands = _quick_start()
    assert len(commands) == 2
    assert "--heron-adapter=gold" in commands[0]


def test_ci_runs_the_readme_test_command() -> None:
    assert _quick_start()[1] in (ROOT / ".ci" / "run").read_text()


def test_readme_says_how_long_the_suite_takes_and_how_to_split_it() -> None:
    """The measured times of both Quick start commands and of the audit, each as an idle and a
    busy figure (issue 27 item 6), and how the suite runs in parallel."""
    section = README.split("## Measured times", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ")]
    timed = re.compile(r"\d+(\.\d+)? (min|s)\b")
    for label in ("Quick start 1, fresh clone", "Quick start 2", "pytest -m audit"):
        (row,) = [r for r in rows if label in r[0]]
        idle, busy = row[1], row[2]
        assert timed.search(idle) and timed.search(busy), row
    assert "two xdist" in README and "-n auto" in (ROOT / "docs" / "development.md").read_text()


def test_the_readme_is_short_and_links_every_reference_page() -> None:
    """A newcomer's README: at most ~300 lines; its first screen holds the Quick start's two
    commands and the contents list; every page under docs/ is linked from it."""
    lines = README.splitlines()
    assert len(lines) <= 300
    first_screen = "\n".join(lines[:70])
    assert all(command in first_screen for command in _quick_start())
    assert "## Contents" in first_screen
    for name in PAGES:
        assert f"](docs/{name}" in README, name
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[:4] == [
        "## Quick start",
        "## Contents",
        "## Score your tool in 5 minutes",
        "## Gate your CI",
    ]


def test_every_relative_link_resolves() -> None:
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    for base, text in [(ROOT, README), *((ROOT / "docs", t) for t in PAGES.values())]:
        for target in link.findall(text):
            if "://" in target:
                continue
            assert (base / target).exists(), (base, target)


def _shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a documented command in ``cwd``; ``pytest`` is this interpreter's."""
    if command.startswith("pytest "):
        command = f"{shlex.quote(sys.executable)} -m {command}"
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=1200,
    )


def _documented(prefix: str) -> str:
    (command,) = [c for c in _commands() if c.startswith(prefix)]
    return command


def test_the_predictions_example_scores_a_subset(tmp_path: Path) -> None:
    made = _shell(_documented("printf "), tmp_path)
    assert made.returncode == 0, made.stderr
    run = _shell(_documented("pytest --heron-adapter=file "), tmp_path)
    out = run.stdout
    assert run.returncode == 1, out[-3000:] + run.stderr[-2000:]
    assert "1 failed, 1 passed, 98 deselected" in out
    assert "[subset: 2 of 100, not comparable] multi-state EX@1 (all 3 states): 50.0%" in out
    assert "q011:" in out and "result differs from gold:" in out


def test_the_llm_examples_run_against_the_stub(tmp_path: Path) -> None:
    """The README's adapter class and the raw-llm example of docs/adapters.md, against the stub
    of ``heron stub-llm`` (on a free port), on two questions: gold's answer, then SELECT 1."""
    from pytest_heron.systems.llm.stub import serve

    code = README.split("### Adding an adapter", 1)[1].split("```python\n", 1)[1]
    (tmp_path / "mytool_adapter.py").write_text(code.split("```", 1)[0])
    with serve(port=0) as stub:
        for tool in ("mytool_adapter:MyTool", "raw-llm"):
            prefix = f"pytest --heron-adapter={tool} --heron-endpoint=http://127.0.0.1:8089"
            command = _documented(prefix).replace("http://127.0.0.1:8089/v1", stub.url)
            command += f" --heron-cache={tmp_path / 'llm'} -k 'q004 or q005' -p no:randomly"
            run = _shell(command, tmp_path)
            assert "1 failed, 1 passed, 98 deselected" in run.stdout, (
                run.stdout[-3000:] + run.stderr[-2000:]
            )
            assert "heron::q005" in run.stdout and "model=heron-stub" in run.stdout


def test_the_readme_adapter_without_an_endpoint_stops_before_the_first_question(
    tmp_path: Path,
) -> None:
    """The README's adapter declares ``needs_llm``: with no server at its endpoint (``heron
    stub-llm`` not started yet), the documented command stops with one line, no question run."""
    import socket

    code = README.split("### Adding an adapter", 1)[1].split("```python\n", 1)[1]
    (tmp_path / "mytool_adapter.py").write_text(code.split("```", 1)[0])
    with socket.socket() as probe:  # a port nothing listens on (bound, never listened, closed)
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    prefix = "pytest --heron-adapter=mytool_adapter:MyTool --heron-endpoint=http://127.0.0.1:8089"
    command = _documented(prefix).replace("http://127.0.0.1:8089/v1", closed)
    run = _shell(command + " -p no:randomly", tmp_path)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout[-3000:] + run.stderr[-2000:]
    said = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and f"--heron-endpoint {closed} cannot be reached" in said[0], said
    assert "heron::q" not in run.stdout and "passed" not in run.stdout


def test_every_test_a_page_names_exists() -> None:
    """The guarantee tables (docs/threat-model.md, docs/verification.md) name the test that
    holds each guarantee; a renamed or removed test must not leave a guarantee unheld."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = {
        (page.name, file, test)
        for page in pages
        for file, test in re.findall(r"(test_\w+\.py)::(test_\w+)", page.read_text())
    }
    assert len(named) >= 40
    missing = [
        f"{page}: {file}::{test}"
        for page, file, test in sorted(named)
        if not re.search(
            rf"^(async )?def {test}\(", (ROOT / "tests" / file).read_text(), re.MULTILINE
        )
    ]
    assert not missing, missing
