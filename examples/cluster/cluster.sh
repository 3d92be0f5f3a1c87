#!/usr/bin/env bash
# Three Sluice instances behind dnsdist on 127.0.0.1, sharing one Redis (cache level and cluster
# state) and one PostgreSQL (the query log of all three); A is the primary, B and C follow its
# configuration (--config-from). Every process is recorded by PID in $CLUSTER_DIR/pids and stopped
# by that PID; PostgreSQL (data in $CLUSTER_DIR/pg, only a unix socket, in $CLUSTER_DIR/pg-run) is
# started and stopped with pg_ctl, as the postgres user when this runs as root.
#
#   cluster.sh start                 start redis and postgres, then A, then B and C, then dnsdist (each group side by
#                                    side); wait until each answers
#   cluster.sh stop                  stop everything this script started, in the reverse order, each group side by side
#                                    (TERM, then KILL after 10 s; postgres: pg_ctl -m fast)
#   cluster.sh status                which processes run
#   cluster.sh stop-one NAME         stop one process (redis, postgres, dnsdist, a, b, c): failure drills
#   cluster.sh start-one NAME        start it again
#
# Settings (environment; defaults in brackets): CLUSTER_DIR [${TMPDIR:-/tmp}/sluice-cluster],
# DNSDIST_PORT [5300], REDIS_PORT [6390], PG_PORT [5439; names the socket only],
# PG_BIN [newest /usr/lib/postgresql/*/bin], SLUICE_A_DNS_PORT/B/C [5301/5302/5303],
# SLUICE_A_API_PORT/B/C [9081/9082/9083], SLUICE_API_PASSWORD [random, kept in $CLUSTER_DIR/api-password],
# SLUICE_UPSTREAM [9.9.9.9], SLUICE_BIN [node <repo>/dist/bundle/cli.js; run npm run build first].
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CLUSTER_DIR="${CLUSTER_DIR:-${TMPDIR:-/tmp}/sluice-cluster}"
DNSDIST_PORT="${DNSDIST_PORT:-5300}"
REDIS_PORT="${REDIS_PORT:-6390}"
PG_PORT="${PG_PORT:-5439}"
PG_BIN="${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}"
PG_DATA="$CLUSTER_DIR/pg"
PG_RUN="$CLUSTER_DIR/pg-run"
SLUICE_A_DNS_PORT="${SLUICE_A_DNS_PORT:-5301}"
SLUICE_B_DNS_PORT="${SLUICE_B_DNS_PORT:-5302}"
SLUICE_C_DNS_PORT="${SLUICE_C_DNS_PORT:-5303}"
SLUICE_A_API_PORT="${SLUICE_A_API_PORT:-9081}"
SLUICE_B_API_PORT="${SLUICE_B_API_PORT:-9082}"
SLUICE_C_API_PORT="${SLUICE_C_API_PORT:-9083}"
SLUICE_UPSTREAM="${SLUICE_UPSTREAM:-9.9.9.9}"
read -r -a SLUICE_CMD <<< "${SLUICE_BIN:-node $ROOT/dist/bundle/cli.js}"

PIDS="$CLUSTER_DIR/pids"
LOGS="$CLUSTER_DIR/logs"
mkdir -p "$PIDS" "$LOGS"

if [ -z "${SLUICE_API_PASSWORD:-}" ]; then
  [ -s "$CLUSTER_DIR/api-password" ] || (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$CLUSTER_DIR/api-password")
  SLUICE_API_PASSWORD="$(cat "$CLUSTER_DIR/api-password")"
fi
# The instances' query recorder: PostgreSQL over its unix socket (no TCP listener at all).
SLUICE_PG_URL="postgres://postgres@/postgres?host=$PG_RUN&port=$PG_PORT"
export SLUICE_API_PASSWORD SLUICE_UPSTREAM SLUICE_PG_URL

say() { printf '%s\n' "$*" >&2; }

# Whether process $1 still runs. A zombie has exited already: what this script starts outlives it, so
# PID 1 collects it, which some container inits do only every second or two.
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0 # no /proc here: kill -0 is all there is
  stat="${stat##*) }"
  [ "${stat%% *}" != Z ]
}

running() {
  local f="$PIDS/$1.pid"
  [ -s "$f" ] && alive "$(cat "$f")"
}

# Waits up to $2 seconds for command $3... to succeed.
wait_for() {
  local what="$1" secs="$2"
  shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      say "error: $what did not come up within ${secs}s (see $LOGS)"
      return 1
    fi
    sleep 0.2
  done
}

api_ready() { curl -sf -u "admin:$SLUICE_API_PASSWORD" "http://127.0.0.1:$1/api/readyz"; }
dns_answers() { [ "$(dig @127.0.0.1 -p "$1" health.sluice.internal A +short +time=1 +tries=1)" = "127.0.0.1" ]; }
redis_ready() { redis-cli -p "$REDIS_PORT" ping | grep -q PONG; }

# PostgreSQL refuses to run as root: its files and commands belong to the postgres user then.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

upper() { printf '%s' "$1" | tr '[:lower:]' '[:upper:]'; }

start_redis() {
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$CLUSTER_DIR" >"$LOGS/redis.log" 2>&1 &
  echo $! >"$PIDS/redis.pid"
  wait_for redis 10 redis_ready
}

