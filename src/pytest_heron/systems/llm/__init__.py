"""The LLM layer every LLM adapter goes through: client (:mod:`.client`), response cache
(:mod:`.cache`) and the SQL in a free-text reply (:mod:`.extract`). The stable public face is
:mod:`pytest_heron.llm`."""
