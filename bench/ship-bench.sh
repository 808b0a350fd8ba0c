#!/usr/bin/env bash
# ship-bench.sh: `logctl ship` side by side with kcat, on the same machine,
# in the same run, against librdkafka's mock cluster (docs/BENCHMARKS.md,
# "Ship mode", says what it measures and shows the results of a run).
#
# Throughput (the default): a spool is built once by the real logshardd,
# PRODUCERS producers x RECORDS records of SIZE bytes each sent by
# `logctl send --producer pN` from generated text files, and the daemon is
# stopped with SIGTERM so that every shard is sealed. The same lines stay
# behind as one file per producer. Then, REPEAT times, rotating which
# goes first:
#   logctl ship  a fresh kafka-mock, <spool>/ship/ removed (every record is
#                shipped again, from the same shards), `logctl ship` without
#                --follow timed from its start until it exits 0: every
#                sealed record produced, acknowledged and committed;
#   kcat         a fresh kafka-mock, one `kcat -P` per producer file to
#                topic bench.pN, all at once, timed until the last exits 0;
#   kcat+h       the same, each kcat also giving every message the seven
#                headers logctl ship gives (kcat -H: the same names, values
#                of the same lengths), so that the two carry the same bytes.
# All produce the same payloads to the same topics (bench.pN), keyed by
# the producer name (so each producer's records go to one partition), lz4
# compressed, idempotent, with the batching logctl ship sets for itself
# (batch.num.messages, queue.buffering.max.messages). After each run every
# topic is read back with kcat -C -X isolation.level=read_committed and
# must hold exactly RECORDS messages, all keyed by its producer. What
# logctl ship does and kcat does not: read and check the shards, seven
# headers per message (kcat+h has them too), transactions with the
# progress topic, and the read back of the progress at start.
#
# Lag (--lag): a running logshardd (fsync=batch) and `logctl ship --follow`
# against a fresh kafka-mock; PRODUCERS paced `logctl send`s give the daemon
# LAG_RATE records/s each for LAG_SECONDS, and bench/ship-lag (a
# read_committed consumer from the topics' ends) reports how long the
# records took from their receive time at the daemon (the message
# timestamp) to it: p50, p99, max.
#
# Usage:
#   bench/ship-bench.sh            # throughput, full size (~1.5 minutes on 2 cores)
#   bench/ship-bench.sh --lag      # lag only (under a minute)
#   bench/ship-bench.sh --all      # both
#   QUICK=1 bench/ship-bench.sh    # 1/10 of the records, one repeat
#
# Needs a build with -Dtests=true (kafka-mock is built with the tests), kcat,
# and for --lag perl with Time::HiRes (the pacing of the load).
#
# Environment:
#   BUILD=DIR        meson build dir with logshardd, logctl, tests/kafka-mock
#                    and bench/ship-lag (default: build in the source tree)
#   PRODUCERS=P      producers, and so topics (default 8)
#   RECORDS=N        records per producer (default 250000; QUICK: 25000)
#   SIZE=S           bytes per record, 32 to 65536 (default 128)
#   REPEAT=R         timed runs of each (default 3; QUICK: 1)
#   KCAT=PATH        kcat (default: kcat in $PATH)
#   KCAT_PARALLEL=0  run the kcats one after the other instead of all at once
#   KCAT_HEADERS=0   leave out the second reference, kcat+h: kcat giving
#                    every message the seven headers logctl ship gives
#                    (same names and value lengths; kcat -H)
#   SHIP_ARGS="..."  more arguments for logctl ship, e.g. "--set linger.ms=20"
#                    (split on spaces; the reference kcat is not changed)
#   LAG_RATE=R       --lag: records/s per producer (default 2000)
#   LAG_SECONDS=S    --lag: how long the load lasts (default 20; QUICK: 5)
#   TMPBASE=DIR      where the temp directory goes (default /var/tmp, not
#                    /tmp: that may be tmpfs)
#   TIMEOUT=SECONDS  limit for one run (default 600)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/.." && pwd)

