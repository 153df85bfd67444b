#!/usr/bin/env bash
# Run a command with DATABASE_URL pointing at a PostgreSQL server.
# DATABASE_URL already set: use it. Otherwise start a throwaway cluster from the installed server
# binaries on a free loopback port (installing the server package when missing), run the command,
# then stop the cluster by its PID and remove it.
set -euo pipefail

if [ -n "${DATABASE_URL:-}" ]; then
  exec "$@"
fi

find_bindir() {
  local d
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
    pg_config --bindir; return
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  done
  command -v initdb >/dev/null 2>&1 && dirname "$(readlink -f "$(command -v initdb)")"
}

bindir=$(find_bindir || true)
if [ -z "$bindir" ]; then
  echo "with_postgres: PostgreSQL server binaries not found; installing the postgresql package" >&2
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq postgresql >/dev/null
  bindir=$(find_bindir)
fi

# initdb refuses to run as root: run the cluster as the postgres account then.
as_pg=()
if [ "$(id -u)" -eq 0 ]; then as_pg=(runuser -u postgres --); fi

tmp=$(mktemp -d /tmp/mqcloud-pg.XXXXXX)
chmod 755 "$tmp"
[ "$(id -u)" -eq 0 ] && chown postgres "$tmp"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')

cleanup() {
  if [ -f "$tmp/data/postmaster.pid" ]; then
    pid=$(head -1 "$tmp/data/postmaster.pid")
    kill -INT "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

"${as_pg[@]}" "$bindir/initdb" -D "$tmp/data" -U postgres -A trust -E UTF8 --no-sync >"$tmp/initdb.log" 2>&1 \
  || { cat "$tmp/initdb.log" >&2; exit 1; }
# fsync off: a throwaway test cluster trades durability for speed.
"${as_pg[@]}" "$bindir/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w -t 60 \
  -o "-p $port -k $tmp -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
  start >/dev/null || { cat "$tmp/server.log" >&2; exit 1; }

export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
echo "with_postgres: throwaway PostgreSQL on 127.0.0.1:$port ($bindir)" >&2
set +e
"$@"
rc=$?
set -e
exit $rc
