#!/usr/bin/env bash
# compare-peers.sh: logshard side by side with rsyslog and syslog-ng, on the
# same machine, in the same run (docs/COMPARISON.md says what it measures
# and shows the results of a run).
#
# Every system gets the same records from the same number of producer
# processes; each run starts a fresh daemon in a temp directory and is timed
# end to end, from the release of the producers' start barrier until every
# record is in the output (rsyslog and syslog-ng: every byte is in the one
# file per producer; logshard: every record is acknowledged), then checked
# for completeness. The systems alternate, each workload is warmed up once
# per system and then repeated REPEAT times; medians are reported, with
# ratios, and a PNG plot of records/s against producer count is drawn.
#
# Usage (as root; installs rsyslog, syslog-ng and gnuplot from Debian when
# absent):
#   bench/compare-peers.sh            # full run, ~6 minutes on 2 cores
#   QUICK=1 bench/compare-peers.sh    # a 1/20 sized pass, one repeat
#
# Environment:
#   BUILD=DIR        meson build dir with logshardd, logshard-bench, logctl
#                    (default: build-cmp, else build, in the source tree)
#   REPEAT=R         timed runs per system and workload (default 5; QUICK: 1)
#   WORKLOADS="..."  a subset of: w1 w8 w64 w8k d1 d8 d64 s8 s64 g8
#                    (default: all), "sweep" (the producer-count sweep: 1,
#                    8, 64, 256 and 1,000 producers of 128 B records, the
#                    same records in all, without and with sync), and/or
#                    workloads of your own written
#                    P:S:N:MODE, e.g. 16:512:100000:nosync,
#                    32:128:3000:durable or 1000:128:2000:syslog (P
#                    producers, S-byte records with S from 64 to 65536, N per
#                    producer; MODE nosync or durable: logshard through
#                    liblogshard; syslog: every system, logshard too, fed
#                    the same lines by peer-load, as in s8)
#   N_W1 N_W8 N_W64 N_W8K N_D1 N_D8 N_D64 N_S8 N_S64 N_G8
#                    records per producer of each workload (see below)
#   FLUSH_EVERY=K    logshard's flush cadence in the durable workloads (64)
#   TMPBASE=DIR      where the temp directory goes (default /var/tmp, not
#                    /tmp: that may be tmpfs, where syncs cost nothing)
#   PEER_CACHE=DIR   private root of the peer that cannot be installed next
#                    to the other (default /var/cache/logshard-compare-peers)
#   PLOT=FILE.png    the plot (default docs/compare-peers-<date>.png; QUICK:
#                    no plot unless PLOT is set; PLOT= for none)
#   SYSTEMS="..."    the systems to run, of logshard rsyslog syslog-ng (default:
#                    all three; syslog-ng's unix-stream takes 256 connections
#                    by default, too few for 1,000 producers)
#   RESULTS=FILE     also write every run as a TSV line to FILE
#   TIMEOUT=SECONDS  limit for one run (default 600)
#   LOGSHARD_REV=REV what to call the logshard source in the report and the
#                    plot (default: git describe of the build's source tree)
#   DROP_CACHES=0|1  1: after writing back what the last run left (always
#                    done), drop the page cache before every run (default 0;
#                    see settle())
#   DAEMON_SESSION=own|shared
#                    own (default): every daemon, the peers too, runs in a
#                    session of its own, as systemd starts a service; shared:
#                    in this script's session, with the producers (where the
#                    kernel shares the CPU between sessions, see autogroup in
#                    sched(7), this weighs the daemon against each producer
#                    rather than against all of them)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/.." && pwd) # bench/ is one level down
QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
    REPEAT=${REPEAT:-1}
    SCALE=20
    PLOT=${PLOT-}
else
    REPEAT=${REPEAT:-5}
    SCALE=1
    PLOT=${PLOT-$SRC/docs/compare-peers-$(date +%Y-%m-%d).png}
fi
TMPBASE=${TMPBASE:-/var/tmp}
PEER_CACHE=${PEER_CACHE:-/var/cache/logshard-compare-peers}
FLUSH_EVERY=${FLUSH_EVERY:-64}
DAEMON_SESSION=${DAEMON_SESSION:-own}
case $DAEMON_SESSION in
    own) SESSION=(setsid) BENCH_SESSION=() ;;
    shared) SESSION=() BENCH_SESSION=(--shared-session) ;;
    *) echo "compare-peers: DAEMON_SESSION=$DAEMON_SESSION: own or shared" >&2; exit 2 ;;
esac
TIMEOUT=${TIMEOUT:-600}
RESULTS=${RESULTS:-}
read -r -a SYSTEMS <<< "${SYSTEMS:-logshard rsyslog syslog-ng}"
for s in "${SYSTEMS[@]}"; do
    [[ $s == logshard || $s == rsyslog || $s == syslog-ng ]] || {
        echo "compare-peers: SYSTEMS: unknown system '$s' (logshard, rsyslog, syslog-ng)" >&2
        exit 2
    }
