#!/usr/bin/env bash
# Starts or stops a one-machine Apache Flink 2.3 session cluster in a run folder.
#
#   flink/cluster.sh start DIR   write DIR/conf, start a JobManager and one TaskManager (8 slots),
#                                wait until the TaskManager is registered, print the REST URL
#   flink/cluster.sh stop DIR    stop both processes by the PIDs recorded in DIR (TaskManager first)
#   flink/cluster.sh status DIR  print the REST URL and exit 0 if the cluster answers
#
# Everything the cluster writes (config, logs, PIDs, temp and upload dirs) stays under DIR.
# Addresses are 127.0.0.1; ports are fixed and non-default so a developer's own Flink on 8081 does
# not clash. Environment:
#   FLOWSCALE_FLINK_REST_PORT   REST port (default 18081); the other ports follow it
#                               (rest+42 JM RPC, +43 blob, +44 TM RPC, +45 TM data, +46/+47 metric
#                               query services of JM/TM)
#   FLOWSCALE_FLINK_SLOTS       task slots of the TaskManager (default 8)
#   FLOWSCALE_FLINK_START_TIMEOUT  seconds to wait for the TaskManager (default 90)
#   FLOWSCALE_FLINK_REST_SSL    a folder with rest.keystore.p12 (the REST server's certificate),
#                               rest.truststore.p12 (the CA its clients' certificates are signed
#                               by), both with password `flowscale`, and ca.pem, client.pem and
#                               client.key for curl: the REST API is then https with mutual TLS
#                               (security.ssl.rest.enabled, .authentication-enabled) and the URL
#                               printed is https://
#   FLOWSCALE_CACHE             where setup.sh keeps the jars
#
# The scheduler is the adaptive one with short stabilization timeouts: flowscale rescales jobs in
# place through the resource-requirements REST API, which only the adaptive scheduler offers.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

usage() {
    echo "usage: $0 start|stop|status DIR" >&2
    exit 2
}

