#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the tests: initdb into a temporary directory, trust
# authentication for local connections only, listening on 127.0.0.1:PORT (default 15432) and no
# Unix socket elsewhere than the cluster's own directory. Prints the URL the tests read from
# FLOWSCALE_POSTGRES_URL on its last line.
#
#   .ci/postgres.sh start [PORT]   -> prints postgres://flowscale@127.0.0.1:PORT/flowscale
#   .ci/postgres.sh stop DIR       -> stops the cluster in DIR (the first line start printed)
#
# initdb refuses to run as root: as root, the cluster belongs to the `postgres` user that
# Debian's package creates (or `nobody` without it).
set -euo pipefail

fail() {
    echo "error: $*" >&2
    exit 1
}

bin_dir() {
    local dir
    for dir in /usr/lib/postgresql/*/bin; do
        [[ -x "$dir/initdb" ]] && { echo "$dir"; return 0; }
    done
    command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return 0; }
    fail "PostgreSQL's initdb is not installed (Debian: apt-get install postgresql)"
}

# Runs a command as the cluster's owner.
as_owner() {
    if [[ "$(id -u)" -eq 0 ]]; then
        runuser -u "$owner" -- "$@"
    else
        "$@"
    fi
}

owner=$(id -un)
if [[ "$(id -u)" -eq 0 ]]; then
    owner=postgres
    id -u postgres >/dev/null 2>&1 || owner=nobody
fi

case "${1:-}" in
start)
    port=${2:-15432}
    bin=$(bin_dir)
    dir=$(mktemp -d /tmp/flowscale-pg.XXXXXX)
    chmod 755 "$dir"
    [[ "$(id -u)" -eq 0 ]] && chown "$owner" "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U flowscale --auth=trust --no-sync -E UTF8 \
        >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; fail "initdb failed"; }
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" \
        start >/dev/null || { cat "$dir/server.log" >&2; fail "PostgreSQL did not start"; }
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U flowscale flowscale ||
        fail "cannot create the database"
    echo "$dir"
    echo "postgres://flowscale@127.0.0.1:$port/flowscale"
    ;;
stop)
    dir=${2:?the directory start printed}
    bin=$(bin_dir)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
*)
    fail "usage: $0 start [PORT] | stop DIR"
    ;;
esac
