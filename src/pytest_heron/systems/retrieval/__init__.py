"""Table rankers for choosing a question's context: :mod:`.rankers` (BM25 and embedding
baselines), :mod:`.minilm` (the embedding model, in numpy). The stable public face is
:mod:`pytest_heron.retrieval`."""
