#!/usr/bin/env bash
# kafka-mock against a Kafka client that is not ours: kcat (librdkafka
# underneath, as `logctl ship` will be) produces and consumes through the
# mock cluster, and every check is on what kcat delivers and reads back:
#   - 1000 lines produced to t1 all come back to a read_committed consumer;
#   - with broker 1 down, its port refuses connections, and a producer
#     started meanwhile to a partition broker 1 leads is refused too, then
#     delivers all of its 1000 lines once the broker is up again; after
#     that kcat produces to and consumes from t1 as before;
#   - after "errors Produce 3 NOT_LEADER_FOR_PARTITION", kcat meets the
#     three errors, retries, and delivers every line exactly once;
#   - "leader" moves a partition's leader where kcat -L sees it;
#   - malformed commands are answered "error: ...", "quit" is answered "ok"
#     and ends the mock with status 0, as do end of input and SIGTERM.
#
# Usage: KAFKA_MOCK=path/to/kafka-mock [KCAT=kcat] test-kafka-mock.sh
# (tests/meson.build passes both.) Every wait has a deadline.
set -euo pipefail

: "${KAFKA_MOCK:?KAFKA_MOCK must name the kafka-mock executable}"
KCAT=${KCAT:-kcat}

# Generous: on a loaded CI machine librdkafka's reconnect backoff after a
# broker comes back is up to 10 s (reconnect.backoff.max.ms) on its own.
CLIENT_TIMEOUT_S=120
ANSWER_TIMEOUT_S=15
START_TIMEOUT_S=30

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-kafka-mock.XXXXXX")
mock_pid=
mock_err=
bg_pid=

cleanup() {
    local pid
    for pid in "$bg_pid" "$mock_pid"; do
        if [ -n "$pid" ]; then
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
# A write to the mock's stdin after it died must fail the check that made
# it, not kill this script without a word.
trap '' PIPE

fail() {
    echo "FAIL: $*" >&2
    if [ -n "$mock_err" ] && [ -s "$mock_err" ]; then
        sed 's/^/  kafka-mock stderr: /' "$mock_err" >&2
    fi
    exit 1
}

# True once process $1 has ended (a zombie counts: it is our child and not
# yet waited for, and kill -0 would still reach it).
exited() {
    local state
    state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 0
    [ -z "$state" ] || [ "$state" = Z ]
}

# wait_for WHAT SECONDS COMMAND...: runs COMMAND until it succeeds; fails
# the test naming WHAT when SECONDS pass first.
wait_for() {
    local what=$1 seconds=$2 deadline=$((SECONDS + $2))
    shift 2
    until "$@"; do
        [ "$SECONDS" -lt "$deadline" ] || fail "waited ${seconds}s for $what"
        sleep 0.05
    done
}

lines_at_least() {
    [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]
}

# The mock has printed its first line; fails at once if it ended instead.
started() {
    lines_at_least "$out" 1 && return 0
    if exited "$mock_pid"; then
        fail "kafka-mock $* ended before printing the bootstrap servers"
    fi
    return 1
}

accepts() {
    (exec 5<>"/dev/tcp/$1/$2") 2>/dev/null
}

refuses() {
    ! accepts "$@"
}

# start_mock NAME ARGS...: starts kafka-mock with its stdin on a FIFO held
# open as fd 3 and its stdout in $tmp/NAME.out; sets mock_pid, and B to the
# bootstrap servers once the first line is there.
start_mock() {
    local name=$1
    shift
    rm -f "$tmp/$name.in"
    mkfifo "$tmp/$name.in"
    "$KAFKA_MOCK" "$@" <"$tmp/$name.in" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    mock_pid=$!
    mock_err=$tmp/$name.err
    exec 3>"$tmp/$name.in"
    answers=0
    out=$tmp/$name.out
    wait_for "the bootstrap servers line of kafka-mock $*" "$START_TIMEOUT_S" started "$@"
    B=$(head -n 1 "$out")
    case $B in
        127.0.0.1:[0-9]*) ;;
        *) fail "kafka-mock $* printed '$B' where the bootstrap servers belong" ;;
    esac
}

# mock_cmd LINE: sends LINE, waits for its one answer line, leaves it in
# $answer.
mock_cmd() {
    printf '%s\n' "$1" >&3 || fail "kafka-mock is gone: writing '$1' to its stdin failed"
    answers=$((answers + 1))
    wait_for "kafka-mock's answer to '$1'" "$ANSWER_TIMEOUT_S" lines_at_least "$out" $((answers + 1))
    answer=$(sed -n "$((answers + 1))p" "$out")
}

expect_ok() {
    mock_cmd "$1"
    [ "$answer" = ok ] || fail "'$1' was answered '$answer', not 'ok'"
}

expect_error() {
    mock_cmd "$1"
    case $answer in
        "error: "?*) ;;
        *) fail "'$1' was answered '$answer', not 'error: <why>'" ;;
    esac
}

# wait_exit WHAT: waits for the mock to end and checks its status is 0.
wait_exit() {
    local status=0
    wait_for "kafka-mock to end after $1" "$START_TIMEOUT_S" exited "$mock_pid"
    wait "$mock_pid" || status=$?
    mock_pid=
    [ "$status" -eq 0 ] || fail "kafka-mock ended with status $status after $1"
}

