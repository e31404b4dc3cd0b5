"""The LLM layer for adapter authors (public API, stable): a re-export of
:mod:`pytest_heron.llm` (client, cache, meter, :func:`extract_sql`) and of
:class:`~pytest_heron.systems.base.MeteredAdapter`. See the client module for the whole story.
"""

from __future__ import annotations

from pytest_heron.systems.base import MeteredAdapter as MeteredAdapter
from pytest_heron.systems.base import time_limits as time_limits
from pytest_heron.systems.llm.client import KEY_FORMAT as KEY_FORMAT
from pytest_heron.systems.llm.client import PLACEHOLDER_KEY as PLACEHOLDER_KEY
from pytest_heron.systems.llm.client import CacheMiss as CacheMiss
from pytest_heron.systems.llm.client import ChatClient as ChatClient
from pytest_heron.systems.llm.client import ChatReply as ChatReply
from pytest_heron.systems.llm.client import LLMConfig as LLMConfig
from pytest_heron.systems.llm.client import LLMError as LLMError
from pytest_heron.systems.llm.client import Meter as Meter
from pytest_heron.systems.llm.client import ResponseCache as ResponseCache
from pytest_heron.systems.llm.client import ToolCall as ToolCall
from pytest_heron.systems.llm.client import ToolsUnsupported as ToolsUnsupported
from pytest_heron.systems.llm.client import api_key as api_key
from pytest_heron.systems.llm.client import attach_usage as attach_usage
from pytest_heron.systems.llm.client import cache_key as cache_key
from pytest_heron.systems.llm.client import canonical_json as canonical_json
from pytest_heron.systems.llm.client import client_for as client_for
from pytest_heron.systems.llm.client import deadline_after as deadline_after
from pytest_heron.systems.llm.client import default_cache_path as default_cache_path
from pytest_heron.systems.llm.client import extract_sql as extract_sql