[[ $# -eq 2 ]] || usage
cmd="$1"
run_dir="$2"

rest_port="${FLOWSCALE_FLINK_REST_PORT:-18081}"
slots="${FLOWSCALE_FLINK_SLOTS:-8}"
start_timeout="${FLOWSCALE_FLINK_START_TIMEOUT:-90}"
rest_ssl="${FLOWSCALE_FLINK_REST_SSL:-}"
rest_url="http://127.0.0.1:$rest_port"
curl_tls=()
if [[ -n "$rest_ssl" ]]; then
    rest_url="https://127.0.0.1:$rest_port"
    curl_tls=(--cacert "$rest_ssl/ca.pem" --cert "$rest_ssl/client.pem" --key "$rest_ssl/client.key")
fi

# Stops one process by PID file: SIGTERM, up to 15 s of grace, then SIGKILL.
stop_pid() {
    local pid_file="$1" name="$2" pid
    [[ -f "$pid_file" ]] || return 0
    pid=$(cat "$pid_file")
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 150); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "cluster: $name ($pid) ignored SIGTERM, killing" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$pid_file"
}

stop_cluster() {
    stop_pid "$run_dir/taskmanager.pid" taskmanager
    stop_pid "$run_dir/jobmanager.pid" jobmanager
}

# The lines BashJavaUtils marks as results, without the marker.
bash_java_utils() {
    local out
    out=$(java -cp "$flink_home/lib/*:$flink_home/bin/bash-java-utils.jar" \
        -Dlog4j.configurationFile=file:"$run_dir/conf/log4j-bash-utils.properties" \
        org.apache.flink.runtime.util.bash.BashJavaUtils "$1" --configDir "$run_dir/conf" 2>&1) || {
        echo "cluster: BashJavaUtils $1 failed:" >&2
        echo "$out" >&2
        return 1
    }
    echo "$out" | sed -n 's/^BASH_JAVA_UTILS_EXEC_RESULT://p'
}

write_config() {
    local conf="$run_dir/conf"
    mkdir -p "$conf" "$run_dir/log" "$run_dir/tmp" "$run_dir/upload" "$run_dir/web" "$run_dir/plugins"
    cat > "$conf/config.yaml" <<YAML
jobmanager.rpc.address: 127.0.0.1
jobmanager.rpc.port: $((rest_port + 42))
jobmanager.bind-host: 127.0.0.1
jobmanager.memory.process.size: 1024m
jobmanager.scheduler: adaptive
jobmanager.adaptive-scheduler.resource-stabilization-timeout: 2s
jobmanager.adaptive-scheduler.submission.resource-stabilization-timeout: 2s
jobmanager.adaptive-scheduler.rescale-trigger.max-delay: 200ms
jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling: 1s
jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout: 1s
jobmanager.execution.failover-strategy: region
# A slot a job gives back (a scale-down) stays with its JobManager this long before another job
# can take it (Flink's default is 50 s).
slot.idle.timeout: 2 s
taskmanager.host: 127.0.0.1
taskmanager.bind-host: 127.0.0.1
taskmanager.rpc.port: $((rest_port + 44))
taskmanager.data.port: $((rest_port + 45))
taskmanager.numberOfTaskSlots: $slots
taskmanager.memory.process.size: 1536m
blob.server.port: $((rest_port + 43))
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: $rest_port
metrics.fetcher.update-interval: 1000
web.refresh-interval: 500
web.adaptive-scheduler.rescale-history.size: 20
web.upload.dir: $run_dir/upload
web.tmpdir: $run_dir/web
io.tmp.dirs: $run_dir/tmp
parallelism.default: 1
env.java.opts.all: $java_opts
YAML
    if [[ -n "$rest_ssl" ]]; then
        # PKCS#12 files: the JDK reads them as the default keystore type (keystore.type.compat).
        cat >> "$conf/config.yaml" <<YAML
security.ssl.rest.enabled: true
security.ssl.rest.authentication-enabled: true
security.ssl.rest.keystore: $rest_ssl/rest.keystore.p12
security.ssl.rest.keystore-password: flowscale
security.ssl.rest.key-password: flowscale
security.ssl.rest.truststore: $rest_ssl/rest.truststore.p12
security.ssl.rest.truststore-password: flowscale
# Flink's default, TLS_RSA_WITH_AES_128_CBC_SHA (RSA key exchange, no forward secrecy), is
# offered by no current client (rustls has none of it); ECDHE suites for the EC test keys.
security.ssl.algorithms: TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
YAML
    fi
    # append = true: a fatal exit must not truncate the evidence of why.
    cat > "$conf/log4j.properties" <<'PROPS'
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = MainAppender
appender.main.name = MainAppender
appender.main.type = File
appender.main.append = true
appender.main.fileName = ${sys:log.file}
appender.main.layout.type = PatternLayout
appender.main.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n
logger.pekko.name = org.apache.pekko
logger.pekko.level = INFO
logger.netty.name = org.jboss.netty.channel.DefaultChannelPipeline
logger.netty.level = OFF
PROPS
    # BashJavaUtils only needs errors, on the console.
    cat > "$conf/log4j-bash-utils.properties" <<'PROPS'
rootLogger.level = ERROR
rootLogger.appenderRef.console.ref = ConsoleAppender
appender.console.name = ConsoleAppender
appender.console.type = Console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %m%n
PROPS
}

# Starts a Java process in the background, detached from this shell's job control, and records its
# PID. Arguments: name, main class, JVM flags (one string), then program arguments.
launch() {
    local name="$1" main="$2" jvm_flags="$3"
    shift 3
    # Flink loads plugins from $FLINK_PLUGINS_DIR, else from ./plugins of the working directory: a
    # repository's own plugins/ folder (flowscale's) would make it fail, so point it at an empty one.
    # shellcheck disable=SC2086 # the flags are a space-separated list by construction
    FLINK_PLUGINS_DIR="$run_dir/plugins" nohup java $jvm_flags $java_opts \
        -Dlog.file="$run_dir/log/$name.log" \
        -Dlog4j.configurationFile=file:"$run_dir/conf/log4j.properties" \
        -classpath "$flink_home/lib/*" \
        "$main" "$@" >>"$run_dir/log/$name.out" 2>&1 </dev/null &
    echo $! > "$run_dir/$name.pid"
}

registered_taskmanagers() {
    curl -sf --max-time 2 "${curl_tls[@]}" "$rest_url/overview" 2>/dev/null |
        sed -n 's/.*"taskmanagers":\([0-9][0-9]*\).*/\1/p'
}

start_cluster() {
    if [[ -f "$run_dir/jobmanager.pid" ]] && kill -0 "$(cat "$run_dir/jobmanager.pid")" 2>/dev/null; then
        echo "cluster: already running in $run_dir" >&2
        echo "$rest_url"
        return 0
    fi
    if curl -sf --max-time 2 "${curl_tls[@]}" "$rest_url/overview" >/dev/null 2>&1; then
        echo "cluster: something already answers on $rest_url; set FLOWSCALE_FLINK_REST_PORT" >&2
        return 1
    fi
    flink_home=$("$here/setup.sh" | tail -n 1)
    java_opts=$(unzip -p "$flink_home/lib/flink-dist-2.3.0.jar" config.yaml | sed -n 's/^ *all: *//p' | head -n 1)
    write_config

    trap 'echo "cluster: start failed, stopping" >&2; stop_cluster' ERR

    local jm_params jm_jvm jm_dynamic tm_params tm_jvm tm_dynamic
    jm_params=$(bash_java_utils GET_JM_RESOURCE_PARAMS)
    jm_jvm=$(echo "$jm_params" | head -n 1)
    jm_dynamic=$(echo "$jm_params" | tail -n 1)
    tm_params=$(bash_java_utils GET_TM_RESOURCE_PARAMS)
    tm_jvm=$(echo "$tm_params" | head -n 1)
    tm_dynamic=$(echo "$tm_params" | tail -n 1)

    # shellcheck disable=SC2086 # dynamic properties are "-D k=v" pairs
    launch jobmanager org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint "$jm_jvm" \
        --configDir "$run_dir/conf" --executionMode cluster $jm_dynamic \
        -D metrics.internal.query-service.port=$((rest_port + 46))
    # shellcheck disable=SC2086
    launch taskmanager org.apache.flink.runtime.taskexecutor.TaskManagerRunner "$tm_jvm" \
        --configDir "$run_dir/conf" $tm_dynamic \
        -D metrics.internal.query-service.port=$((rest_port + 47))

    local deadline=$((SECONDS + start_timeout)) n
    while true; do
        n=$(registered_taskmanagers || true)
        if [[ -n "$n" && "$n" -ge 1 ]]; then break; fi
        for name in jobmanager taskmanager; do
            if ! kill -0 "$(cat "$run_dir/$name.pid")" 2>/dev/null; then
                echo "cluster: $name exited during start; see $run_dir/log/$name.log" >&2
                false
            fi
        done
        if [[ $SECONDS -ge $deadline ]]; then
            echo "cluster: no TaskManager registered within ${start_timeout}s; see $run_dir/log" >&2
            false
        fi
        sleep 0.25
    done
    trap - ERR
    echo "$rest_url"
}

case "$cmd" in
    start) start_cluster ;;
    stop) stop_cluster ;;
    status) curl -sf --max-time 2 "${curl_tls[@]}" "$rest_url/overview" >/dev/null && echo "$rest_url" ;;
    *) usage ;;
esac