# lines PREFIX FILE: 1000 distinct lines PREFIX-0001.. into FILE.
lines() {
    seq -f "$1-%04g" 1 1000 >"$2"
}

produce() {
    local topic=$1 input=$2 status=0
    shift 2
    timeout "$CLIENT_TIMEOUT_S" "$KCAT" -P -b "$B" -t "$topic" "$@" <"$input" \
        2>"$tmp/produce-$topic.err" || status=$?
    [ "$status" -eq 0 ] ||
        fail "kcat -P -t $topic exited with status $status: $(grep -v '^%7' "$tmp/produce-$topic.err" | tail -n 3)"
}

# consume_check TOPIC EXPECTED: everything in TOPIC, read by a
# read_committed consumer, is exactly the lines of EXPECTED (in any order:
# the lines are spread over the partitions).
consume_check() {
    local topic=$1 expected=$2 status=0 missing extra
    timeout "$CLIENT_TIMEOUT_S" "$KCAT" -C -b "$B" -t "$topic" -e -q \
        -X isolation.level=read_committed >"$tmp/got-$topic" 2>"$tmp/consume-$topic.err" ||
        status=$?
    [ "$status" -eq 0 ] ||
        fail "kcat -C -t $topic exited with status $status: $(tail -n 3 "$tmp/consume-$topic.err")"
    sort "$expected" >"$tmp/want-$topic.sorted"
    sort "$tmp/got-$topic" >"$tmp/got-$topic.sorted"
    if ! cmp -s "$tmp/want-$topic.sorted" "$tmp/got-$topic.sorted"; then
        missing=$(comm -23 "$tmp/want-$topic.sorted" "$tmp/got-$topic.sorted" | wc -l)
        extra=$(comm -13 "$tmp/want-$topic.sorted" "$tmp/got-$topic.sorted" | wc -l)
        fail "$topic: $(wc -l <"$expected") lines produced, $(wc -l <"$tmp/got-$topic") consumed ($missing missing, $extra extra or repeated)"
    fi
}

# --- produce and consume --------------------------------------------------
start_mock mock --brokers 3 --ready-file "$tmp/ready"
wait_for "the ready file" "$START_TIMEOUT_S" test -s "$tmp/ready"
[ "$(cat "$tmp/ready")" = "$B" ] ||
    fail "the ready file says '$(cat "$tmp/ready")', stdout said '$B'"
[ "$(echo "$B" | tr ',' '\n' | grep -c .)" -eq 3 ] ||
    fail "--brokers 3, but the bootstrap servers are '$B'"

lines t1 "$tmp/t1"
produce t1 "$tmp/t1"
consume_check t1 "$tmp/t1"

# An auto-created topic has the mock's 4 partitions, as kcat sees it.
"$KCAT" -L -b "$B" -t t1 >"$tmp/meta-t1" 2>&1 || fail "kcat -L -t t1: $(tail -n 3 "$tmp/meta-t1")"
grep -q 'topic "t1" with 4 partitions' "$tmp/meta-t1" ||
    fail "t1 should have the 4 partitions of an auto-created topic: $(grep 'topic "t1"' "$tmp/meta-t1")"

