"""Stage 3: the systems under test (adapters).

- :mod:`.registry`: ``--heron-adapter NAME`` to an adapter; what ``generate`` returns to a
  :class:`~pytest_heron.core.types.Prediction`.
- :mod:`.isolation`: how the harness asks an adapter (``gold`` by the harness itself, Python
  adapters in a process of their own, :mod:`.child`; hook adapters and
  ``--heron-in-process`` in a thread).
- :mod:`.builtin`: ``gold`` and ``cli``; :mod:`.raw_llm` and :mod:`.agent`: the built-in LLM
  adapters; :mod:`.base`: what the LLM adapters share.
- :mod:`.llm`: the OpenAI-compatible client, its response cache and SQL extraction.
- :mod:`.retrieval`: table rankers adapters may use to choose their context.
- :mod:`.tools`: adapters for the field's tools and published methods.
"""
