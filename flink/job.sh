#!/usr/bin/env bash
# Builds and submits the synthetic load job (flink/job/src) used to exercise flowscale.
#
#   flink/job.sh build                  compile the job into the cache, print the jar's path
#   flink/job.sh submit URL [ARGS...]   build if needed, upload the jar to the cluster at URL
#                                       (POST /jars/upload), run it (POST /jars/:id/run) and print
#                                       the job id; ARGS go to the job (--rate, --cost-ms,
#                                       --parallelism, --max-parallelism, --keys,
#                                       --keyed-cost-ms, --hot-key-groups,
#                                       --hot-share)
#
# With FLOWSCALE_FLINK_REST_SSL (see cluster.sh), curl presents that folder's client certificate.
#
# The jar is built with javac against flink-dist (nothing else is needed) into
# ${FLOWSCALE_CACHE:-$HOME/.cache/flowscale}/flink-2.3.0/job and rebuilt when a source is newer.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
entry_class=flowscale.testjob.LoadJob
curl_tls=()
if [[ -n "${FLOWSCALE_FLINK_REST_SSL:-}" ]]; then
    ssl="$FLOWSCALE_FLINK_REST_SSL"
    curl_tls=(--cacert "$ssl/ca.pem" --cert "$ssl/client.pem" --key "$ssl/client.key")
fi

build() {
    local flink_home out_dir jar src
    flink_home=$("$here/setup.sh" | tail -n 1)
    out_dir="$flink_home/job"
    jar="$out_dir/flowscale-load.jar"
    src="$here/job/src"
    if [[ -f "$jar" ]] && [[ -z "$(find "$src" -newer "$jar" -name '*.java' -print -quit)" ]]; then
        echo "$jar"
        return 0
    fi
    local classes
    classes=$(mktemp -d "${TMPDIR:-/tmp}/flowscale-job.XXXXXX")
    trap 'rm -rf "$classes"' RETURN
    mkdir -p "$out_dir"
    local sources
    mapfile -t sources < <(find "$src" -name '*.java')
    javac -nowarn -encoding UTF-8 -d "$classes" -cp "$flink_home/lib/flink-dist-2.3.0.jar" \
        "${sources[@]}"
    jar --create --file "$jar.tmp" --main-class "$entry_class" -C "$classes" .
    mv "$jar.tmp" "$jar"
    echo "$jar"
}

# A JSON string literal for one argument (backslash and double quote escaped).
json_string() {
    local s="${1//\\/\\\\}"
    s="${s//\"/\\\"}"
    printf '"%s"' "$s"
}

submit() {
    local url="$1" jar upload jar_id body run job_id sep=""
    shift
    jar=$(build)
    upload=$(curl -sS --fail-with-body --max-time 60 "${curl_tls[@]}" -X POST -F "jarfile=@$jar" "$url/jars/upload")
    # {"filename":"/.../<id>_flowscale-load.jar","status":"success"}; the id is the file name.
    jar_id=$(echo "$upload" | sed -n 's/.*"filename":"\([^"]*\)".*/\1/p')
    jar_id="${jar_id##*/}"
    if [[ -z "$jar_id" ]]; then
        echo "job: upload failed: $upload" >&2
        return 1
    fi
    body="{\"entryClass\":\"$entry_class\",\"programArgsList\":["
    for arg in "$@"; do
        body+="$sep$(json_string "$arg")"
        sep=","
    done
    body+="]}"
    run=$(curl -sS --fail-with-body --max-time 120 "${curl_tls[@]}" -X POST -H 'Content-Type: application/json' \
        -d "$body" "$url/jars/$jar_id/run")
    job_id=$(echo "$run" | sed -n 's/.*"jobid":"\([0-9a-f]*\)".*/\1/p')
    if [[ -z "$job_id" ]]; then
        echo "job: run failed: $run" >&2
        return 1
    fi
    echo "$job_id"
}

case "${1:-}" in
    build) build ;;
    submit)
        [[ $# -ge 2 ]] || { echo "usage: $0 submit URL [ARGS...]" >&2; exit 2; }
        shift
        submit "$@"
        ;;
    *) echo "usage: $0 build | submit URL [ARGS...]" >&2; exit 2 ;;
esac