done

# The workloads: id, producers, record bytes, records per producer, mode.
# nosync: nobody syncs (logshard --fsync none, one flush at the end);
# durable: logshard --fsync batch, every producer flushing every FLUSH_EVERY
# records and waiting for the ack; rsyslog omfile sync="on"; syslog-ng
# fsync(yes). Counts are sized so that the slowest system takes a few seconds
# (up to ~12) per run on a 2-core machine; the fastest then takes far less
# (down to ~0.3 s in the durable ones, where rsyslog syncs every 4 KiB).
# syslog: no sync, and logshard too receives the peers' syslog lines, on its
# syslog stream socket (--syslog-stream-socket) from peer-load, so that all
# three get the same bytes from the same program; dgram: the same, one
# datagram per line, on logshard's syslog datagram socket (--syslog-socket),
# rsyslog's imuxsock and syslog-ng's unix-dgram.
declare -A WL_P WL_S WL_N WL_MODE WL_LABEL
ALL_WORKLOADS=(w1 w8 w64 w8k d1 d8 d64 s8 s64 g8)
def() { WL_P[$1]=$2; WL_S[$1]=$3; WL_N[$1]=$(( $4 / SCALE )); WL_MODE[$1]=$5; WL_LABEL[$1]=$6; }
def w1  1  128  "${N_W1:-1000000}" nosync  "1 x 128 B, no sync"
def w8  8  128  "${N_W8:-250000}"  nosync  "8 x 128 B, no sync"
def w64 64 128  "${N_W64:-31250}"  nosync  "64 x 128 B, no sync"
def w8k 8  1024 "${N_W8K:-100000}" nosync  "8 x 1 KiB, no sync"
def d1  1  128  "${N_D1:-40000}"   durable "1 x 128 B, durable"
def d8  8  128  "${N_D8:-15360}"   durable "8 x 128 B, durable"
def d64 64 128  "${N_D64:-1920}"   durable "64 x 128 B, durable"
def s8  8  128  "${N_S8:-250000}"  syslog  "8 x 128 B syslog stream, no sync"
def s64 64 128  "${N_S64:-31250}"  syslog  "64 x 128 B syslog stream, no sync"
def g8  8  128  "${N_G8:-50000}"   dgram   "8 x 128 B syslog datagrams, no sync"
# The sweep: the same 2,000,000 records (no sync) and 64,000 (durable,
# every producer flushing at least once) spread over more and more
# producers, so that records/s compare across producer counts.
SWEEP_COUNTS=(1 8 64 256 1000)
sweep_workloads() {
    local p
    for p in "${SWEEP_COUNTS[@]}"; do printf '%s ' "$p:128:$(( 2000000 / p )):nosync"; done
    for p in "${SWEEP_COUNTS[@]}"; do printf '%s ' "$p:128:$(( 64000 / p )):durable"; done
}
WORKLOADS=${WORKLOADS:-${ALL_WORKLOADS[*]}}
WORKLOADS=${WORKLOADS//sweep/$(sweep_workloads)}
read -r -a WORKLOAD_LIST <<< "$WORKLOADS"
for w in "${WORKLOAD_LIST[@]}"; do
    if [[ $w =~ ^([0-9]+):([0-9]+):([0-9]+):(nosync|durable|syslog)$ ]] && [[ -z ${WL_P[$w]:-} ]]; then
        p=$((10#${BASH_REMATCH[1]})) s=$((10#${BASH_REMATCH[2]})) n=$((10#${BASH_REMATCH[3]}))
        # 64 B holds the syslog header and sequence number every peer
        # record carries; the peers' message size limits are raised to fit
        # the record (peer_max_message), up to 64 KiB.
        (( p >= 1 && n >= 1 && s >= 64 && s <= 65536 )) || {
            echo "compare-peers: workload '$w': P and N must be at least 1, S from 64 to 65536" >&2
            exit 2
        }
        mode=${BASH_REMATCH[4]}
        case $mode in
            durable) label="$p x $s B, durable" ;;
            syslog) label="$p x $s B syslog stream, no sync" ;;
            *) label="$p x $s B, no sync" ;;
        esac
        def "$w" "$p" "$s" "$n" "$mode" "$label"
    fi
    [[ -n ${WL_P[$w]:-} ]] || {
        echo "compare-peers: unknown workload '$w' (one of ${ALL_WORKLOADS[*]}, or P:S:N:MODE)" >&2
        exit 2
    }
    (( WL_N[$w] >= FLUSH_EVERY )) || WL_N[$w]=$FLUSH_EVERY
done

say() { printf '%s\n' "$*" >&2; }
die() { say "compare-peers: $*"; exit 1; }

[[ $(id -u) == 0 ]] || die "run as root (it installs packages and starts daemons)"