# --- broker 1 down, then up -----------------------------------------------
"$KCAT" -L -b "$B" >"$tmp/meta" 2>&1 || fail "kcat -L: $(tail -n 3 "$tmp/meta")"
b1=$(sed -n 's/^ *broker 1 at \([0-9.]*:[0-9]*\).*/\1/p' "$tmp/meta")
[ -n "$b1" ] || fail "kcat -L lists no broker 1: $(grep broker "$tmp/meta")"
b1_host=${b1%:*} b1_port=${b1##*:}
accepts "$b1_host" "$b1_port" || fail "broker 1 ($b1) refuses connections before 'down 1'"

# A topic with a partition that broker 1 leads. The mock picks leaders at
# random and kcat -L shows which; ten topics of 12 partitions without one
# would take odds of (2/3)^120.
t2='' p2=''
for n in $(seq 1 10); do
    expect_ok "topic t2-$n 12"
    "$KCAT" -L -b "$B" -t "t2-$n" >"$tmp/meta-t2" 2>&1 || fail "kcat -L -t t2-$n: $(tail -n 3 "$tmp/meta-t2")"
    p2=$(awk '$1 == "partition" && $3 == "leader" && $4 == "1," { sub(",", "", $2); print $2; exit }' \
        "$tmp/meta-t2")
    if [ -n "$p2" ]; then
        t2=t2-$n
        break
    fi
done
[ -n "$t2" ] || fail "broker 1 leads no partition of ten new topics of 12 partitions each"

expect_ok "down 1"
wait_for "broker 1 ($b1) to refuse connections after 'down 1'" "$ANSWER_TIMEOUT_S" \
    refuses "$b1_host" "$b1_port"

# A producer started while broker 1 is down, to a partition broker 1 leads
# (the mock does not move leaders): nothing of it can be stored until the
# broker is back, and librdkafka keeps the lines and tries again.
lines t2 "$tmp/t2"
timeout "$CLIENT_TIMEOUT_S" "$KCAT" -P -b "$B" -t "$t2" -p "$p2" <"$tmp/t2" 2>"$tmp/produce-t2.err" &
bg_pid=$!
wait_for "kcat to be refused by broker 1 ($b1)" "$CLIENT_TIMEOUT_S" \
    grep -q "Connect to ipv4#$b1 failed: Connection refused" "$tmp/produce-t2.err"

expect_ok "up 1"
wait_for "broker 1 ($b1) to accept connections after 'up 1'" "$ANSWER_TIMEOUT_S" \
    accepts "$b1_host" "$b1_port"
status=0
wait "$bg_pid" || status=$?
bg_pid=
[ "$status" -eq 0 ] ||
    fail "kcat -P -t $t2 -p $p2 (started with broker 1 down) exited with status $status: $(grep -v 'Connection refused' "$tmp/produce-t2.err" | tail -n 3)"
consume_check "$t2" "$tmp/t2"

# And a producer started after it all, on the first topic again.
lines t1-again "$tmp/t1-again"
produce t1 "$tmp/t1-again"
cat "$tmp/t1" "$tmp/t1-again" >"$tmp/t1-both"
consume_check t1 "$tmp/t1-both"

# --- injected Produce errors ----------------------------------------------
expect_ok "errors Produce 3 NOT_LEADER_FOR_PARTITION"
lines t3 "$tmp/t3"
produce t3 "$tmp/t3" -X debug=msg
consume_check t3 "$tmp/t3"
# librdkafka logs each failed batch at debug level msg; 2.0.2 sends one
# partition per ProduceRequest, so three failed requests are three lines.
met=$(grep -c 'encountered error: Broker: Not leader for partition' "$tmp/produce-t3.err" || true)
[ "$met" -ge 3 ] ||
    fail "kcat met $met NOT_LEADER_FOR_PARTITION errors, not the 3 pushed with 'errors Produce 3'"

# --- the command protocol -------------------------------------------------
expect_error "down 9"
expect_error "down 0"
expect_error "up x"
expect_error "rtt 1"
expect_error "topic t4 0"
expect_error "topic bad/name 1"
expect_error "errors Produce 1 NO_SUCH_ERROR"
expect_error "errors NoSuchApi 1 REQUEST_TIMED_OUT"
expect_error "errors Produce 0 REQUEST_TIMED_OUT"
expect_error "bogus"
expect_error ""
expect_ok "rtt 2 0"
expect_ok "topic t4 8"
expect_error "topic t4 8"
"$KCAT" -L -b "$B" -t t4 >"$tmp/meta-t4" 2>&1 || fail "kcat -L -t t4: $(tail -n 3 "$tmp/meta-t4")"
grep -q 'topic "t4" with 8 partitions' "$tmp/meta-t4" ||
    fail "'topic t4 8' made: $(grep 'topic "t4"' "$tmp/meta-t4")"
expect_ok "errors EndTxn 1 CONCURRENT_TRANSACTIONS"
expect_ok "errors FindCoordinator 1 COORDINATOR_NOT_AVAILABLE"
# Leaders moved, as kcat sees them: partition 5 of t4 to each broker in turn.
for b in 1 2 3; do
    expect_ok "leader t4 5 $b"
    "$KCAT" -L -b "$B" -t t4 >"$tmp/meta-t4" 2>&1 || fail "kcat -L -t t4: $(tail -n 3 "$tmp/meta-t4")"
    grep -q "partition 5, leader $b," "$tmp/meta-t4" ||
        fail "'leader t4 5 $b' left: $(grep 'partition 5,' "$tmp/meta-t4")"
done
expect_error "leader t4 8 1"
expect_error "leader t4 5 9"
expect_error "leader bad/name 0 1"
expect_error "leader t4 x 1"
expect_ok "coordinator transaction some-shipper 2"
expect_ok "coordinator group some-group 3"
expect_error "coordinator transaction some-shipper -1"
expect_error "coordinator broker some-shipper 1"

expect_ok "quit"
wait_exit "quit"
exec 3>&-
[ ! -e "$tmp/ready" ] || fail "the ready file is still there after the mock ended"

# --- other ways to end ----------------------------------------------------
start_mock eof --brokers 1
exec 3>&-
wait_exit "the end of its input"

start_mock sigterm
expect_ok "down 2"
kill -TERM "$mock_pid"
wait_exit "SIGTERM"
exec 3>&-

if "$KAFKA_MOCK" --partitions 8 </dev/null >"$tmp/p8.out" 2>"$tmp/p8.err"; then
    fail "kafka-mock --partitions 8 started, yet librdkafka's mock cannot give auto-created topics 8 partitions"
fi
[ ! -s "$tmp/p8.out" ] || fail "kafka-mock --partitions 8 printed '$(cat "$tmp/p8.out")' on stdout"

echo "ok: kafka-mock with kcat $("$KCAT" -V 2>&1 | sed -n 's/^Version \([^ ]*\).*librdkafka \([^ ]*\).*/\1, librdkafka \2/p')"
