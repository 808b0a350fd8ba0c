#!/bin/bash
# How fast logctl reads a big spool, side by side with GNU cat and grep
# reading the same records as text, in one run:
#
#   logctl cat         every record, as text            (logctl cat --spool S)
#   GNU cat            the same text from a file        (cat records.txt)
#   GNU grep -c        counting lines of that file      (grep -c xyzab records.txt)
#   logctl cat --json  every record as JSON             (logctl cat --spool S --json)
#   logctl window      one minute in the middle         (--since T --until T+1min)
#   journalctl -o json the first --journal-records records (default a million)
#                      as a journal, written once, untimed, by
#                      systemd-journal-remote: each record a MESSAGE with
#                      its receive time, producer, pid, uid and gid
#   journalctl window  one minute in the middle of that journal's span
#                      (--since T --until T+1min -o json)
#
# The spool is laid out once by `logshard-bench --mode layout` (byte for
# byte what the daemon seals), its records' receive times spread evenly
# over --span seconds, shard after shard; the text file is written once by
# `logctl cat`, untimed. Everything is read from the page cache (read once,
# untimed, before the runs), output goes to /dev/null, and the variants
# alternate within each repeat, so that the machine's noise falls on all.
# journalctl reads about a hundred times slower than the rest, so its
# journal holds a part of the records (--journal-records 0: none at all;
# systemd-journal-remote is installed with apt-get when missing).
#
# Usage: bench/read-spool.sh [--logctl PATH] [--bench PATH] [--shards N]
#        [--shard-size SIZE] [--size BYTES] [--span SECONDS] [--repeat R]
#        [--dir DIR] [--journal-records N]
# Defaults: 4096 shards of 1M (4 GiB) of 128-byte records over a day, 5
# repeats, under /var/tmp. Needs about twice the spool's size free in DIR
# and, for figures from memory, that much RAM for the page cache.
set -euo pipefail
logctl=build/logctl/logctl
bench=build/bench/logshard-bench
shards=4096
shard_size=1M
size=128
span=86400
repeat=5
dir=/var/tmp
journal_records=1000000
journal_remote=/lib/systemd/systemd-journal-remote
while [ $# -gt 0 ]; do
    case "$1" in
    --logctl) logctl=$2; shift 2 ;;
    --bench) bench=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --shard-size) shard_size=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --span) span=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --journal-records) journal_records=$2; shift 2 ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    *) echo "read-spool.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
die() { echo "read-spool.sh: $*" >&2; exit 1; }
here=$(dirname "$(realpath "$0")")
logctl=$(realpath "$logctl") || die "no $logctl; build first"
bench=$(realpath "$bench") || die "no $bench; build first"