# ---- temp directory and cleanup ----------------------------------------
WORK=
DAEMON_PID=
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n $DAEMON_PID ]] && kill -0 "$DAEMON_PID" 2>/dev/null; then
        kill -TERM "$DAEMON_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$DAEMON_PID" 2>/dev/null || true
        wait "$DAEMON_PID" 2>/dev/null || true
    fi
    [[ -n $WORK && -d $WORK ]] && rm -rf -- "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$TMPBASE"
WORK=$(mktemp -d "$TMPBASE/compare-peers.XXXXXX")
# The top of a directory tree for ext4's inode allocator (chattr +T): each
# run's directory goes to a block group of its own choosing, not next to
# the files the last runs removed (see settle()). Elsewhere a no-op.
chattr +T "$WORK" 2>/dev/null || true

# ---- the peers: installed, or unpacked into a private root --------------
export DEBIAN_FRONTEND=noninteractive
APT_UPDATED=0
apt_update() { [[ $APT_UPDATED == 1 ]] || { apt-get update -qq >&2; APT_UPDATED=1; }; }
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
MA=$(gcc -print-multiarch 2>/dev/null || true)
MA=${MA:-$(uname -m)-linux-gnu}

# Unpacks PKG and those of its dependencies (recursively) that are not
# installed into $PEER_CACHE/<PKG>/root: apt-get download + dpkg-deb -x.
private_root() {
    local pkg=$1 dir=$PEER_CACHE/$1 ver
    ver=$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2}')
    if [[ -z $ver || $ver == "(none)" ]]; then
        apt_update
        ver=$(apt-cache policy "$pkg" | awk '/Candidate:/ {print $2}')
    fi
    if [[ -f $dir/.done && $(cat "$dir/.done") == "$ver" ]]; then
        echo "$dir/root"
        return
    fi
    say "compare-peers: unpacking $pkg $ver and its missing dependencies into $dir"
    rm -rf "$dir"
    mkdir -p "$dir/debs" "$dir/root"
    local -A seen=()
    local queue=("$pkg") next deb dep alt name ok
    while ((${#queue[@]})); do
        next=()
        for name in "${queue[@]}"; do
            [[ -n ${seen[$name]:-} ]] && continue
            seen[$name]=1
            (cd "$dir/debs" && apt-get download -q "$name" >&2 2>/dev/null) ||
                { say "compare-peers: cannot download $name (virtual?), skipped"; continue; }
            deb=$(ls "$dir/debs/${name}_"*.deb | head -1)
            while IFS= read -r dep; do
                ok=0
                IFS='|' read -r -a alts <<< "$dep"
                for alt in "${alts[@]}"; do
                    alt=$(sed -e 's/(.*)//' -e 's/:any//' -e 's/[[:space:]]//g' <<< "$alt")
                    [[ -n $alt ]] && installed "$alt" && ok=1
                done
                if [[ $ok == 0 ]]; then
                    alt=$(sed -e 's/|.*//' -e 's/(.*)//' -e 's/:any//' -e 's/[[:space:]]//g' <<< "$dep")
                    [[ -n $alt ]] && next+=("$alt")
                fi
            done < <(dpkg-deb -f "$deb" Depends Pre-Depends | sed -e 's/^[A-Za-z-]*: //' | tr ',' '\n')
        done
        queue=("${next[@]+"${next[@]}"}")
    done
    for deb in "$dir"/debs/*.deb; do dpkg-deb -x "$deb" "$dir/root"; done
    echo "$ver" > "$dir/.done"
    echo "$dir/root"
}

RSYSLOGD= RSYSLOG_ARGS=() RSYSLOG_ENV=()
SYSLOGNG= SYSLOGNG_ARGS=() SYSLOGNG_ENV=()
libpath() { local r=$1; echo "$r/usr/lib/$MA:$r/lib/$MA:$r/usr/lib/syslog-ng:$r/usr/lib/$MA/rsyslog"; }
setup_peers() {
    local root moddir
    # The two conflict: whichever is installed stays; the other is unpacked.
    if ! command -v rsyslogd >/dev/null && ! installed syslog-ng-core; then
        apt_update
        say "compare-peers: installing rsyslog"
        apt-get install -y -q --no-install-recommends rsyslog >&2
    fi
    if command -v rsyslogd >/dev/null; then
        RSYSLOGD=$(command -v rsyslogd)
    else
        root=$(private_root rsyslog)
        RSYSLOGD=$root/usr/sbin/rsyslogd
        RSYSLOG_ENV=("LD_LIBRARY_PATH=$(libpath "$root")")
        RSYSLOG_ARGS=(-M "$root/usr/lib/$MA/rsyslog")
    fi
    if command -v syslog-ng >/dev/null; then
        SYSLOGNG=$(command -v syslog-ng)
    else
        root=$(private_root syslog-ng-core)
        SYSLOGNG=$root/usr/sbin/syslog-ng
        moddir=$(ls -d "$root"/usr/lib/syslog-ng/[0-9]* | head -1)
        SYSLOGNG_ENV=("LD_LIBRARY_PATH=$(libpath "$root")")
        SYSLOGNG_ARGS=(--module-path "$moddir")
    fi
    if [[ -n $PLOT ]] && ! command -v gnuplot >/dev/null; then
        apt_update
        say "compare-peers: installing gnuplot-nox"
        apt-get install -y -q --no-install-recommends gnuplot-nox >&2
    fi
}
setup_peers
RSYSLOG_VERSION=$(env "${RSYSLOG_ENV[@]}" "$RSYSLOGD" -v | awk 'NR==1 {print $2}')
SYSLOGNG_VERSION=$(env "${SYSLOGNG_ENV[@]}" "$SYSLOGNG" --version | sed -n 's/^Installer-Version: *//p')
SYSLOGNG_CONFVER=$(cut -d. -f1,2 <<< "$SYSLOGNG_VERSION")

# ---- logshard and the load generator ------------------------------------
if [[ -z ${BUILD:-} ]]; then
    for b in "$SRC/build-cmp" "$SRC/build"; do
        [[ -x $b/bench/logshard-bench ]] && { BUILD=$b; break; }
    done
fi
[[ -n ${BUILD:-} ]] || die "no build found: meson setup build-cmp -Dtests=false && ninja -C build-cmp (or set BUILD)"
BENCH=$BUILD/bench/logshard-bench
LOGSHARDD=$BUILD/daemon/logshardd
LOGCTL=$BUILD/logctl/logctl
for f in "$BENCH" "$LOGSHARDD" "$LOGCTL"; do [[ -x $f ]] || die "$f is missing: build first"; done
PEER_LOAD=$BUILD/bench/peer-load
if [[ ! -x $PEER_LOAD || $HERE/peer-load.c -nt $PEER_LOAD ]]; then
    # A build with -Dtests=false has no tests/ directory: build it here.
    PEER_LOAD=$WORK/peer-load
    ${CC:-cc} -std=gnu11 -O2 -D_GNU_SOURCE -o "$PEER_LOAD" "$HERE/peer-load.c" ||
        die "cannot build peer-load"
fi
LOGSHARD_VERSION=$("$BENCH" --version | awk '{print $NF}')
# Which source the build came from, when it is a git checkout.
LOGSHARD_REV=${LOGSHARD_REV:-$(git -C "$(dirname "$(readlink -f "$BUILD")")" describe --always --dirty 2>/dev/null || echo "not a git tree")}

CLK_TCK=$(getconf CLK_TCK)
# utime + stime of a running process, in seconds (all threads).
proc_cpu_s() { sed 's/.*) //' "/proc/$1/stat" | awk -v t="$CLK_TCK" '{printf "%.2f", ($12 + $13) / t}'; }
# VmHWM of a running process, in MiB.
proc_hwm_mib() { awk '/^VmHWM:/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }

stop_daemon() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        say "compare-peers: daemon $pid ignored SIGTERM for 30 s, killed"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    DAEMON_PID=
}

# Line length of each peer's output lines, per workload, learnt in the
# warm-up run (0: unknown, peer-load then counts newlines).
declare -A LINE_BYTES

# run_peer SYSTEM WORKLOAD N: sets R_RPS R_EL R_CPU R_RSS (records/s, elapsed
# seconds, the daemon's CPU seconds and peak RSS in MiB). Not in a subshell:
# DAEMON_PID and LINE_BYTES must stay set.
# A peer's largest message in bytes for S-byte records: the record and 1 KiB
# for the syslog header, or the peer's DEFAULT when that is larger.
peer_max_message() { local need=$(( $1 + 1024 )); echo $(( need > $2 ? need : $2 )); }
run_peer() {
    local sys=$1 w=$2 n=$3 p=${WL_P[$w]} s=${WL_S[$w]} mode=${WL_MODE[$w]}
    local d conf out lb key=$1/$2 i input dgram=()
    [[ $mode == dgram ]] && dgram=(--datagram)
    d=$(mktemp -d "$WORK/$sys.XXXXXX")
    mkdir -p "$d/out" "$d/work"
    # Every daemon starts as from a login shell, with every signal at its
    # default: this script cannot undo a SIG_IGN it inherited, and its own
    # background commands have SIGINT and SIGQUIT ignored. logshardd gets the
    # same from logshard-bench, which resets the dispositions and the mask in
    # the child before it runs the daemon.
    if [[ $sys == rsyslog ]]; then
        conf=$d/rsyslog.conf
        if [[ $mode == dgram ]]; then
            input="module(load=\"imuxsock\" SysSock.Use=\"off\")\ninput(type=\"imuxsock\" Socket=\"$d/sock\" RateLimit.Interval=\"0\" ruleset=\"bench\")"
        else
            input="module(load=\"imptcp\")\ninput(type=\"imptcp\" path=\"$d/sock\" unlink=\"on\" ruleset=\"bench\")"
        fi
        sed -e "s|^@INPUT@\$|$input|" \
            -e "s|@WORKDIR@|$d/work|g" -e "s|@SOCKET@|$d/sock|g" -e "s|@OUTDIR@|$d/out|g" \
            -e "s|@CACHE@|$(( p > 10 ? p : 10 ))|g" \
            -e "s|@MAXMSG@|$(peer_max_message "$s" 8192)|g" \
            -e "s|@SYNC@|$([[ $mode == durable ]] && echo on || echo off)|g" \
            "$HERE/rsyslog.conf.in" > "$conf"
        env --default-signal "${RSYSLOG_ENV[@]}" "${SESSION[@]}" "$RSYSLOGD" -n -f "$conf" -i "$d/pid" \
            "${RSYSLOG_ARGS[@]}" > "$d/daemon.log" 2>&1 &
    else
        conf=$d/syslog-ng.conf
        sed -e "s|@VERSION@|$SYSLOGNG_CONFVER|g" -e "s|@SOCKET@|$d/sock|g" -e "s|@OUTDIR@|$d/out|g" \
            -e "s|@SOURCE@|$([[ $mode == dgram ]] && echo unix-dgram || echo unix-stream)|g" \
            -e "s|@FSYNC@|$([[ $mode == durable ]] && echo yes || echo no)|g" \
            -e "s|@MAXMSG@|$(peer_max_message "$s" 65536)|g" \
            "$HERE/syslog-ng.conf.in" > "$conf"
        env --default-signal "${SYSLOGNG_ENV[@]}" "${SESSION[@]}" "$SYSLOGNG" -F -f "$conf" -p "$d/pid" \
            -R "$d/persist" -c "$d/ctl" "${SYSLOGNG_ARGS[@]}" > "$d/daemon.log" 2>&1 &
    fi
    DAEMON_PID=$!
    for i in $(seq 300); do
        [[ -S $d/sock ]] && break
        kill -0 "$DAEMON_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [[ ! -S $d/sock ]]; then
        cat "$d/daemon.log" >&2
        die "$sys did not create its socket"
    fi
    lb=${LINE_BYTES[$key]:-0}
    if ! out=$("$PEER_LOAD" --socket "$d/sock" "${dgram[@]}" --producers "$p" --records "$n" \
                 --size "$s" --out-dir "$d/out" --line-bytes "$lb" --timeout "$TIMEOUT"); then
        say "compare-peers: $sys, ${WL_LABEL[$w]}: run failed or incomplete; daemon log:"
        tail -20 "$d/daemon.log" >&2
        die "$sys failed"
    fi
    local cpu rss
    cpu=$(proc_cpu_s "$DAEMON_PID")
    rss=$(proc_hwm_mib "$DAEMON_PID")
    stop_daemon "$DAEMON_PID"
    local kv
    for kv in $out; do
        case $kv in
            records_per_s=*) R_RPS=${kv#*=} ;;
            elapsed_s=*) R_EL=${kv#*=} ;;
            line_bytes=*) LINE_BYTES[$key]=${kv#*=} ;;
        esac
    done
    R_CPU=$cpu R_RSS=$rss R_ACK99=nan R_FDS99=nan R_FDSX99=nan
    rm -rf -- "$d"
}

json_get() { grep -o "\"$1\":[^,}]*" <<< "$2" | head -1 | cut -d: -f2 | tr -d '"'; }

# run_logshard WORKLOAD N: sets R_RPS R_EL R_CPU R_RSS, as run_peer, and
# R_ACK99 R_FDS99: the p99 of logshard_flush() and of this machine's 4 KiB
# append + fdatasync, in microseconds, as logshard-bench measured them.
run_logshard() {
    local w=$1 n=$2 p=${WL_P[$w]} s=${WL_S[$w]} mode=${WL_MODE[$w]}
    local fs fe json kept i cnt
    if [[ $mode == durable ]]; then fs=batch fe=$FLUSH_EVERY; else fs=none fe=0; fi
    if ! json=$("$BENCH" "${BENCH_SESSION[@]+"${BENCH_SESSION[@]}"}" --daemon "$LOGSHARDD" --producers "$p" --records "$n" --size "$s" \
                  --fsync "$fs" --flush-every "$fe" --spool "$WORK" --keep --json \
                  --timeout "$TIMEOUT"); then
        die "logshard-bench failed (${WL_LABEL[$w]})"
    fi
    kept=$(grep -o '"kept":\["[^"]*"' <<< "$json" | sed 's/.*\["//; s/"$//')
    [[ -n $kept && -d $kept ]] || die "logshard-bench kept no directory"
    [[ $(json_get records "$json") == $((p * n)) ]] || die "logshard: not every record acknowledged"
    [[ $(json_get daemon_records "$json") == $((p * n)) ]] || die "logshard: the daemon counted $(json_get daemon_records "$json") records, not $((p * n))"
    # Completeness from the sealed shards themselves: N records per producer.
    [[ -z $(ls -A "$kept/spool/active" 2>/dev/null) ]] || die "logshard: unsealed shards left in $kept/spool/active"
    for ((i = 0; i < p; i++)); do
        cnt=$("$LOGCTL" cat "$kept"/spool/done/bench-"$i".*.shard | wc -l)
        [[ $cnt == "$n" ]] || die "logshard: producer bench-$i has $cnt records in its shards, not $n"
    done
    rm -rf -- "$kept"
    R_RPS=$(json_get records_per_s "$json")
    R_EL=$(json_get elapsed_s "$json")
    R_CPU=$(json_get daemon_cpu_s "$json")
    R_RSS=$(json_get daemon_peak_rss_mib "$json" | awk '{printf "%.1f", $1}')
    R_ACK99=$(json_get ack_p99_us "$json")
    R_FDS99=$(json_get fdatasync_p99_us "$json")
    R_FDSX99=$(json_get fdatasync_concurrent_p99_us "$json")
}

# run_logshard_syslog WORKLOAD N: logshard's syslog inputs under peer-load,
# as the peers are run; sets what run_peer sets. The clock stops when the
# daemon's status says every record is stored and none waits to be written;
# the check is logctl cat's: N lines per producer, each sequence number once.
run_logshard_syslog() {
    local w=$1 n=$2 p=${WL_P[$w]} s=${WL_S[$w]} mode=${WL_MODE[$w]}
    local d out input=(--syslog-stream-socket) dgram=() i cpu rss bad
    d=$(mktemp -d "$WORK/logshard-syslog.XXXXXX")
    if [[ $mode == dgram ]]; then input=(--syslog-socket) dgram=(--datagram); fi
    env --default-signal "${SESSION[@]}" "$LOGSHARDD" --config /dev/null --spool "$d/spool" --socket "$d/producers.sock" \
        --admin-socket "$d/admin.sock" --fsync none "${input[@]}" "$d/sock" \
        > "$d/daemon.log" 2>&1 &
    DAEMON_PID=$!
    for i in $(seq 300); do
        [[ -S $d/sock && -S $d/admin.sock ]] && break
        kill -0 "$DAEMON_PID" 2>/dev/null || break
        sleep 0.1
    done
    [[ -S $d/sock ]] || { cat "$d/daemon.log" >&2; die "logshardd did not create its syslog socket"; }
    if ! out=$("$PEER_LOAD" --socket "$d/sock" "${dgram[@]}" --producers "$p" --records "$n" \
                 --size "$s" --admin-socket "$d/admin.sock" --timeout "$TIMEOUT"); then
        tail -20 "$d/daemon.log" >&2
        die "logshard (syslog input) failed (${WL_LABEL[$w]})"
    fi
    cpu=$(proc_cpu_s "$DAEMON_PID")
    rss=$(proc_hwm_mib "$DAEMON_PID")
    stop_daemon "$DAEMON_PID"
    bad=$("$LOGCTL" cat --spool "$d/spool" | awk -v p="$p" -v n="$n" '
        { if (match($0, / p[0-9][0-9][0-9][0-9]: [0-9]+ /)) {
              k = substr($0, RSTART + 1, RLENGTH - 2)
              if (seen[k]++) dup++
              cnt[substr(k, 1, 5)]++
          } else foreign++ }
        END { for (i = 0; i < p; i++) { t = sprintf("p%04d", i); if (cnt[t] != n) short++ }
              if (dup + foreign + short) printf "%d twice, %d without a tag, %d producers short", dup, foreign, short }')
    [[ -z $bad ]] || die "logshard (syslog input): $bad"
    for kv in $out; do
        case $kv in
            records_per_s=*) R_RPS=${kv#*=} ;;
            elapsed_s=*) R_EL=${kv#*=} ;;
        esac
    done
    R_CPU=$cpu R_RSS=$rss R_ACK99=nan R_FDS99=nan R_FDSX99=nan
    rm -rf -- "$d"
}

# settle: what the last run left must not be timed in this one: its dirty
# pages are written back here, not in the middle of the next run, and with
# DROP_CACHES the page cache is dropped. On an ext4 without a journal, every
# file created walks past each inode deleted in the last minute (six while
# its inode table block is dirty) whose block is still cached
# (recently_deleted() in the kernel): a run of 1,000 producers leaves 1,000
# shard files behind, removed with the run, and the next run's creates paid
# for them (daemon CPU 1.28 s instead of 0.39 s, docs/BENCHMARKS.md). WORK's
# +T attribute (above) ends most of that. Dropping the cache would end a
# little more (a dropped block is read again by the first create near it),
# but on this kind of virtual machine it makes every run write into fresh
# page cache, which costs the runs that write most (8 x 1 KiB) a tenth: off
# by default.
DROP_CACHES=${DROP_CACHES:-0}
settle() {
    sync
    if [[ $DROP_CACHES == 1 ]]; then echo 1 > /proc/sys/vm/drop_caches; fi
}

run_one() { # SYSTEM WORKLOAD N
    settle
    if [[ $1 != logshard ]]; then
        run_peer "$@"
    elif [[ ${WL_MODE[$2]} == syslog || ${WL_MODE[$2]} == dgram ]]; then
        run_logshard_syslog "$2" "$3"
    else
        run_logshard "$2" "$3"
    fi
}

# ---- the runs -----------------------------------------------------------
ROWS=$WORK/results.tsv
: > "$ROWS"
CPU_MODEL=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
FS_TYPE=$(findmnt -n -o FSTYPE -T "$WORK" 2>/dev/null || stat -f -c %T "$WORK")
START_DATE=$(date +%Y-%m-%d)
say "compare-peers: logshard $LOGSHARD_VERSION ($BUILD, source $LOGSHARD_REV), rsyslog $RSYSLOG_VERSION ($RSYSLOGD), syslog-ng $SYSLOGNG_VERSION ($SYSLOGNG)"
say "compare-peers: $(hostname), $(nproc) CPUs ($CPU_MODEL), Linux $(uname -r), temp dir on $FS_TYPE, $REPEAT repeat(s)"
say "compare-peers: before every run: sync$([[ $DROP_CACHES == 1 ]] && echo ', page cache dropped' || echo ', page cache kept (DROP_CACHES=0)')"
say "compare-peers: net.unix.max_dgram_qlen $(cat /proc/sys/net/unix/max_dgram_qlen 2>/dev/null || echo unknown) (the queue of a datagram socket; systemd sets 512)"
t_start=$(date +%s)
for w in "${WORKLOAD_LIST[@]}"; do
    n=${WL_N[$w]}
    say "== ${WL_LABEL[$w]}: ${WL_P[$w]} producers x $n records x ${WL_S[$w]} B"
    # Warm-up: a quarter of the records, once per system, not counted. It
    # also tells the length of the peers' output lines.
    for sys in "${SYSTEMS[@]}"; do
        run_one "$sys" "$w" $(( n / 4 > FLUSH_EVERY ? n / 4 : FLUSH_EVERY ))
    done
    for ((r = 1; r <= REPEAT; r++)); do
        # Rotate the order every repeat: no system always goes first.
        for ((k = 0; k < ${#SYSTEMS[@]}; k++)); do
            sys=${SYSTEMS[$(( (k + r - 1) % ${#SYSTEMS[@]} ))]}
            run_one "$sys" "$w" "$n"
            printf '%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n' "$w" "$sys" "$r" "$R_RPS" "$R_EL" \
                "$R_CPU" "$R_RSS" "${WL_P[$w]}" "${WL_S[$w]}" "$R_ACK99" "$R_FDS99" "$R_FDSX99" >> "$ROWS"
            say "   $(printf '%-9s run %d: %10.0f records/s  %7.3f s  daemon CPU %6.2f s  peak RSS %7.1f MiB' \
                "$sys" "$r" "$R_RPS" "$R_EL" "$R_CPU" "$R_RSS")"
        done
    done
done
t_total=$(( $(date +%s) - t_start ))
[[ -n $RESULTS ]] && { printf 'workload\tsystem\trun\trecords_per_s\telapsed_s\tdaemon_cpu_s\tpeak_rss_mib\tproducers\trecord_bytes\tack_p99_us\tfdatasync_p99_us\tfdatasync_concurrent_p99_us\n'; cat "$ROWS"; } > "$RESULTS"

# ---- medians, ratios ----------------------------------------------------
# median WORKLOAD SYSTEM COLUMN (4 records/s, 5 elapsed, 6 CPU, 7 RSS,
# 10 ack p99, 11 fdatasync p99, 12 fdatasync p99 with P concurrent writers)
median() {
    awk -F'\t' -v w="$1" -v s="$2" -v c="$3" '$1 == w && $2 == s && $c != "nan" {print $c}' "$ROWS" | sort -g |
        awk '{v[NR] = $1} END {if (!NR) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
                               else printf "%.6f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
declare -A MED
for w in "${WORKLOAD_LIST[@]}"; do
    for sys in "${SYSTEMS[@]}"; do
        for c in 4 5 6 7 10 11 12; do MED[$w/$sys/$c]=$(median "$w" "$sys" "$c"); done
    done
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}'; }
# CPU seconds per GiB of records ingested.
cpu_per_gib() { awk -v c="$2" -v p="${WL_P[$1]}" -v n="${WL_N[$1]}" -v s="${WL_S[$1]}" \
                    'BEGIN {printf "%.2f", c / (p * n * s / 1073741824)}'; }
target() {
    case $1 in
        w8|w64) echo "rsyslog >= 2" ;;
        s8|s64) echo "rsyslog >= 3 (issue 17)" ;;
        g8) echo "rsyslog >= 2 (issue 17)" ;;
        w8k) echo "rsyslog >= 1.5" ;;
        d8) echo "both >= 4" ;;
        *) echo "-" ;;
    esac
}

echo
echo "Medians of $REPEAT run(s) each, $(hostname), $START_DATE, $(nproc) CPUs, total ${t_total} s:"
echo
echo "| workload | system | records/s | elapsed s | daemon CPU s | CPU s/GiB | peak RSS MiB |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
for w in "${WORKLOAD_LIST[@]}"; do
    for sys in "${SYSTEMS[@]}"; do
        printf '| %s | %s | %.0f | %.3f | %.2f | %s | %.1f |\n' "${WL_LABEL[$w]}" "$sys" \
            "${MED[$w/$sys/4]}" "${MED[$w/$sys/5]}" "${MED[$w/$sys/6]}" \
            "$(cpu_per_gib "$w" "${MED[$w/$sys/6]}")" "${MED[$w/$sys/7]}"
    done
done
echo
echo "Ratios of the medians (records/s; CPU s/GiB and peak RSS: logshard / peer):"
echo
echo "| workload | logshard / rsyslog | logshard / syslog-ng | target | CPU/GiB vs rsyslog | RSS vs syslog-ng |"
echo "| --- | ---: | ---: | --- | ---: | ---: |"
for w in "${WORKLOAD_LIST[@]}"; do
    printf '| %s | %s | %s | %s | %s | %s |\n' "${WL_LABEL[$w]}" \
        "$(ratio "${MED[$w/logshard/4]:-}" "${MED[$w/rsyslog/4]:-}")" \
        "$(ratio "${MED[$w/logshard/4]:-}" "${MED[$w/syslog-ng/4]:-}")" "$(target "$w")" \
        "$(ratio "${MED[$w/logshard/6]:-}" "${MED[$w/rsyslog/6]:-}")" \
        "$(ratio "${MED[$w/logshard/7]:-}" "${MED[$w/syslog-ng/7]:-}")"
done

echo
echo "logshard's acknowledgement latency (logshard-bench: p99 of logshard_flush(), and of a"
echo "4 KiB append + fdatasync on the same file system right after the run, alone and"
echo "with as many concurrent writers as producers, each appending one flush; medians):"
echo
echo "| workload | ack p99 us | fdatasync p99 us | ratio (target <= 2 with fsync=batch) | fdatasync xP p99 us | ack / xP ratio |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for w in "${WORKLOAD_LIST[@]}"; do
    [[ ${WL_MODE[$w]} == durable ]] || continue
    printf '| %s | %.0f | %.0f | %s | %.0f | %s |\n' "${WL_LABEL[$w]}" "${MED[$w/logshard/10]}" \
        "${MED[$w/logshard/11]}" "$(ratio "${MED[$w/logshard/10]}" "${MED[$w/logshard/11]}")" \
        "${MED[$w/logshard/12]}" "$(ratio "${MED[$w/logshard/10]}" "${MED[$w/logshard/12]}")"
done

# ---- the plot -----------------------------------------------------------
if [[ -n $PLOT ]]; then
    dat=$WORK/plot.dat
    {
        echo "# producers logshard rsyslog syslog-ng (no sync), then the same durable"
        for p in 1 8 64; do
            line="$p"
            for mode in w d; do
                wl=$mode$p
                for sys in "${SYSTEMS[@]}"; do
                    v=${MED[$wl/$sys/4]:-nan}
                    line="$line ${v:-nan}"
                done
            done
            echo "$line"
        done
    } > "$dat"
    title="logshard $LOGSHARD_VERSION ($LOGSHARD_REV) vs rsyslog $RSYSLOG_VERSION vs syslog-ng $SYSLOGNG_VERSION, 128-byte records, median of $REPEAT\\n$START_DATE on $(hostname): $(nproc) CPUs, $CPU_MODEL, Linux $(uname -r), $FS_TYPE"
    mkdir -p "$(dirname "$PLOT")"
    gnuplot <<EOF
set terminal pngcairo size 1000,760 font ",10"
set output "$PLOT"
set title "$title"
set xlabel "producer processes"
set ylabel "records/s (end to end)"
set logscale xy
set xtics ("1" 1, "8" 8, "64" 64)
set xrange [0.8:80]
set format y "%.0s%c"
set grid
set key below maxrows 3 spacing 1.2
set bmargin 9
set datafile missing "nan"
plot "$dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "logshard, fsync=none", \
     "" using 1:3 with linespoints lw 2 pt 5 lc rgb "#d62728" title "rsyslog, sync off", \
     "" using 1:4 with linespoints lw 2 pt 9 lc rgb "#2ca02c" title "syslog-ng, fsync(no)", \
     "" using 1:5 with linespoints lw 2 dt 2 pt 6 lc rgb "#1f77b4" title "logshard, fsync=batch, ack every $FLUSH_EVERY", \
     "" using 1:6 with linespoints lw 2 dt 2 pt 4 lc rgb "#d62728" title "rsyslog, sync=\"on\"", \
     "" using 1:7 with linespoints lw 2 dt 2 pt 8 lc rgb "#2ca02c" title "syslog-ng, fsync(yes)"
EOF
    echo
    echo "Plot: $PLOT"
fi
