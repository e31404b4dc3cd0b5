"""The ``--heron-*`` options, their ``heron_*`` ini twins, and the one typed resolver.

Options are declared once in :data:`OPTIONS`; :func:`register` adds them to pytest and
:func:`resolve` turns a config into :class:`Settings`. The command line wins over the ini file,
which wins over the environment (only ``HERON_DSN``), which wins over the default.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_heron.core.errors import ConfigError
from pytest_heron.core.types import DEFAULT_STATEMENT_TIMEOUT_S, DEFAULT_TIMEOUT_S

SCALES = ("tiny", "small", "bench", "large")
BACKENDS = ("auto", "embedded", "docker", "dsn")
AGENT_MODES = ("tools", "grammar")
ADAPTER_NETWORKS = ("auto", "shared", "none")  # as systems.bubblewrap.NETWORKS
TASKS = ("sql", "retrieval")  # what a run scores (--heron-task)
LAYOUTS = ("standard", "citus")  # as pytest_heron.generate.citus.LAYOUTS (not imported here)


@dataclass(frozen=True)
class Option:
    name: str  # without the leading dashes, e.g. "heron-scale"
    default: Any
    help: str
    metavar: str = "VALUE"
    flag: bool = False  # a switch on the command line; "true"/"false" in the ini file
    optional_value: bool = False  # ``--x`` alone or ``--x=VALUE``; ini: true, false or VALUE

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def ini(self) -> str:
        return self.dest


OPTIONS: tuple[Option, ...] = (
    Option(
        "heron-adapter",
        None,
        "run the benchmark with this adapter: an entry-point name, "
        "module:Class, 'cli', or 'file' (with --heron-predictions) (default: off)",
        "NAME",
    ),
    Option(
        "heron-scale", "small", "data scale: tiny, small, bench or large (default: small)", "SCALE"
    ),
    Option("heron-seed", "42", "seed of the first state (default: 42)", "N"),
    Option("heron-states", "3", "number of states; seeds N, N+1, ... (default: 3)", "N"),
    Option(
        "heron-backend",
        "auto",
        "where PostgreSQL comes from: auto, embedded, docker or dsn (default: auto)",
        "KIND",
    ),
    Option(
        "heron-layout",
        "standard",
        "key layout of the states: standard, or citus (tables distributed by tenant_id on the "
        "Citus coordinator --heron-dsn points at) (default: standard)",
        "LAYOUT",
    ),
    Option(
        "heron-dsn",
        None,
        "a PostgreSQL server to use; states are databases on it (env HERON_DSN; default: none)",
        "DSN",
    ),
    Option(
        "heron-questions",
        None,
        "a folder of question files, or a sealed file (heron seal), replacing the built-in "
        "set (default: built-in)",
        "PATH",
    ),
    Option(
        "heron-sealed-key-env",
        "HERON_SEALED_KEY",
        "the environment variable holding a sealed question set's age key (default: "
        "HERON_SEALED_KEY)",
        "NAME",
    ),
    Option("heron-output", None, "write the results file (JSON) here (default: none)", "PATH"),
    Option(
        "heron-report",
        None,
        "write results.json, questions.csv and a self-contained "
        "report.html into this folder (default: none)",
        "DIR",
    ),
    Option(
        "heron-timeout",
        f"{DEFAULT_TIMEOUT_S:g}",
        f"adapter time limit per question, seconds (default: {DEFAULT_TIMEOUT_S:g})",
        "S",
    ),
    Option(
        "heron-statement-timeout",
        f"{DEFAULT_STATEMENT_TIMEOUT_S:g}",
        f"time limit per SQL statement, seconds (default: {DEFAULT_STATEMENT_TIMEOUT_S:g})",
        "S",
    ),
    Option(
        "heron-task",
        "sql",
        "what the run scores: sql (each answer's SQL, executed) or retrieval (only the tables "
        "the adapter ranks, tables_ranked: no SQL asked, no EX); an adapter may declare "
        "task = 'retrieval' (default: sql)",
        "TASK",
    ),
    Option(
        "heron-min-ex",
        None,
        "fail the session when multi-state EX is below this percentage (default: none)",
        "PCT",
    ),
    Option("heron-cli-cmd", None, "the command the 'cli' adapter runs (default: none)", "CMD"),
    Option(
        "heron-endpoint", None, "OpenAI-compatible endpoint for LLM adapters (default: none)", "URL"
    ),
    Option("heron-model", None, "model name for LLM adapters (default: none)", "M"),
    Option("heron-temperature", "0", "sampling temperature for LLM adapters (default: 0)", "T"),
    Option(
        "heron-samples",
        "1",
        "answers asked of the adapter per question; EX@k is pass@k over them (default: 1)",
        "N",
    ),
    Option(
        "heron-strategy",
        "zero-shot",
        "prompting strategy of the raw-llm adapter: zero-shot, few-shot, self-correct or "
        "few-shot+self-correct (default: zero-shot)",
        "NAME",
    ),
    Option(
        "heron-max-tokens",
        "2048",
        "most tokens an LLM adapter lets the model write per reply, sent as max_tokens; 0 sends "
        "none (default: 2048)",
        "N",
    ),
    Option(
        "heron-agent-mode",
        "tools",
        "how the agent adapter's model acts: tools (OpenAI tool calls) or grammar (each reply a "
        "JSON object constrained by response_format json_schema, for endpoints without tool "
        "calls) (default: tools)",
        "MODE",
    ),
    Option(
        "heron-cache",
        None,
        "folder of the LLM response cache (record/replay; file llm-cache.sqlite3) "
        "(default: the heron cache folder)",
        "DIR",
    ),
    Option(
        "heron-offline",
        "false",
        "LLM adapters replay from the cache only; a cache miss fails the question (default: off)",
        flag=True,
    ),
    Option(
        "heron-prices",
        None,
        "a YAML price table (USD per million tokens, per model) replacing the built-in one "
        "(default: built-in)",
        "PATH",
    ),
    Option(
        "heron-in-process",
        "false",
        "run a Python adapter inside the pytest process, in a thread, as a debugging aid: not "
        "isolated (it could reach the scorer and end the run; a hang is abandoned, not killed) "
        "(default: off)",
        flag=True,
    ),
    Option(
        "heron-adapter-python",
        None,
        "start a module:Class adapter's process with this Python (3.11+), the tool's own "
        "environment; heron's wire module is put on its path, nothing else of heron's "
        "(default: the Python running pytest)",
        "PATH",
    ),
    Option(
        "heron-adapter-network",
        "auto",
        "the sandboxed adapter's network: shared (it may call an LLM), none (a network "
        "namespace of its own, only loopback; the database is reached by its socket), or auto: "
        "none for --heron-offline runs on a socket, else shared (default: auto)",
        "MODE",
    ),
    Option(
        "heron-resume",
        "false",
        "continue an interrupted run from the journal next to "
        "--heron-output; refuses when the configuration differs (default: off)",
        flag=True,
    ),
    Option(
        "heron-predictions",
        None,
        "with --heron-adapter=file: a JSON-lines file of predictions, one "
        '{"id": ..., "sql": ...} per question (default: none)',
        "FILE",
    ),
    Option(
        "heron-save",
        None,
        "keep this run's results under .heron/runs/ in the rootdir, stamped with the machine "
        "and git commit, as NNNN_NAME.json (NAME: adapter and commit) (default: off)",
        "NAME",
        optional_value=True,
    ),
    Option(
        "heron-compare",
        None,
        "at the end, compare this run question by question with a saved run: its number "
        "(1 is 0001; `heron runs` lists them), its name, or a results file (alone: the newest "
        "saved run) (default: off)",
        "RUN",
        optional_value=True,
    ),
    Option(
        "heron-compare-fail",
        None,
        "fail the session when a metric falls by more than POINTS against --heron-compare's "
        "run: KEY:POINTS[,...], KEY one of ex, ex1, soft_f1, superset, ves, grade; implies "
        "--heron-compare (default: none)",
        "KEY:POINTS",
    ),
    Option(
        "heron-protocol",
        None,
        "a board protocol file (board/protocol.yaml): the run refuses to start when its scale, "
        "seeds, states, model, temperature or samples differ, and records the protocol "
        "(default: none)",
        "PATH",
    ),
    Option(
        "heron-variants",
        None,
        "ask N audited variants per parameterised question drawn at variant seed SEED instead "
        "of the public questions (N: 1 to 100) (default: off)",
        "SEED[:N]",
    ),
)


OPTIONAL_ALONE = "\x00alone"  # what ``--heron-save`` without a value stores


@dataclass(frozen=True)
class Settings:
    """Every benchmark option, resolved and typed."""

    adapter: str | None
    scale: str = "small"
    seed: int = 42
    states: int = 3
    backend: str = "auto"
    dsn: str | None = None
    layout: str = "standard"
    task: str = "sql"
    questions: Path | None = None
    output: Path | None = None
    report: Path | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT_S
    min_ex: float | None = None
    cli_cmd: str | None = None
    endpoint: str | None = None
    model: str | None = None
    temperature: float = 0.0
    samples: int = 1
    strategy: str = "zero-shot"
    max_tokens: int | None = 2048
    agent_mode: str = "tools"
    cache: Path | None = None
    offline: bool = False
    prices: Path | None = None
    resume: bool = False
    in_process: bool = False
    adapter_network: str = "auto"
    adapter_python: Path | None = None
    protocol: Path | None = None
    predictions: Path | None = None
    save: str | None = None  # None: off; "": a name from the adapter and the commit
    compare: str | None = None  # None: off; "": the newest saved run
    compare_fail: tuple[tuple[str, float], ...] = ()
    variants: tuple[int, int] | None = None  # (variant seed, variants per question)
    sealed_key_env: str = "HERON_SEALED_KEY"  # where a sealed question set's key is read

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(range(self.seed, self.seed + self.states))

    @property
    def gated(self) -> bool:
        """A gate decides the exit status (``--heron-min-ex``, ``--heron-compare-fail``): wrong
        answers are then expected failures (xfail), not failed tests."""
        return self.min_ex is not None or bool(self.compare_fail)


def register(parser: Any) -> None:
    """Add the option group and the ini twins to a pytest parser."""
    group = parser.getgroup("heron", "pytest-heron text-to-SQL benchmark")
    for opt in OPTIONS:
        if opt.optional_value:
            group.addoption(
                f"--{opt.name}",
                dest=opt.dest,
                nargs="?",
                const=OPTIONAL_ALONE,
                default=None,
                metavar=opt.metavar,
                help=opt.help,
            )
        elif opt.flag:
            group.addoption(
                f"--{opt.name}",
                dest=opt.dest,
                action="store_const",
                const="true",
                default=None,
                help=opt.help,
            )
        else:
            group.addoption(
                f"--{opt.name}", dest=opt.dest, default=None, metavar=opt.metavar, help=opt.help
            )
        parser.addini(opt.ini, help=opt.help, default=None)


def _raw(getoption: Callable[[str], Any], getini: Callable[[str], Any], opt: Option) -> Any:
    value = getoption(opt.dest)
    if value is None:
        value = getini(opt.ini)
    if value in (None, "", []) and opt.name == "heron-dsn":
        value = os.environ.get("HERON_DSN") or None
    if value in (None, "", []):
        value = opt.default
    return value


def _number(name: str, value: Any, kind: type, *, minimum: float | None = None) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"--{name}: expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ConfigError(f"--{name}: expected a finite number, got {value!r}")
    if minimum is not None and number < minimum:
        raise ConfigError(f"--{name}: must be at least {minimum}, got {value!r}")
    return number


def strategies() -> tuple[str, ...]:
    """The raw LLM adapter's prompting strategies (imported when a run's settings are resolved,
    so that loading the plugin does not load the adapter)."""
    from pytest_heron.systems import STRATEGIES

    return STRATEGIES


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"--{name}: expected one of {', '.join(choices)}; got {value!r}")
    return str(value)


def resolve(getoption: Callable[[str], Any], getini: Callable[[str], Any]) -> Settings:
    """Build :class:`Settings` from pytest's ``config.getoption`` and ``config.getini``."""
    raw = {opt.name: _raw(getoption, getini, opt) for opt in OPTIONS}
    questions = raw["heron-questions"]
    output = raw["heron-output"]
    min_ex = raw["heron-min-ex"]
    dsn = raw["heron-dsn"]
    backend = _choice("heron-backend", raw["heron-backend"], BACKENDS)
    if _flag("heron-resume", raw["heron-resume"]) and not output:
        raise ConfigError("--heron-resume needs --heron-output (the journal lives beside it)")
    save = _optional_value("heron-save", raw["heron-save"])
    if save:
        from pytest_heron.results import check_name

        check_name(save)
    compare = _optional_value("heron-compare", raw["heron-compare"], numbered=True)
    compare_fail: tuple[tuple[str, float], ...] = ()
    if raw["heron-compare-fail"]:
        from pytest_heron.results import parse_fail

        compare_fail = tuple(parse_fail(str(raw["heron-compare-fail"])).items())
        if compare is None:
            compare = ""  # the newest saved run
    predictions = raw["heron-predictions"]
    if raw["heron-adapter"] == "file" and not predictions:
        raise ConfigError(
            "--heron-adapter=file needs --heron-predictions=FILE.jsonl (one "
            '{"id": ..., "sql": ...} per line)'
        )
    if predictions and raw["heron-adapter"] != "file":
        raise ConfigError("--heron-predictions is read only with --heron-adapter=file")
    variants = None
    if raw["heron-variants"] not in (None, ""):
        from pytest_heron.audit import parse_spec

        variants = parse_spec(str(raw["heron-variants"]))
        from pytest_heron.dataset import is_sealed

        if questions and is_sealed(Path(questions)):  # a variant would show its parent
            raise ConfigError("--heron-variants draws from public questions, not a sealed set")
    if raw["heron-adapter"] == "cli" and not raw["heron-cli-cmd"]:
        raise ConfigError(
            "--heron-adapter=cli needs the command to run: add --heron-cli-cmd='mytool --json' "
            "(it gets each question as JSON on stdin and prints SQL)"
        )
    layout = _choice("heron-layout", raw["heron-layout"], LAYOUTS)
    if layout == "citus" and not dsn:
        raise ConfigError(
            "--heron-layout=citus needs --heron-dsn (or HERON_DSN): the Citus coordinator"
        )
    if backend == "dsn" and not dsn:
        raise ConfigError("--heron-backend=dsn needs --heron-dsn or the HERON_DSN variable")
    task = _choice("heron-task", raw["heron-task"], TASKS)
    if task == "retrieval" and (min_ex is not None or compare_fail):
        raise ConfigError(
            "--heron-task=retrieval scores no SQL, so it has no EX to gate on: leave out "
            "--heron-min-ex and --heron-compare-fail"
        )
    return Settings(
        adapter=raw["heron-adapter"],
        scale=_choice("heron-scale", raw["heron-scale"], SCALES),
        seed=_number("heron-seed", raw["heron-seed"], int, minimum=0),
        states=_number("heron-states", raw["heron-states"], int, minimum=1),
        backend=backend,
        dsn=dsn,
        layout=layout,
        task=task,
        questions=_absolute(questions),
        output=_absolute(output),
        report=_absolute(raw["heron-report"]),
        timeout=_number("heron-timeout", raw["heron-timeout"], float, minimum=0.001),
        statement_timeout=_number(
            "heron-statement-timeout", raw["heron-statement-timeout"], float, minimum=0.001
        ),
        min_ex=None if min_ex is None else _number("heron-min-ex", min_ex, float, minimum=0),
        cli_cmd=raw["heron-cli-cmd"],
        endpoint=raw["heron-endpoint"],
        model=raw["heron-model"],
        temperature=_number("heron-temperature", raw["heron-temperature"], float, minimum=0),
        samples=_number("heron-samples", raw["heron-samples"], int, minimum=1),
        strategy=_choice("heron-strategy", raw["heron-strategy"], strategies()),
        max_tokens=_number("heron-max-tokens", raw["heron-max-tokens"], int, minimum=0) or None,
        agent_mode=_choice("heron-agent-mode", raw["heron-agent-mode"], AGENT_MODES),
        cache=_absolute(raw["heron-cache"]),
        offline=_flag("heron-offline", raw["heron-offline"]),
        prices=_absolute(raw["heron-prices"]),
        resume=_flag("heron-resume", raw["heron-resume"]),
        in_process=_flag("heron-in-process", raw["heron-in-process"]),
        adapter_python=_absolute(raw["heron-adapter-python"]),
        adapter_network=_choice(
            "heron-adapter-network", raw["heron-adapter-network"], ADAPTER_NETWORKS
        ),
        protocol=_absolute(raw["heron-protocol"]),
        predictions=_absolute(predictions),
        save=save,
        compare=compare,
        compare_fail=compare_fail,
        variants=variants,
        sealed_key_env=str(raw["heron-sealed-key-env"] or "HERON_SEALED_KEY"),
    )


def _flag(name: str, value: Any) -> bool:
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"--{name}: expected true or false, got {value!r}")


def _optional_value(name: str, value: Any, *, numbered: bool = False) -> str | None:
    """An option that may be given alone or with a value: None when off, "" when alone (or
    true in the ini file), else the value. With ``numbered`` (``--heron-compare``, whose value
    may be a saved run's number), a number from 1 up is that number, never "on": ``=1`` is run
    0001, as ``=3`` is run 0003.

    >>> _optional_value("x", "1"), _optional_value("x", "1", numbered=True)
    ('', '1')
    >>> _optional_value("x", "0", numbered=True), _optional_value("x", "on", numbered=True)
    (None, '')
    """
    if value is None or value is False:
        return None
    text = str(value).strip()
    if numbered and text.isdigit() and int(text) > 0:
        return text
    if value == OPTIONAL_ALONE or text.lower() in ("1", "true", "yes", "on"):
        return ""
    if text.lower() in ("", "0", "false", "no", "off"):
        return None
    return text


def _absolute(value: Any) -> Path | None:
    """An option's path made absolute once, when the options are read: an adapter that changes
    the working directory later cannot move where results go."""
    return Path(value).expanduser().absolute() if value else None
