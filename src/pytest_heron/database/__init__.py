"""Stage 1: a PostgreSQL 16 server and the seeded states the benchmark runs on.

- :mod:`.server`: where the server comes from (embedded, Docker, any DSN).
- :mod:`.states`: one database per ``(scale, seed)``, built once, stamped and reused.
- :mod:`.checksum`: per-table checksums of a state (what ``heron checksum`` prints).
- :mod:`.introspect`: what the live catalogue says (foreign keys).
"""
