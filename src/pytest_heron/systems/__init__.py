"""Stage 3: the systems under test (adapters).

- :mod:`.registry`: ``--heron-adapter NAME`` to an adapter; what ``generate`` returns to a
  :class:`~pytest_heron.core.types.Prediction`.
- :mod:`.answerers`: how the harness asks an adapter (``gold`` by the harness itself, Python
  adapters in a process of their own, :mod:`.child`; hook adapters and
  ``--heron-in-process`` in a thread).
- :mod:`.builtin`: ``gold`` and ``cli``; :mod:`.raw_llm` and :mod:`.agent`: the built-in LLM
  adapters; :mod:`.base`: what the LLM adapters share.
- :mod:`.llm`: the OpenAI-compatible client, its response cache and SQL extraction.
- :mod:`.retrieval`: table rankers adapters may use to choose their context.
- :mod:`.tools`: adapters for the field's tools and published methods.
- :mod:`.convert`: BIRD's and Spider's prediction files as heron's (``heron convert``).
"""

from typing import TYPE_CHECKING

from pytest_heron.core.door import opener

# The door: what other stages may import from this one, each name loaded on first use
# (tests/test_layers.py holds every other stage to these names).
if TYPE_CHECKING:
    from pytest_heron.systems.agent import AGENT_SYSTEM as AGENT_SYSTEM
    from pytest_heron.systems.agent import CELL_CHARS as CELL_CHARS
    from pytest_heron.systems.agent import MAX_AGENT_CALLS as MAX_AGENT_CALLS
    from pytest_heron.systems.agent import NOTHING_RAN as NOTHING_RAN
    from pytest_heron.systems.agent import NUDGE as NUDGE
    from pytest_heron.systems.agent import PREVIEW_ROWS as PREVIEW_ROWS
    from pytest_heron.systems.agent import TOOLS as TOOLS
    from pytest_heron.systems.agent import AgentAdapter as AgentAdapter
    from pytest_heron.systems.agent import catalogue as catalogue
    from pytest_heron.systems.answerers import FileSystem as FileSystem
    from pytest_heron.systems.answerers import System as System
    from pytest_heron.systems.answerers import open_system as open_system
    from pytest_heron.systems.convert import FORMATS as FORMATS
    from pytest_heron.systems.convert import convert_command as convert_command
    from pytest_heron.systems.llm.cache import CACHE_FILE as CACHE_FILE
    from pytest_heron.systems.llm.cache import ResponseCache as ResponseCache
    from pytest_heron.systems.llm.cache import default_cache_path as default_cache_path
    from pytest_heron.systems.llm.cache import endpoint_id as endpoint_id
    from pytest_heron.systems.llm.client import DEFAULT_MAX_TOKENS as DEFAULT_MAX_TOKENS
    from pytest_heron.systems.llm.client import api_key as api_key
    from pytest_heron.systems.llm.stub import STUB_MODEL as STUB_MODEL
    from pytest_heron.systems.llm.stub import serve as serve
    from pytest_heron.systems.predictions import load_predictions as load_predictions
    from pytest_heron.systems.predictions import missing_for as missing_for
    from pytest_heron.systems.preflight import NEEDS as NEEDS
    from pytest_heron.systems.preflight import asks_a_model as asks_a_model
    from pytest_heron.systems.preflight import check_declared as check_declared
    from pytest_heron.systems.preflight import check_endpoint as check_endpoint
    from pytest_heron.systems.preflight import check_extras as check_extras
    from pytest_heron.systems.preflight import check_options as check_options
    from pytest_heron.systems.raw_llm import STRATEGIES as STRATEGIES
    from pytest_heron.systems.registry import known_adapters as known_adapters
    from pytest_heron.systems.registry import reported_tables as reported_tables
    from pytest_heron.systems.registry import to_prediction as to_prediction
    from pytest_heron.systems.retrieval.rankers import EmbeddingRanker as EmbeddingRanker
    from pytest_heron.systems.retrieval.rankers import Ranker as Ranker
    from pytest_heron.systems.retrieval.rankers import build_ranker as build_ranker
    from pytest_heron.systems.retrieval.rankers import ranker as ranker
    from pytest_heron.systems.retrieval.rankers import table_docs as table_docs

_DOOR = {
    "FORMATS": "convert",
    "convert_command": "convert",
    "AGENT_SYSTEM": "agent",
    "AgentAdapter": "agent",
    "CACHE_FILE": "llm.cache",
    "CELL_CHARS": "agent",
    "DEFAULT_MAX_TOKENS": "llm.client",
    "EmbeddingRanker": "retrieval.rankers",
    "FileSystem": "answerers",
    "MAX_AGENT_CALLS": "agent",
    "NEEDS": "preflight",
    "NOTHING_RAN": "agent",
    "NUDGE": "agent",
    "PREVIEW_ROWS": "agent",
    "Ranker": "retrieval.rankers",
    "ResponseCache": "llm.cache",
    "STRATEGIES": "raw_llm",
    "STUB_MODEL": "llm.stub",
    "System": "answerers",
    "TOOLS": "agent",
    "api_key": "llm.client",
    "asks_a_model": "preflight",
    "build_ranker": "retrieval.rankers",
    "catalogue": "agent",
    "check_declared": "preflight",
    "check_endpoint": "preflight",
    "check_extras": "preflight",
    "check_options": "preflight",
    "default_cache_path": "llm.cache",
    "endpoint_id": "llm.cache",
    "known_adapters": "registry",
    "load_predictions": "predictions",
    "missing_for": "predictions",
    "open_system": "answerers",
    "ranker": "retrieval.rankers",
    "serve": "llm.stub",
    "table_docs": "retrieval.rankers",
    "reported_tables": "registry",
    "to_prediction": "registry",
}
__getattr__ = opener(globals(), _DOOR)
