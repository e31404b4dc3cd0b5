"""What a run ran on: the :class:`Conditions` record.

Built once by the run (:mod:`pytest_heron.run.controller`) after the states exist, sent to xdist
workers, written at the top of the results file and printed as the summary's first line. The fields
marked ``identity`` are what must be equal for a journal to be resumed (:meth:`fingerprint`);
the others describe the machine and the moment.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from pytest_heron.core.errors import ResultsFileError
from pytest_heron.core.records import JSON, RecordReader

_IDENTITY = {"identity": True}


@dataclass(frozen=True)
class Conditions:
    """The conditions of one run. ``adapter_conditions`` is what the adapter says about itself
    (for example the raw-llm adapter's ``strategy``): the harness records it without knowing
    any adapter by name."""

    adapter: str = field(metadata=_IDENTITY)
    adapter_version: str | None = field(default=None, metadata=_IDENTITY)
    scale: str = field(default="small", metadata=_IDENTITY)
    seeds: tuple[int, ...] = field(default=(), metadata=_IDENTITY)
    states: int = 1
    model: str | None = field(default=None, metadata=_IDENTITY)
    temperature: float = field(default=0.0, metadata=_IDENTITY)
    samples: int = field(default=1, metadata=_IDENTITY)
    # where the model was asked (scheme, host, port, path; no credentials): not identity, so a
    # run recorded online resumes offline; None offline without --heron-endpoint
    endpoint: str | None = None
    max_tokens: int | None = None  # sent with each LLM request (--heron-max-tokens); None: none
    adapter_conditions: dict[str, str | int | float | bool | None] = field(
        default_factory=dict, metadata=_IDENTITY
    )
    price: dict[str, Any] | None = None
    n_questions: int | None = None
    tables: int | None = None
    schemas: int | None = None
    rows: int | None = None
    backend: str | None = None
    # the states' key layout (--heron-layout) and, for citus, the cluster's primary nodes
    layout: str = field(default="standard", metadata=_IDENTITY)
    nodes: int | None = None
    postgres_version: str | None = None
    heron_version: str | None = field(default=None, metadata=_IDENTITY)
    data_version: str | None = field(default=None, metadata=_IDENTITY)
    questions_digest: str | None = field(default=None, metadata=_IDENTITY)
    sqlglot_version: str | None = None
    psycopg_version: str | None = None
    started_at: str | None = None
    machine: str | None = None
    protocol: str | None = None  # the board protocol the run claims (--heron-protocol): name
    protocol_digest: str | None = None  # ... and 16 hex of SHA-256 over its file
    # how the adapter was kept from the harness's files: "namespace" (a bubblewrap sandbox:
    # user, PID and mount namespaces, an allow-list), "user" (the fallback jail: its own OS user
    # and mount namespace), "none" (the harness's user), "not-needed" (gold, file); None: not
    # recorded. adapter_sandbox names the mechanism ("bubblewrap 0.8.0, network shared").
    adapter_isolation: str | None = None
    adapter_sandbox: str | None = None
    # --heron-variants: {"seed": S, "count": N} when the run asked variants, not the public set
    variants: dict[str, int] | None = field(default=None, metadata=_IDENTITY)
    # the size of the question set when the run answered fewer (-k, -m, --lf): such a run's
    # figures are not comparable with a full run's; None for a full run
    subset_of: int | None = None
    # the adapter's own ``name`` attribute beside ``adapter``, the spec it was asked for
    # (``mytool_adapter:MyTool``), so two adapters of one file read apart; None when it has none
    # or in results written before it was recorded
    adapter_name: str | None = None
    # what the run scored: "sql" (the answers' SQL, executed) or "retrieval" (only the ranked
    # tables: --heron-task=retrieval, or an adapter that declares task = "retrieval")
    task: str = field(default="sql", metadata=_IDENTITY)

    @property
    def subset_note(self) -> str | None:
        """``subset: n of N, not comparable`` for a run that answered part of its question set."""
        if self.subset_of is None or self.n_questions is None:
            return None
        return f"subset: {self.n_questions} of {self.subset_of}, not comparable"

    def fingerprint(self) -> dict[str, JSON]:
        """What must be equal for a journal to be resumed. The adapter's own conditions are
        flattened in (``strategy`` and so on) and the question digest is named ``questions``,
        so journals written before these records existed compare the same way."""
        out: dict[str, JSON] = {}
        for f in dataclasses.fields(self):
            if not f.metadata.get("identity"):
                continue
            value = self.to_json()[f.name]
            if f.name == "variants" and value is None:
                continue  # journals written before variants existed still resume
            if f.name == "layout" and value == "standard":
                continue  # journals written before layouts existed resume as they did
            if f.name == "task" and value == "sql":
                continue  # likewise journals written before retrieval runs
            if f.name == "adapter_conditions":
                out.update(value)
            elif f.name == "questions_digest":
                out["questions"] = value
            else:
                out[f.name] = value
        return out

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_json(cls, data: Any, where: str = "conditions") -> Conditions:
        """Read conditions back, checking every field's type (the results file may come from
        elsewhere). Unknown keys are ignored: a newer heron may record more."""
        r = RecordReader(data, where)
        price = r.data.get("price")
        if price is not None and not isinstance(price, dict):
            raise r.bad("price", "an object or null")
        temperature = r.opt_number("temperature")
        return cls(
            adapter=r.text("adapter"),
            adapter_version=r.opt_text("adapter_version"),
            scale=r.text("scale"),
            seeds=r.integers("seeds"),
            states=r.integer("states", 1, low=1),
            model=r.opt_text("model"),
            temperature=0.0 if temperature is None else temperature,
            samples=r.integer("samples", 1, low=1),
            endpoint=r.opt_text("endpoint"),
            max_tokens=r.opt_integer("max_tokens"),
            adapter_conditions=r.scalars("adapter_conditions"),
            price=price,
            n_questions=r.opt_integer("n_questions"),
            tables=r.opt_integer("tables"),
            schemas=r.opt_integer("schemas"),
            rows=r.opt_integer("rows"),
            backend=r.opt_text("backend"),
            layout=r.opt_text("layout") or "standard",
            nodes=r.opt_integer("nodes"),
            postgres_version=r.opt_text("postgres_version"),
            heron_version=r.opt_text("heron_version"),
            data_version=r.opt_text("data_version"),
            questions_digest=r.opt_text("questions_digest"),
            sqlglot_version=r.opt_text("sqlglot_version"),
            psycopg_version=r.opt_text("psycopg_version"),
            started_at=r.opt_text("started_at"),
            machine=r.opt_text("machine"),
            protocol=r.opt_text("protocol"),
            protocol_digest=r.opt_text("protocol_digest"),
            adapter_isolation=r.opt_text("adapter_isolation"),
            adapter_sandbox=r.opt_text("adapter_sandbox"),
            variants=_variants(r.data.get("variants"), where),
            subset_of=r.opt_integer("subset_of"),
            adapter_name=r.opt_text("adapter_name"),
            task=r.opt_text("task") or "sql",
        )


def _variants(raw: Any, where: str) -> dict[str, int] | None:
    """The ``variants`` record: null or {"seed": int >= 0, "count": int >= 1}."""
    if raw is None:
        return None
    if (
        not isinstance(raw, dict)
        or sorted(raw) != ["count", "seed"]
        or not all(isinstance(raw[k], int) and not isinstance(raw[k], bool) for k in raw)
        or raw["seed"] < 0
        or raw["count"] < 1
    ):
        raise ResultsFileError(
            f'{where}: variants must be null or {{"seed": S, "count": N}} (integers)'
        )
    return {"seed": raw["seed"], "count": raw["count"]}
