#!/usr/bin/env bash
# A throwaway Postgres cluster for the tests: Debian's postgresql, initdb in a new
# temporary directory, listening on a Unix socket there only. Prints the URL of its
# `postgres` database, then goes on in the background until process $1 (the test
# binary) exits, when it stops the cluster and removes the directory.
#
#   bash tests/servers/postgres.sh PID [postgres -c options...]
set -euo pipefail
owner=$1
shift
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$bin" ]; then
  echo "postgres.sh: Debian's postgresql is not installed (bash .ci/setup installs it)" >&2
  exit 1
fi
dir=$(mktemp -d /tmp/switchyard-pg.XXXXXX)
# initdb and postgres refuse to run as root: as root, the cluster belongs to the
# unprivileged user Debian's package made.
as=()
if [ "$(id -u)" -eq 0 ]; then
  chown postgres: "$dir"
  as=(runuser -u postgres --)
fi
"${as[@]}" "$bin/initdb" -D "$dir/data" -U switchyard --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 || {
  cat "$dir/initdb.log" >&2
  exit 1
}
options="-k $dir -c listen_addresses= -c max_connections=200"
for o in "$@"; do options="$options $o"; done
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -o "$options" -l "$dir/server.log" -w -t 60 start >/dev/null || {
  cat "$dir/server.log" >&2
  exit 1
}
echo "postgresql://switchyard@/postgres?host=$dir&port=5432"
(
  while kill -0 "$owner" 2>/dev/null; do sleep 1; done
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
) </dev/null >/dev/null 2>&1 &