work=$(mktemp -d "$dir/read-spool.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The layout needs no daemon; --daemon names something that exists.
spool=$("$bench" --mode layout --shards "$shards" --shard-size "$shard_size" --size "$size" \
    --span "$span" --spool "$work" --daemon /bin/true --logctl "$logctl" 2>"$work/layout.err") ||
    { cat "$work/layout.err" >&2; die "layout failed"; }
bytes=$(find "$spool/done" -type f -printf "%s\n" | awk '{ s += $1 } END { printf "%.0f", s }')
"$logctl" cat --spool "$spool" >"$work/records.txt" || die "logctl cat failed"
records=$(wc -l <"$work/records.txt")
# In the page cache, as after sealing (find: a spool may hold more shards
# than one command line takes).
find "$spool/done" -type f -exec cat {} + >/dev/null

# The minute in the middle of the span, as logctl takes times.
now=$(date +%s)
since=$((now - span / 2))
window=$(date -u -d "@$since" +%FT%TZ)
window_end=$(date -u -d "@$((since + 60))" +%FT%TZ)
window_records=$("$logctl" cat --spool "$spool" --since "$window" --until "$window_end" | wc -l)

# The journal: the first records as journal export format, written to
# journal files by systemd's own writer, the one journald uses.
if [ "$journal_records" -gt 0 ] && [ ! -x "$journal_remote" ]; then
    [ "$(id -u)" = 0 ] || die "no $journal_remote (package systemd-journal-remote); or --journal-records 0"
    echo "read-spool.sh: installing systemd-journal-remote" >&2
    apt-get install -y -q --no-install-recommends systemd-journal-remote >&2
fi
if [ "$journal_records" -gt 0 ]; then
    mkdir "$work/journal"
    # logctl ends with SIGPIPE when head has its lines.
    { "$logctl" cat --spool "$spool" --json || [ $? = 141 ]; } | head -n "$journal_records" |
        python3 "$here/journal-export.py" "$work/journal.span" |
        "$journal_remote" -o "$work/journal/bench.journal" - 2>"$work/journal-remote.err" ||
        { cat "$work/journal-remote.err" >&2; die "systemd-journal-remote failed"; }
    [ "$journal_records" -le "$records" ] || journal_records=$records
    written=$(sed -n 's/^Finishing after writing \([0-9]*\) entries$/\1/p' "$work/journal-remote.err")
    [ "$written" = "$journal_records" ] ||
        die "systemd-journal-remote wrote ${written:-no} entries of $journal_records"
    read -r journal_first journal_last <"$work/journal.span"
    journal_since=$(( (journal_first + journal_last) / 2 ))
    jwindow=$(date -u -d "@$journal_since" "+%F %T UTC")
    jwindow_end=$(date -u -d "@$((journal_since + 60))" "+%F %T UTC")
    jwindow_records=$(journalctl --file "$work/journal/*.journal" --since "$jwindow" \
        --until "$jwindow_end" -o json | wc -l)
    cat "$work"/journal/* >/dev/null
fi

results="$work/results"
: >"$results"
one() { # variant command...
    local variant=$1
    shift
    /usr/bin/time -o "$work/time" -f '%e %U %S' "$@" >/dev/null 2>"$work/err" ||
        { cat "$work/err" >&2; die "$variant failed"; }
    echo "$variant $(tail -n 1 "$work/time")" >>"$results"
}
for ((i = 0; i < repeat; i++)); do
    one "logctl-cat" "$logctl" cat --spool "$spool"
    one "gnu-cat" cat "$work/records.txt"
    # Into a file: GNU grep stops at the first match when its output is
    # /dev/null, as with -q.
    one "gnu-grep-c" sh -c 'grep -c xyzab "$1" >"$2"' sh "$work/records.txt" "$work/grep.out"
    one "logctl-json" "$logctl" cat --spool "$spool" --json
    one "logctl-window" "$logctl" cat --spool "$spool" --since "$window" --until "$window_end"
    if [ "$journal_records" -gt 0 ]; then
        one "journal-json" journalctl --file "$work/journal/*.journal" -o json
        one "journal-window" journalctl --file "$work/journal/*.journal" --since "$jwindow" \
            --until "$jwindow_end" -o json
    fi
done

echo "reading $shards sealed shards of $shard_size ($bytes bytes, $records records of $size B" \
    "over $span s; the window $window to $window_end holds $window_records), $repeat runs each," \
    "interleaved, from the page cache; $(date -u +%F) on $(hostname), $(nproc) CPUs"
[ "$journal_records" -gt 0 ] &&
    echo "the journal: $journal_records of those records in $(du -sh "$work/journal" | cut -f1)" \
        "of journal files; its window $jwindow to $jwindow_end holds $jwindow_records"
python3 - "$results" "$records" "$journal_records" <<'EOF'
import statistics, sys
records = int(sys.argv[2])
journal_records = int(sys.argv[3])
rows = {}
for line in open(sys.argv[1]):
    variant, wall, user, sys_ = line.split()
    rows.setdefault(variant, []).append((float(wall), float(user) + float(sys_)))
print("%-14s %9s %9s %14s   %s" % ("variant", "wall s", "CPU s", "records/s", "wall runs"))
for variant, v in rows.items():
    wall = statistics.median(w for w, _ in v)
    n = journal_records if variant.startswith("journal") else records
    rate = "" if variant.endswith("window") else "%.0f" % (n / wall if wall > 0 else 0)
    print("%-14s %9.3f %9.3f %14s   %s" % (variant, wall, statistics.median(c for _, c in v),
          rate, " ".join("%.3f" % w for w, _ in v)))
med = {k: statistics.median(w for w, _ in v) for k, v in rows.items()}
if med.get("gnu-cat"):
    print("logctl cat / GNU cat wall: %.2fx" % (med["logctl-cat"] / med["gnu-cat"]))
    print("logctl cat --json / GNU cat wall: %.2fx" % (med["logctl-json"] / med["gnu-cat"]))
if med.get("journal-json") and journal_records:
    print("logctl cat --json / journalctl -o json records/s: %.1fx"
          % ((records / med["logctl-json"]) / (journal_records / med["journal-json"])))
EOF