start_postgres() {
  [ -x "$PG_BIN/pg_ctl" ] || { say "error: PostgreSQL not found (PG_BIN=$PG_BIN): apt-get install postgresql"; return 1; }
  mkdir -p "$PG_DATA" "$PG_RUN"
  if [ "$(id -u)" = 0 ]; then
    chown postgres: "$PG_DATA" "$PG_RUN"
    # The postgres user must be able to reach its directories inside CLUSTER_DIR.
    chmod o+x "$CLUSTER_DIR"
  fi
  chmod 700 "$PG_DATA"
  if [ ! -s "$PG_DATA/PG_VERSION" ]; then
    as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 --locale=C >"$LOGS/postgres-initdb.log" 2>&1
  fi
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_RUN/postgres.log" -w -t 30 \
    -o "-c listen_addresses='' -c unix_socket_directories='$PG_RUN' -c port=$PG_PORT" start >/dev/null
  head -n 1 "$PG_DATA/postmaster.pid" >"$PIDS/postgres.pid"
}

stop_postgres() {
  [ -s "$PIDS/postgres.pid" ] || return 0
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 20 stop >/dev/null 2>&1 || true
  say "postgres stopped (pid $(cat "$PIDS/postgres.pid"))"
  rm -f "$PIDS/postgres.pid"
}

start_instance() {
  local name="$1" N dir dns api
  N="$(upper "$name")"
  dns="SLUICE_${N}_DNS_PORT"
  api="SLUICE_${N}_API_PORT"
  dir="$CLUSTER_DIR/$name"
  mkdir -p "$dir"
  # The first start takes the example's file; later starts keep what the instance has (a replica's last pull).
  [ -f "$dir/sluice.yaml" ] || cp "$HERE/sluice-$name.yaml" "$dir/sluice.yaml"
  local follow=()
  if [ "$name" != a ]; then
    follow=(--config-from "http://127.0.0.1:$SLUICE_A_API_PORT" --config-poll 1s)
  fi
  SLUICE_INSTANCE="$name" SLUICE_DNS_PORT="${!dns}" SLUICE_API_PORT="${!api}" SLUICE_REDIS_URL="redis://127.0.0.1:$REDIS_PORT" \
    SLUICE_CONFIG_FROM_AUTH="admin:$SLUICE_API_PASSWORD" \
    "${SLUICE_CMD[@]}" start -c "$dir/sluice.yaml" -d "$dir" "${follow[@]}" >"$LOGS/$name.log" 2>&1 &
  echo $! >"$PIDS/$name.pid"
  wait_for "sluice $name" 30 api_ready "${!api}"
}

start_dnsdist() {
  DNSDIST_LISTEN="127.0.0.1:$DNSDIST_PORT" \
    SLUICE_A_DNS="127.0.0.1:$SLUICE_A_DNS_PORT" SLUICE_B_DNS="127.0.0.1:$SLUICE_B_DNS_PORT" SLUICE_C_DNS="127.0.0.1:$SLUICE_C_DNS_PORT" \
    dnsdist --supervised --disable-syslog -C "$HERE/dnsdist.conf" >"$LOGS/dnsdist.log" 2>&1 &
  echo $! >"$PIDS/dnsdist.pid"
  wait_for dnsdist 20 dns_answers "$DNSDIST_PORT"
}

start_one() {
  local name="$1"
  if running "$name"; then
    say "$name is already running (pid $(cat "$PIDS/$name.pid"))"
    return 0
  fi
  case "$name" in
    redis) start_redis ;;
    postgres) start_postgres ;;
    dnsdist) start_dnsdist ;;
    a | b | c) start_instance "$name" ;;
    *) say "unknown process '$name' (redis, postgres, dnsdist, a, b, c)"; return 2 ;;
  esac
  say "$name started (pid $(cat "$PIDS/$name.pid"))"
}

stop_one() {
  local name="$1" f="$PIDS/$1.pid" pid
  if [ "$name" = postgres ]; then stop_postgres; return 0; fi
  [ -s "$f" ] || return 0
  pid="$(cat "$f")"
  if alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
    say "$name stopped (pid $pid)"
  fi
  rm -f "$f"
}

# Starts (or stops) the named processes side by side; fails when one of them fails. Each waits for
# itself (an instance until its API is ready): side by side the waits overlap instead of adding up.
together() {
  local action="$1" pids=() failed=0 pid
  shift
  for name in "$@"; do "$action" "$name" & pids+=("$!"); done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  return "$failed"
}

case "${1:-}" in
  start)
    # Order: what the instances need first (Redis, PostgreSQL), the primary before its replicas, the balancer last.
    for group in "redis postgres" a "b c" dnsdist; do
      # shellcheck disable=SC2086 # a group is a list of names
      together start_one $group || { "$0" stop; exit 1; }
    done
    say "cluster up: dig @127.0.0.1 -p $DNSDIST_PORT example.com; API of A: http://127.0.0.1:$SLUICE_A_API_PORT (admin / $CLUSTER_DIR/api-password)"
    ;;
  stop)
    for group in dnsdist "c b a" "postgres redis"; do
      # shellcheck disable=SC2086 # a group is a list of names
      together stop_one $group || true
    done
    ;;
  status)
    for p in redis postgres a b c dnsdist; do
      if running "$p"; then echo "$p running (pid $(cat "$PIDS/$p.pid"))"; else echo "$p stopped"; fi
    done
    ;;
  start-one) start_one "${2:?name}" ;;
  stop-one) stop_one "${2:?name}" ;;
  *)
    sed -n '2,20p' "$0" >&2
    exit 2
    ;;
esac
