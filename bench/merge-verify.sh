#!/bin/bash
# What reading every record costs a merge: times `logctl merge` of the same
# sealed shards with two logctl builds side by side, interleaved in one run,
# with the shards in the page cache (the usual case: they were sealed
# recently) and, as root, cold (caches dropped before each merge).
#
#   base        --base-logctl merge           (an older build: whatever its
#                                               default check is)
#   base-verify --base-logctl merge --verify  (every record read first)
#   new         --logctl merge                (the build under test)
#
# Merge used to check a sealed shard from its two ends only, and
# --verify read every record; now it always reads every record, so "new"
# should cost what "base-verify" costs, and "new / base" is the price.
#
# Usage: bench/merge-verify.sh --base-logctl PATH [--logctl PATH]
#        [--bench PATH] [--shards N] [--shard-size SIZE] [--size SIZE]
#        [--repeat R] [--dir DIR] [--no-cold]
# The shards are laid out once by `logshard-bench --mode merge --shards`
# (byte for byte what the daemon seals) under DIR (default /var/tmp). Each
# merge writes a new output next to the spool, which is removed after it;
# the filesystem is synced (untimed) before every merge, so none pays for
# the write-back of the one before.
set -euo pipefail

logctl=build/logctl/logctl
bench=build/bench/logshard-bench
base=
shards=1000
shard_size=1M
size=1K
repeat=5
dir=/var/tmp
cold=1
while [ $# -gt 0 ]; do
    case "$1" in
    --logctl) logctl=$2; shift 2 ;;
    --base-logctl) base=$2; shift 2 ;;
    --bench) bench=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --shard-size) shard_size=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --no-cold) cold=0; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "merge-verify.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

die() { echo "merge-verify.sh: $*" >&2; exit 1; }
[ -n "$base" ] || die "--base-logctl PATH is needed (the logctl to compare with)"
logctl=$(realpath "$logctl") || die "no $logctl; build first"
base=$(realpath "$base") || die "no $base"
bench=$(realpath "$bench") || die "no $bench; build first"
if [ "$cold" = 1 ] && [ "$(id -u)" != 0 ]; then
    echo "merge-verify.sh: not root, so caches cannot be dropped: warm runs only" >&2
    cold=0
fi

work=$(mktemp -d "$dir/merge-verify.XXXXXX")
trap 'rm -rf "$work"' EXIT
spool="$work/spool"

# The bench lays the shards out and merges them once; only the layout is
# kept. It needs no daemon for --shards, but finds one to start anyway when
# asked, so --daemon points at something that exists and is never run.
"$bench" --mode merge --shards "$shards" --shard-size "$shard_size" --size "$size" \
    --repeat 1 --spool "$work" --logctl "$logctl" --daemon /bin/true --keep --json \
    >"$work/layout.json" 2>"$work/layout.err" || { cat "$work/layout.err" >&2; die "layout failed"; }
kept=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["kept"][0])' \
    "$work/layout.json")
mv "$kept/spool" "$spool"
rm -rf "$kept"
bytes=$(find "$spool/done" -type f -printf "%s\n" | awk "{ s += \$1 } END { print s }")

results="$work/results"
: >"$results"
one() { # temperature variant program [merge options...]
    local temp=$1 variant=$2 prog=$3 out="$work/out.lsm" t
    shift 3
    rm -f "$out"
    sync
    if [ "$temp" = cold ]; then
        echo 3 >/proc/sys/vm/drop_caches
    else
        cat "$spool"/done/* >/dev/null # in the page cache, as after sealing
    fi
    /usr/bin/time -o "$work/time" -f '%e %U %S' "$prog" merge --spool "$spool" --output "$out" \
        "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; die "$variant: merge failed"; }
    t=$(tail -n 1 "$work/time")
    [ "$(stat -c %s "$out")" = "$bytes" ] || die "$variant: the output is not $bytes bytes"
    echo "$temp $variant $t" >>"$results"
    rm -f "$out"
}

temps=warm
[ "$cold" = 1 ] && temps="warm cold"
for temp in $temps; do
    for ((i = 0; i < repeat; i++)); do
        one "$temp" base "$base"
        one "$temp" base-verify "$base" --verify
        one "$temp" new "$logctl"
    done
done

echo "merge of $shards sealed shards of $shard_size ($bytes bytes, records of $size)," \
    "$repeat runs each, interleaved; $(date -u +%F) on $(hostname), $(nproc) CPUs"
python3 - "$results" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    temp, variant, wall, user, sys_ = line.split()
    rows.setdefault((temp, variant), []).append((float(wall), float(user) + float(sys_)))
print("%-5s %-12s %9s %9s   %s" % ("cache", "variant", "wall s", "CPU s", "wall runs"))
for (temp, variant), v in rows.items():
    print("%-5s %-12s %9.3f %9.3f   %s" % (temp, variant,
          statistics.median(w for w, _ in v), statistics.median(c for _, c in v),
          " ".join("%.3f" % w for w, _ in v)))
for temp in ("warm", "cold"):
    if (temp, "new") not in rows:
        continue
    med = {k[1]: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in rows.items() if k[0] == temp}
    print("%s: new / base  wall %.2fx  CPU %.2fx;  base-verify / base  wall %.2fx  CPU %.2fx" % (
          temp, med["new"][0] / med["base"][0], med["new"][1] / med["base"][1],
          med["base-verify"][0] / med["base"][0], med["base-verify"][1] / med["base"][1]))
EOF
