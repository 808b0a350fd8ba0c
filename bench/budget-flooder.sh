#!/usr/bin/env bash
# The disk budget's promise, measured: good producers beside a flooder that
# is over its quota go as fast, and are acknowledged as quickly, as without
# it. One daemon (fsync=batch, [producer_quotas] flood = QUOTA); runs of
# logshard-bench (P producers x N records of S bytes, a flush every 64
# records) alternate without and with a flooder (`logctl send --producer
# flood` fed from `yes`) that has filled its quota and waits; REPEAT pairs.
#
# Usage: BUILD=/var/tmp/mb bench/budget-flooder.sh
#   BUILD    a build directory (release) with daemon/, logctl/, bench/
#   P, N, S  producers, records each, record bytes (8, 20000, 128)
#   QUOTA    the flooder's quota (8M); REPEAT pairs of runs (5)
set -euo pipefail

BUILD=${BUILD:?set BUILD to a build directory}
P=${P:-8} N=${N:-20000} S=${S:-128} QUOTA=${QUOTA:-8M} REPEAT=${REPEAT:-5}
daemon=$BUILD/daemon/logshardd logctl=$BUILD/logctl/logctl bench=$BUILD/bench/logshard-bench
dir=$(mktemp -d /var/tmp/budget-flooder.XXXXXX)
pid= flood=
cleanup() {
    [ -z "$flood" ] || kill "$flood" 2>/dev/null || true
    [ -z "$pid" ] || { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
    rm -rf "$dir"
}
trap cleanup EXIT

cat >"$dir/conf" <<EOF
[daemon]
spool = $dir/spool
socket = $dir/sock
admin_socket = $dir/admin
[sync]
fsync = batch
[producer_quotas]
flood = $QUOTA
EOF
mkdir "$dir/spool"
"$daemon" --config "$dir/conf" 2>"$dir/daemon.log" &
pid=$!
for _ in $(seq 100); do [ -S "$dir/admin" ] && break; sleep 0.05; done

waiting() { "$logctl" status --json --admin-socket "$dir/admin" | grep -q '"producers_waiting":1'; }
run() { # $1: label
    "$bench" --socket "$dir/sock" --producers "$P" --records "$N" --size "$S" \
        --flush-every 64 --fsync batch --json >"$dir/run.json"
    python3 - "$1" "$dir/run.json" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
run = json.load(open(path))["results"][0]["runs"][0]
print(f"{label}\t{run['records_per_s']:.0f}\t{run['ack_p99_us']:.0f}")
PY
}

echo "# $P producers x $N records of $S B, fsync=batch, flush every 64; flooder quota $QUOTA"
printf 'run\trecords/s\tack p99 us\n'
for i in $(seq "$REPEAT"); do
    run "alone-$i" | tee -a "$dir/table"
    yes "$(printf '%*s' "$S" '' | tr ' ' f)" | "$logctl" send --socket "$dir/sock" --producer flood &
    flood=$!
    for _ in $(seq 600); do waiting && break; sleep 0.05; done
    waiting || { echo "the flooder never reached its quota" >&2; exit 1; }
    run "flooder-$i" | tee -a "$dir/table"
    kill "$flood" 2>/dev/null || true
    wait "$flood" 2>/dev/null || true
    flood=
    "$logctl" merge --spool "$dir/spool" --delete >/dev/null
    rm -f "$dir"/spool/merged/*
done
grep -c "is at its quota" "$dir/daemon.log" | sed 's/^/# quota waits logged: /'
python3 - "$dir/table" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]) if l.strip()]
def med(kind, col):
    return statistics.median(float(r[col]) for r in rows if r[0].startswith(kind + "-"))
a_r, f_r = med("alone", 1), med("flooder", 1)
a_p, f_p = med("alone", 2), med("flooder", 2)
print(f"median records/s: alone {a_r:.0f}, beside the flooder {f_r:.0f} (ratio {f_r / a_r:.2f})")
print(f"median ack p99 us: alone {a_p:.0f}, beside the flooder {f_p:.0f} (ratio {f_p / a_p:.2f})")
PY
