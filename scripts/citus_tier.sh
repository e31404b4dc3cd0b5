#!/usr/bin/env bash
# The Citus tier of CI: build (or reuse) Citus from a folder holding a Citus source tarball and
# cluster.sh (CI passes ../shared/citus), start a coordinator and two workers on loopback, run
# `pytest -m citus` against it, and stop the cluster whatever happens.
#
#   scripts/citus_tier.sh CITUS_DIR [PYTHON]
#
# The build (~4 min on 2 cores) is cached in
# ${XDG_CACHE_HOME:-$HOME/.cache}/pytest-heron-citus/<hash of the tarball and cluster.sh>
# (as root: /var/cache/pytest-heron-citus/<hash>; HERON_CITUS_CACHE replaces the folder), so
# later runs on the same machine only start the cluster. Its nodes' data folders live there too
# (seeded states are reused between runs). HERON_CITUS_PORT picks the coordinator's port
# (workers on the next two; default 59711). A failed build or start fails this script.
# heron's own code never reads CITUS_DIR: users bring their own Citus.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(cd "${1:?usage: scripts/citus_tier.sh CITUS_DIR [PYTHON]}" && pwd)
py=${2:-.venv/bin/python}
port=${HERON_CITUS_PORT:-59711}
key=$(cat "$src"/citus-*.tar.gz "$src/cluster.sh" | sha256sum | cut -c1-16)
base=${XDG_CACHE_HOME:-$HOME/.cache}/pytest-heron-citus
# As root the nodes run as the system user pgserver, which cannot enter root's home folder.
[[ $(id -u) == 0 ]] && base=/var/cache/pytest-heron-citus
dir=${HERON_CITUS_CACHE:-$base}/$key
mkdir -p "$dir"

if [[ ! -f $dir/built ]]; then
  echo "citus tier: building Citus into $dir (once per tarball)"
  started=$SECONDS
  if ! bash "$src/cluster.sh" build "$py" "$dir"; then
    echo "citus tier: the Citus build FAILED (see above)" >&2
    exit 1
  fi
  touch "$dir/built"
  echo "citus tier: built in $((SECONDS - started)) s"
fi

stop() { bash "$src/cluster.sh" stop "$dir" || true; }
trap stop EXIT
started=$SECONDS
dsn=$(bash "$src/cluster.sh" start "$dir" "$port" | tail -1)
# Register the workers in the coordinator's maintenance database (heron finds them there and
# prepares each state database on every node); idempotent.
"$py" - "$dsn" "$port" <<'EOF'
import sys

import psycopg
from psycopg.conninfo import make_conninfo

dsn, port = sys.argv[1], int(sys.argv[2])
for p in (port, port + 1, port + 2):
    with psycopg.connect(make_conninfo(dsn, port=str(p)), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
with psycopg.connect(dsn, autocommit=True) as conn:
    conn.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", (port,))
    known = {r[0] for r in conn.execute("SELECT nodeport FROM pg_dist_node").fetchall()}
    for p in (port + 1, port + 2):
        if p not in known:
            conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (p,))
EOF
echo "citus tier: cluster up in $((SECONDS - started)) s: $dsn"
started=$SECONDS
HERON_CITUS_DSN=$dsn "$py" -m pytest -m citus -n 0 -p no:randomly -q tests/test_citus_cluster.py
echo "citus tier: tests took $((SECONDS - started)) s"
