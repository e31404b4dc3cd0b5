"""Stage 6: one question scored (:mod:`.score`, its record :mod:`.outcome`), metrics over all
outcomes (:mod:`.metrics`), Set-Recall@k of the retrieval baselines (:mod:`.recall`), and
list prices (:mod:`.pricing`)."""
