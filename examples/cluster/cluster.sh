#!/usr/bin/env bash
# Three Sluice instances behind dnsdist on 127.0.0.1, sharing one Redis (cache level and cluster
# state); A is the primary, B and C follow its configuration (--config-from). Every process runs in
# the foreground of its own, is recorded by PID in $CLUSTER_DIR/pids and stopped by that PID.
#
#   cluster.sh start                 start redis, the instances (A, then B and C), dnsdist; wait until each answers
#   cluster.sh stop                  stop everything this script started (TERM, then KILL after 10 s)
#   cluster.sh status                which processes run
#   cluster.sh stop-one NAME         stop one process (redis, dnsdist, a, b, c): failure drills
#   cluster.sh start-one NAME        start it again
#
# Settings (environment; defaults in brackets): CLUSTER_DIR [${TMPDIR:-/tmp}/sluice-cluster],
# DNSDIST_PORT [5300], REDIS_PORT [6390], SLUICE_A_DNS_PORT/B/C [5301/5302/5303],
# SLUICE_A_API_PORT/B/C [9081/9082/9083], SLUICE_API_PASSWORD [random, kept in $CLUSTER_DIR/api-password],
# SLUICE_UPSTREAM [9.9.9.9], SLUICE_BIN [node <repo>/dist/src/cli.js; run npm run build first].
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CLUSTER_DIR="${CLUSTER_DIR:-${TMPDIR:-/tmp}/sluice-cluster}"
DNSDIST_PORT="${DNSDIST_PORT:-5300}"
REDIS_PORT="${REDIS_PORT:-6390}"
SLUICE_A_DNS_PORT="${SLUICE_A_DNS_PORT:-5301}"
SLUICE_B_DNS_PORT="${SLUICE_B_DNS_PORT:-5302}"
SLUICE_C_DNS_PORT="${SLUICE_C_DNS_PORT:-5303}"
SLUICE_A_API_PORT="${SLUICE_A_API_PORT:-9081}"
SLUICE_B_API_PORT="${SLUICE_B_API_PORT:-9082}"
SLUICE_C_API_PORT="${SLUICE_C_API_PORT:-9083}"
SLUICE_UPSTREAM="${SLUICE_UPSTREAM:-9.9.9.9}"
read -r -a SLUICE_CMD <<< "${SLUICE_BIN:-node $ROOT/dist/src/cli.js}"

PIDS="$CLUSTER_DIR/pids"
LOGS="$CLUSTER_DIR/logs"
mkdir -p "$PIDS" "$LOGS"

if [ -z "${SLUICE_API_PASSWORD:-}" ]; then
  [ -s "$CLUSTER_DIR/api-password" ] || (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$CLUSTER_DIR/api-password")
  SLUICE_API_PASSWORD="$(cat "$CLUSTER_DIR/api-password")"
fi
export SLUICE_API_PASSWORD SLUICE_UPSTREAM

say() { printf '%s\n' "$*" >&2; }

running() {
  local f="$PIDS/$1.pid"
  [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
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

upper() { printf '%s' "$1" | tr '[:lower:]' '[:upper:]'; }

start_redis() {
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$CLUSTER_DIR" >"$LOGS/redis.log" 2>&1 &
  echo $! >"$PIDS/redis.pid"
  wait_for redis 10 redis_ready
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
    dnsdist) start_dnsdist ;;
    a | b | c) start_instance "$name" ;;
    # PostgreSQL (the central query store, issue 17 part 2) gets its case here.
    *) say "unknown process '$name' (redis, dnsdist, a, b, c)"; return 2 ;;
  esac
  say "$name started (pid $(cat "$PIDS/$name.pid"))"
}

stop_one() {
  local name="$1" f="$PIDS/$1.pid" pid
  [ -s "$f" ] || return 0
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    say "$name stopped (pid $pid)"
  fi
  rm -f "$f"
}

case "${1:-}" in
  start)
    # Order: what the instances need first (Redis), the primary before its replicas, the balancer last.
    for p in redis a b c dnsdist; do start_one "$p" || { "$0" stop; exit 1; }; done
    say "cluster up: dig @127.0.0.1 -p $DNSDIST_PORT example.com; API of A: http://127.0.0.1:$SLUICE_A_API_PORT (admin / $CLUSTER_DIR/api-password)"
    ;;
  stop)
    for p in dnsdist c b a redis; do stop_one "$p"; done
    ;;
  status)
    for p in redis a b c dnsdist; do
      if running "$p"; then echo "$p running (pid $(cat "$PIDS/$p.pid"))"; else echo "$p stopped"; fi
    done
    ;;
  start-one) start_one "${2:?name}" ;;
  stop-one) stop_one "${2:?name}" ;;
  *)
    sed -n '2,16p' "$0" >&2
    exit 2
    ;;
esac
