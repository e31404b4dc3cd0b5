"""Adapters for the field's text-to-SQL tools and published methods.

One module each, registered by entry point (``pyproject.toml``, group ``pytest_heron.adapters``):

- ``vanna`` (:mod:`.vanna_adapter`): the ``vanna`` package's retrieval-augmented SQL generator;
- ``langchain`` (:mod:`.langchain_adapter`): LangChain's SQL query chain over the read-only DSN;
- ``promptquery`` (:mod:`.promptquery_adapter`): the ``promptquery`` CLI in one-shot mode;
- ``din-sql`` (:mod:`.din_sql`) and ``mac-sql`` (:mod:`.mac_sql`): the published multi-stage
  methods, written from the papers over :mod:`pytest_heron.llm`.

The third-party tools are optional extras; importing this package imports none of them, and a
missing extra fails at ``prepare`` with the pip command to run (:func:`.schema_text.require`).
"""