MODE=throughput
case ${1:-} in
    "") ;;
    --lag) MODE=lag ;;
    --all) MODE=all ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ship-bench: unknown argument '$1' (--lag, --all or none)" >&2; exit 2 ;;
esac

QUICK=${QUICK:-0}
PRODUCERS=${PRODUCERS:-8}
RECORDS=${RECORDS:-250000}
SIZE=${SIZE:-128}
if [[ $QUICK == 1 ]]; then
    RECORDS=$(( RECORDS / 10 ))
    REPEAT=${REPEAT:-1}
    LAG_SECONDS=${LAG_SECONDS:-5}
else
    REPEAT=${REPEAT:-3}
    LAG_SECONDS=${LAG_SECONDS:-20}
fi
LAG_RATE=${LAG_RATE:-2000}
KCAT_PARALLEL=${KCAT_PARALLEL:-1}
KCAT_HEADERS=${KCAT_HEADERS:-1}
TMPBASE=${TMPBASE:-/var/tmp}
TIMEOUT=${TIMEOUT:-600}

say() { printf '%s\n' "$*" >&2; }
die() { say "ship-bench: $*"; exit 1; }

for v in PRODUCERS RECORDS SIZE REPEAT LAG_RATE LAG_SECONDS TIMEOUT; do
    # shellcheck disable=SC2015 # the message when either test fails
    [[ ${!v} =~ ^[0-9]+$ ]] && (( 10#${!v} >= 1 )) || { say "ship-bench: $v=${!v}: a whole number of at least 1"; exit 2; }
    printf -v "$v" '%d' "$(( 10#${!v} ))" # 08 is eight, not a bad octal number
done
[[ $KCAT_HEADERS == [01] ]] || { say "ship-bench: KCAT_HEADERS=$KCAT_HEADERS: 1 (also kcat with the headers) or 0"; exit 2; }
[[ $KCAT_PARALLEL == [01] ]] || { say "ship-bench: KCAT_PARALLEL=$KCAT_PARALLEL: 1 (all at once) or 0 (one after the other)"; exit 2; }
# 32 bytes hold the producer name and the sequence number every record
# starts with; above 64 KiB the daemon's, kcat's and Kafka's own size
# limits start to decide what is measured.
(( SIZE >= 32 && SIZE <= 65536 )) || { say "ship-bench: SIZE=$SIZE: from 32 to 65536"; exit 2; }
(( PRODUCERS <= 999 )) || { say "ship-bench: PRODUCERS=$PRODUCERS: at most 999"; exit 2; }

# ---- the programs ---------------------------------------------------------
BUILD=${BUILD:-$SRC/build}
LOGSHARDD=$BUILD/daemon/logshardd
LOGCTL=$BUILD/logctl/logctl
KAFKA_MOCK=$BUILD/tests/kafka-mock
SHIP_LAG=$BUILD/bench/ship-lag
for f in "$LOGSHARDD" "$LOGCTL"; do [[ -x $f ]] || die "$f is missing: build first (ninja -C $BUILD)"; done
[[ -x $KAFKA_MOCK ]] || die "$KAFKA_MOCK is missing: it is built with the tests (meson setup $BUILD -Dtests=true)"
[[ $MODE == throughput || -x $SHIP_LAG ]] || die "$SHIP_LAG is missing: build first (ninja -C $BUILD)"
KCAT=${KCAT:-$(command -v kcat || true)}
[[ -n $KCAT && -x $KCAT ]] || die "no kcat (apt-get install kcat, or set KCAT)"
if [[ $MODE != throughput ]]; then
    perl -MTime::HiRes -e 1 2>/dev/null || die "--lag needs perl with Time::HiRes, which paces the load"
fi
LOGSHARD_REV=$(git -C "$SRC" describe --always --dirty 2>/dev/null || echo "not a git tree")
KCAT_VERSION=$("$KCAT" -V 2>&1 | sed -n 's/^Version \([^ ]*\).*librdkafka \([^ ]*\).*/\1 (librdkafka \2)/p')

# ---- temp directory, processes, cleanup -----------------------------------
WORK=
PIDS=()       # every process started, killed on the way out if still there
MOCK_FD=      # the write end of the running mock's stdin
cleanup() {
    local rc=$? pid i
    trap - EXIT INT TERM
    if [[ -n $MOCK_FD ]]; then exec {MOCK_FD}>&-; MOCK_FD=; fi
    for pid in "${PIDS[@]+"${PIDS[@]}"}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]+"${PIDS[@]}"}"; do
        for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    [[ -n $WORK && -d $WORK ]] && rm -rf -- "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$TMPBASE"
WORK=$(mktemp -d "$TMPBASE/ship-bench.XXXXXX")

# Every process starts with the signals at their defaults (a background
# command of a script has SIGINT and SIGQUIT ignored, which it cannot undo),
# and is remembered for the cleanup until it is waited for: a PID that was
# waited for may belong to someone else by the time the cleanup runs.
# spawn_io IN OUT CMD... (either may be '-') redirects in the command
# itself: bash gives a background command /dev/null as stdin unless the
# command has a redirection of its own, and a FIFO, whose open waits for
# the other end, must be opened by the child, not by this shell.
spawn() { env --default-signal "$@" & PIDS+=("$!"); }
spawn_io() {
    local in=$1 out=$2
    shift 2
    if [[ $in != - && $out != - ]]; then env --default-signal "$@" < "$in" > "$out" &
    elif [[ $in != - ]]; then env --default-signal "$@" < "$in" &
    else env --default-signal "$@" > "$out" &
    fi
    PIDS+=("$!")
}
forget() {
    local keep=() p
    for p in "${PIDS[@]+"${PIDS[@]}"}"; do [[ $p == "$1" ]] || keep+=("$p"); done
    PIDS=("${keep[@]+"${keep[@]}"}")
}

# wait_for PID WHAT [LOG]: its exit status, 0 or die naming WHAT and its log.
wait_for() {
    local pid=$1 what=$2 log=${3:-} rc=0
    wait "$pid" || rc=$?
    forget "$pid"
    if (( rc != 0 )); then
        [[ -n $log && -s $log ]] && tail -20 "$log" >&2
        (( rc == 124 )) && die "$what did not finish within $TIMEOUT s"
        die "$what failed (exit status $rc)"
    fi
}

now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }
per_s() { awk -v n="$1" -v t="$2" 'BEGIN {printf "%.0f", n / t}'; }

# CHILD_CPU: user + system CPU seconds of every child this shell has waited
# for (and of theirs). `times` must run in this shell: in a $(...) it would
# be a new child's, which has waited for nobody.
child_cpu() {
    times > "$WORK/times"
    CHILD_CPU=$(awk 'NR == 2 {split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.2f", u[1] * 60 + u[2] + s[1] * 60 + s[2]}' "$WORK/times")
}

# ---- the mock cluster -----------------------------------------------------
# start_mock DIR: a fresh kafka-mock of 3 brokers; sets BROKERS and
# MOCK_PID. Its stdin is a FIFO held open here: closing it ends the mock.
start_mock() {
    local d=$1 i
    mkfifo "$d/mock.in"
    spawn_io "$d/mock.in" "$d/mock.out" "$KAFKA_MOCK" --brokers 3 2> "$d/mock.log"
    MOCK_PID=$!
    exec {MOCK_FD}> "$d/mock.in"
    for i in $(seq 200); do
        [[ -s $d/mock.out && $(tail -c 1 "$d/mock.out" | od -An -c) == *'\n'* ]] && break
        kill -0 "$MOCK_PID" 2>/dev/null || break
        sleep 0.1
    done
    BROKERS=$(head -1 "$d/mock.out")
    [[ -n $BROKERS ]] || { cat "$d/mock.log" >&2; die "kafka-mock printed no bootstrap servers within 20 s"; }
}

stop_mock() {
    local i
    exec {MOCK_FD}>&-
    MOCK_FD=
    for i in $(seq 100); do kill -0 "$MOCK_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$MOCK_PID" 2>/dev/null || true
    wait "$MOCK_PID" 2>/dev/null || true
    forget "$MOCK_PID"
}

# ---- the daemon -----------------------------------------------------------
# start_daemon DIR FSYNC: logshardd on DIR/spool; sets DAEMON_PID.
start_daemon() {
    local d=$1 i
    spawn "$LOGSHARDD" --config /dev/null --spool "$d/spool" --socket "$d/sock" \
        --admin-socket "$d/admin.sock" --fsync "$2" 2> "$d/daemon.log"
    DAEMON_PID=$!
    for i in $(seq 300); do
        [[ -S $d/sock && -S $d/admin.sock ]] && break
        kill -0 "$DAEMON_PID" 2>/dev/null || break
        sleep 0.1
    done
    [[ -S $d/sock && -S $d/admin.sock ]] || { cat "$d/daemon.log" >&2; die "logshardd did not create its sockets in $d"; }
}

# stop_daemon DIR: SIGTERM (the daemon seals every shard), its exit waited for.
stop_daemon() {
    local d=$1 i
    kill -TERM "$DAEMON_PID" 2>/dev/null || true
    for i in $(seq 600); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$DAEMON_PID" 2>/dev/null && { kill -KILL "$DAEMON_PID"; die "logshardd ignored SIGTERM for 60 s"; }
    wait_for "$DAEMON_PID" "logshardd" "$d/daemon.log"
}

# The record generator: producer name, sequence number, then 'x' up to SIZE
# bytes; one line each, so logctl send and kcat -P take the same bytes.
gen_lines() { # PRODUCER COUNT
    awk -v p="$1" -v n="$2" -v s="$SIZE" 'BEGIN {
        pad = sprintf("%" s "s", ""); gsub(/ /, "x", pad)
        for (i = 0; i < n; i++) { l = sprintf("%s %012d ", p, i); print l substr(pad, 1, s - length(l)) }
    }'
}

# ---- the spool, once --------------------------------------------------------
build_spool() {
    local d=$WORK/build i pids=() sealed
    mkdir -p "$d" "$WORK/lines"
    say "ship-bench: generating $PRODUCERS x $RECORDS lines of $SIZE bytes"
    for ((i = 0; i < PRODUCERS; i++)); do
        gen_lines "p$i" "$RECORDS" > "$WORK/lines/p$i.txt" & PIDS+=("$!"); pids+=("$!")
    done
    for i in "${pids[@]}"; do wait_for "$i" "the line generator"; done
    # The spool's fsync policy does not change what is in the shards, and
    # this part is not timed.
    start_daemon "$d" none
    say "ship-bench: loading logshardd with $PRODUCERS logctl send"
    pids=()
    for ((i = 0; i < PRODUCERS; i++)); do
        spawn_io "$WORK/lines/p$i.txt" - "$LOGCTL" send --socket "$d/sock" --producer "p$i" 2> "$d/send-p$i.log"
        pids+=("$!")
    done
    for ((i = 0; i < PRODUCERS; i++)); do wait_for "${pids[$i]}" "logctl send --producer p$i" "$d/send-p$i.log"; done
    stop_daemon "$d"
    sealed=$(sed -n 's/.*all shards sealed (\([0-9]*\) records in \([0-9]*\) shards.*/\1 \2/p' "$d/daemon.log")
    [[ ${sealed%% *} == $(( PRODUCERS * RECORDS )) ]] ||
        { tail -5 "$d/daemon.log" >&2; die "the daemon sealed '${sealed%% *}' records, not $(( PRODUCERS * RECORDS ))"; }
    [[ -z $(ls -A "$d/spool/active" 2>/dev/null) ]] || die "unsealed shards left in $d/spool/active"
    SPOOL=$d/spool
    say "ship-bench: spool of ${sealed##* } sealed shards, $(du -sh "$SPOOL/done" | cut -f1)"
}

# verify DIR: every topic bench.pN holds RECORDS committed messages keyed pN.
verify() {
    local d=$1 i pids=() got
    for ((i = 0; i < PRODUCERS; i++)); do
        spawn "$KCAT" -C -b "$BROKERS" -t "bench.p$i" -e -q -X isolation.level=read_committed \
            -f '%k\n' > "$d/keys-p$i" 2> "$d/consume-p$i.log"
        pids+=("$!")
    done
    for ((i = 0; i < PRODUCERS; i++)); do
        wait_for "${pids[$i]}" "kcat -C -t bench.p$i" "$d/consume-p$i.log"
        got=$(awk -v k="p$i" '$0 == k {n++} END {printf "%d %d", n, NR}' "$d/keys-p$i")
        [[ $got == "$RECORDS $RECORDS" ]] ||
            die "topic bench.p$i: $(cut -d' ' -f2 <<< "$got") committed messages, $(cut -d' ' -f1 <<< "$got") keyed p$i; expected $RECORDS"
        rm -f -- "$d/keys-p$i"
    done
}

# run_ship REPEAT / run_kcat REPEAT: set R_EL (s), R_RPS, R_CPU (user+sys s).
run_ship() {
    local d=$WORK/ship-$1 t0 t1 c0 c1 pid shipped
    mkdir -p "$d"
    start_mock "$d"
    rm -rf -- "$SPOOL/ship"
    child_cpu; c0=$CHILD_CPU
    t0=$(now)
    # shellcheck disable=SC2086 # SHIP_ARGS is split into arguments on purpose
    spawn timeout -k 10 "$TIMEOUT" "$LOGCTL" ship --config /dev/null --spool "$SPOOL" \
        --brokers "$BROKERS" --topic 'bench.{producer}' --set compression=lz4 ${SHIP_ARGS:-} \
        2> "$d/ship.log"
    pid=$!
    wait_for "$pid" "logctl ship" "$d/ship.log"
    t1=$(now)
    child_cpu; c1=$CHILD_CPU
    shipped=$(sed -n 's/.*shipped \([0-9]*\) records; every sealed record is committed.*/\1/p' "$d/ship.log")
    [[ $shipped == $(( PRODUCERS * RECORDS )) ]] ||
        { cat "$d/ship.log" >&2; die "logctl ship says it shipped '$shipped' records, not $(( PRODUCERS * RECORDS ))"; }
    verify "$d"
    stop_mock
    R_EL=$(elapsed "$t0" "$t1")
    R_RPS=$(per_s $(( PRODUCERS * RECORDS )) "$R_EL")
    R_CPU=$(elapsed "$c0" "$c1")
    rm -rf -- "$d"
}

# kcat_headers PRODUCER: -H arguments for the seven headers logctl ship
# gives each record, of the same names and value lengths: a stream id (32
# hex digits), a position (6 digits, as most positions here have), the
# producer, uid 0, a 5-digit pid, a shard id (16 hex digits) and a
# transactional id of logshard's form. kcat's values are the same for every
# message; only the position would differ from record to record.
kcat_headers() {
    KCAT_H=(-H "logshard.stream=$(printf '%032x' "$(( ${1#p} + 1 ))")" -H logshard.position=123456
        -H "logshard.producer=$1" -H logshard.uid=0 -H logshard.pid=12345
        -H "logshard.shard=$(printf '%016x' "$(( ${1#p} + 1 ))")" -H logshard.shipper=logshard-vm-0123abcd)
}

# run_kcat REPEAT HEADERS: HEADERS 1 gives every message the seven headers.
run_kcat() {
    local d=$WORK/kcat-$1 t0 t1 c0 c1 i pids=() KCAT_H=()
    mkdir -p "$d"
    start_mock "$d"
    child_cpu; c0=$CHILD_CPU
    t0=$(now)
    for ((i = 0; i < PRODUCERS; i++)); do
        KCAT_H=()
        [[ $2 == 1 ]] && kcat_headers "p$i"
        spawn timeout -k 10 "$TIMEOUT" "$KCAT" -P -b "$BROKERS" -t "bench.p$i" -k "p$i" -z lz4 \
            -X enable.idempotence=true -X batch.num.messages=100000 \
            -X queue.buffering.max.messages=1000000 "${KCAT_H[@]+"${KCAT_H[@]}"}" \
            -l "$WORK/lines/p$i.txt" 2> "$d/kcat-p$i.log"
        pids+=("$!")
        [[ $KCAT_PARALLEL == 1 ]] || wait_for "$!" "kcat -P -t bench.p$i" "$d/kcat-p$i.log"
    done
    if [[ $KCAT_PARALLEL == 1 ]]; then
        for ((i = 0; i < PRODUCERS; i++)); do wait_for "${pids[$i]}" "kcat -P -t bench.p$i" "$d/kcat-p$i.log"; done
    fi
    t1=$(now)
    child_cpu; c1=$CHILD_CPU
    verify "$d"
    stop_mock
    R_EL=$(elapsed "$t0" "$t1")
    R_RPS=$(per_s $(( PRODUCERS * RECORDS )) "$R_EL")
    R_CPU=$(elapsed "$c0" "$c1")
    rm -rf -- "$d"
}

median() { sort -g | awk '{v[NR] = $1} END {if (!NR) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

throughput() {
    local r sys order ship_rps=() kcat_rps=() kcath_rps=() ship_el=() kcat_el=() kcath_el=()
    local ship_cpu=() kcat_cpu=() kcath_cpu=() m_ship m_kcat m_kcath
    build_spool
    echo "ship-bench: logctl ship vs kcat, $PRODUCERS producers x $RECORDS records x $SIZE B ($(( PRODUCERS * RECORDS )) records), lz4, $REPEAT repeat(s)"
    echo "ship-bench: kcats $([[ $KCAT_PARALLEL == 1 ]] && echo "all at once, one per topic" || echo "one after the other")$([[ $KCAT_HEADERS == 1 ]] && echo "; kcat+h: kcat with the seven headers of logctl ship")"
    for ((r = 1; r <= REPEAT; r++)); do
        # Rotate which goes first: none always finds a cooler machine.
        case $(( r % 3 )) in
            1) order="ship kcat kcath" ;;
            2) order="kcat kcath ship" ;;
            0) order="kcath ship kcat" ;;
        esac
        for sys in $order; do
            case $sys in
                ship)
                    run_ship "$r"
                    ship_rps+=("$R_RPS") ship_el+=("$R_EL") ship_cpu+=("$R_CPU")
                    printf '  logctl ship run %d: %9.0f records/s  %8.3f s  CPU %6.2f s\n' "$r" "$R_RPS" "$R_EL" "$R_CPU" ;;
                kcat)
                    run_kcat "$r" 0
                    kcat_rps+=("$R_RPS") kcat_el+=("$R_EL") kcat_cpu+=("$R_CPU")
                    printf '  kcat        run %d: %9.0f records/s  %8.3f s  CPU %6.2f s\n' "$r" "$R_RPS" "$R_EL" "$R_CPU" ;;
                kcath)
                    [[ $KCAT_HEADERS == 1 ]] || continue
                    run_kcat "$r" 1
                    kcath_rps+=("$R_RPS") kcath_el+=("$R_EL") kcath_cpu+=("$R_CPU")
                    printf '  kcat+h      run %d: %9.0f records/s  %8.3f s  CPU %6.2f s\n' "$r" "$R_RPS" "$R_EL" "$R_CPU" ;;
            esac
        done
    done
    m_ship=$(printf '%s\n' "${ship_rps[@]}" | median)
    m_kcat=$(printf '%s\n' "${kcat_rps[@]}" | median)
    printf 'median logctl ship: %9.0f records/s  %8.3f s  CPU %6.2f s\n' "$m_ship" \
        "$(printf '%s\n' "${ship_el[@]}" | median)" "$(printf '%s\n' "${ship_cpu[@]}" | median)"
    printf 'median kcat:        %9.0f records/s  %8.3f s  CPU %6.2f s\n' "$m_kcat" \
        "$(printf '%s\n' "${kcat_el[@]}" | median)" "$(printf '%s\n' "${kcat_cpu[@]}" | median)"
    if [[ $KCAT_HEADERS == 1 ]]; then
        m_kcath=$(printf '%s\n' "${kcath_rps[@]}" | median)
        printf 'median kcat+h:      %9.0f records/s  %8.3f s  CPU %6.2f s\n' "$m_kcath" \
            "$(printf '%s\n' "${kcath_el[@]}" | median)" "$(printf '%s\n' "${kcath_cpu[@]}" | median)"
    fi
    printf 'logctl ship / kcat: %.3f (records/s)\n' "$(awk -v a="$m_ship" -v b="$m_kcat" 'BEGIN {print a / b}')"
    if [[ $KCAT_HEADERS == 1 ]]; then
        printf 'logctl ship / kcat+h: %.3f (records/s; the same seven headers on every message)\n' \
            "$(awk -v a="$m_ship" -v b="$m_kcath" 'BEGIN {print a / b}')"
    fi
}

# ---- lag --------------------------------------------------------------------
# The paced load of one producer: RATE lines/s for SECONDS, written every
# 10 ms as what is due by then (so a late tick catches up instead of the
# rate drifting), in the same form as gen_lines.
# shellcheck disable=SC2016 # perl's variables, not the shell's
PACER='
use strict; use warnings; use Time::HiRes qw(time sleep);
my ($p, $rate, $secs, $size) = @ARGV;
my $n = $rate * $secs; my $pad = "x" x $size; my $t0 = time; my $i = 0;
while ($i < $n) {
    my $due = int((time - $t0) * $rate) + 1; $due = $n if $due > $n;
    my $buf = "";
    for (; $i < $due; $i++) { my $l = sprintf("%s %012d ", $p, $i); $buf .= $l . substr($pad, 0, $size - length $l) . "\n"; }
    while (length $buf) { my $w = syswrite(STDOUT, $buf); die "write: $!\n" unless defined $w; substr($buf, 0, $w) = ""; }
    sleep(0.01);
}'

lag() {
    local d=$WORK/lag i ship_pid lag_pid pids=() gens=() topics=() n out shipped
    mkdir -p "$d"
    n=$(( PRODUCERS * LAG_RATE * LAG_SECONDS ))
    echo "ship-bench: lag of logctl ship --follow, $PRODUCERS producers x $LAG_RATE records/s x $LAG_SECONDS s of $SIZE B, fsync=batch"
    start_daemon "$d" batch
    start_mock "$d"
    spawn "$LOGCTL" ship --config /dev/null --spool "$d/spool" --brokers "$BROKERS" \
        --topic 'bench.{producer}' --admin-socket "$d/admin.sock" --follow --set compression=lz4 \
        2> "$d/ship.log"
    ship_pid=$!
    # One record per producer first: the shipper makes the topics and places
    # the streams, so none of that is in the figures.
    for ((i = 0; i < PRODUCERS; i++)); do
        gen_lines "p$i" 1 | "$LOGCTL" send --socket "$d/sock" --producer "p$i" ||
            die "logctl send --producer p$i (warm-up) failed"
        topics+=(--topic "bench.p$i")
    done
    for i in $(seq 300); do
        shipped=$("$LOGCTL" ship --config /dev/null --status --json --spool "$d/spool" 2>/dev/null |
                  sed -n 's/.*"records_shipped":\([0-9]*\).*/\1/p' || true)
        (( ${shipped:-0} >= PRODUCERS )) && break
        kill -0 "$ship_pid" 2>/dev/null || { cat "$d/ship.log" >&2; die "logctl ship --follow ended"; }
        sleep 0.1
    done
    (( ${shipped:-0} >= PRODUCERS )) || { cat "$d/ship.log" >&2; die "the warm-up records were not shipped within 30 s"; }
    spawn "$SHIP_LAG" --brokers "$BROKERS" "${topics[@]}" --count "$n" \
        --timeout $(( LAG_SECONDS + 120 )) > "$d/lag.out" 2> "$d/lag.log"
    lag_pid=$!
    for i in $(seq 600); do
        grep -q '^ready$' "$d/lag.out" 2>/dev/null && break
        kill -0 "$lag_pid" 2>/dev/null || break
        sleep 0.1
    done
    grep -q '^ready$' "$d/lag.out" || { cat "$d/lag.log" >&2; die "ship-lag did not get ready"; }
    for ((i = 0; i < PRODUCERS; i++)); do
        mkfifo "$d/load-p$i"
        spawn_io "$d/load-p$i" - "$LOGCTL" send --socket "$d/sock" --producer "p$i" 2> "$d/send-p$i.log"
        pids+=("$!")
        spawn_io - "$d/load-p$i" perl -e "$PACER" "p$i" "$LAG_RATE" "$LAG_SECONDS" "$SIZE"
        gens+=("$!")
    done
    for ((i = 0; i < PRODUCERS; i++)); do
        wait_for "${gens[$i]}" "the paced generator of p$i"
        wait_for "${pids[$i]}" "logctl send --producer p$i" "$d/send-p$i.log"
    done
    wait_for "$lag_pid" "ship-lag" "$d/lag.log"
    echo "ship-bench: the shipper at the end of the load:"
    "$LOGCTL" ship --config /dev/null --status --spool "$d/spool" | sed 's/^/  /'
    kill -TERM "$ship_pid"
    wait_for "$ship_pid" "logctl ship --follow" "$d/ship.log"
    stop_mock
    stop_daemon "$d"
    out=$(grep -v '^ready$' "$d/lag.out")
    echo "ship-lag: $out"
    kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<< " $out"; }
    printf 'lag, committed (what a read_committed consumer of a real cluster sees): p50 %s ms, p99 %s ms, max %s ms over %s messages\n' \
        "$(kv committed_p50_ms)" "$(kv committed_p99_ms)" "$(kv committed_max_ms)" "$(kv committed)"
    printf 'lag, visible on the mock (appended, before the commit):               p50 %s ms, p99 %s ms, max %s ms\n' \
        "$(kv visible_p50_ms)" "$(kv visible_p99_ms)" "$(kv visible_max_ms)"
}

# ---- the run ----------------------------------------------------------------
FS_TYPE=$(findmnt -n -o FSTYPE -T "$WORK" 2>/dev/null || stat -f -c %T "$WORK")
echo "ship-bench: $(date +%Y-%m-%d), $(hostname), $(nproc) CPUs, Linux $(uname -r), temp dir on $FS_TYPE"
echo "ship-bench: logshard $("$LOGCTL" --version 2>/dev/null | awk '{print $NF}') ($BUILD, source $LOGSHARD_REV), kcat $KCAT_VERSION"
t_start=$SECONDS
[[ $MODE == lag ]] || throughput
[[ $MODE == throughput ]] || lag
echo "ship-bench: total $(( SECONDS - t_start )) s"
