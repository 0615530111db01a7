#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the tests: initdb into a temporary directory, trust
# authentication for local connections only, listening on 127.0.0.1:PORT (default 15432) and no
# Unix socket elsewhere than the cluster's own directory. Prints the URL the tests read from
# FLOWSCALE_POSTGRES_URL on its last line.
#
#   .ci/postgres.sh start [PORT]   -> prints postgres://flowscale@127.0.0.1:PORT/flowscale
#   .ci/postgres.sh start-tls PORT TLS_DIR
#                                  -> the same with TLS on: TLS_DIR holds server.pem, server.key,
#                                     ca.pem and password (made by the test, e.g. from a TestCa).
#                                     TCP accepts TLS only, with the role's password (SCRAM) and a
#                                     client certificate from ca.pem; the cluster's Unix socket
#                                     (in DIR) trusts local connections, for the test's own setup
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

# A new directory for a cluster, the owner's: sets $dir and $bin.
new_dir() {
    bin=$(bin_dir)
    dir=$(mktemp -d /tmp/flowscale-pg.XXXXXX)
    chmod 755 "$dir"
    [[ "$(id -u)" -eq 0 ]] && chown "$owner" "$dir"
    return 0
}

# Makes the cluster of $dir: `init PORT [INITDB_ARGS...]`.
init() {
    port=$1
    shift
    as_owner "$bin/initdb" -D "$dir/data" -U flowscale --no-sync -E UTF8 "$@" \
        >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; fail "initdb failed"; }
}

# Starts the cluster of $dir on $port with the extra server options "$1", creates the database.
run() {
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200 $1" \
        start >/dev/null || { cat "$dir/server.log" >&2; fail "PostgreSQL did not start"; }
    as_owner "$bin/createdb" -h "$dir" -p "$port" -U flowscale flowscale ||
        fail "cannot create the database"
    echo "$dir"
    echo "postgres://flowscale@127.0.0.1:$port/flowscale"
}

case "${1:-}" in
start)
    new_dir
    init "${2:-15432}" --auth=trust
    run ""
    ;;
start-tls)
    src=${3:?a directory with server.pem, server.key, ca.pem and password}
    for f in server.pem server.key ca.pem password; do
        [[ -f "$src/$f" ]] || fail "$src/$f is missing"
    done
    new_dir
    mkdir "$dir/tls"
    cp "$src"/server.pem "$src"/server.key "$src"/ca.pem "$src"/password "$dir/tls/"
    # The server refuses a key that others than its owner may read.
    chmod 700 "$dir/tls"
    chmod 600 "$dir"/tls/*
    [[ "$(id -u)" -eq 0 ]] && chown -R "$owner" "$dir/tls"
    init "${2:?a port}" --auth-local=trust --auth-host=scram-sha-256 --pwfile="$dir/tls/password"
    rm -f "$dir/tls/password"
    printf '%s\n' "local   all all              trust" \
        "hostssl all all 127.0.0.1/32 scram-sha-256 clientcert=verify-ca" >"$dir/data/pg_hba.conf"
    run "-c ssl=on -c ssl_cert_file=$dir/tls/server.pem -c ssl_key_file=$dir/tls/server.key -c ssl_ca_file=$dir/tls/ca.pem"
    ;;
stop)
    dir=${2:?the directory start printed}
    bin=$(bin_dir)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
*)
    fail "usage: $0 start [PORT] | start-tls PORT TLS_DIR | stop DIR"
    ;;
esac
