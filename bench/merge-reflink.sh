#!/bin/bash
# Times `logctl merge` of the same sealed shards on XFS with reflink=1 and on
# ext4, each on a loop device made here, and checks that the merged file on
# XFS shares its extents with the shards (xfs_bmap -v, shared-extent flag).
#
# Sealed shards are padded to the filesystem block size (docs/FORMAT.md), so
# every shard sits block-aligned in the merged file and copy_file_range can
# remap the shard's extents instead of copying its bytes.
#
# Usage (as root): bench/merge-reflink.sh [--build DIR] [--shards N]
#                  [--shard-size SIZE] [--repeat R]
# Needs losetup, mkfs.xfs (xfsprogs; installed with apt-get when missing),
# mkfs.ext4, and a build with bench/logshard-bench and logctl/logctl.
set -euo pipefail

build=build
shards=1024
shard_size=1M
repeat=3
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --shard-size) shard_size=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "merge-reflink.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

die() { echo "merge-reflink.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (it makes loop devices and mounts them)"
bench=$(realpath "$build/bench/logshard-bench") || die "no $build/bench/logshard-bench; build first"
logctl=$(realpath "$build/logctl/logctl") || die "no $build/logctl/logctl; build first"
if ! command -v mkfs.xfs >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q xfsprogs >/dev/null ||
        die "cannot install xfsprogs"
fi

work=$(mktemp -d /var/tmp/merge-reflink.XXXXXX)
loops=()
mounts=()
cleanup() {
    local m l
    for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || true; done
    for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# A sparse image with room for the shards and the bench's four outputs.
bytes=$(numfmt --from=iec "$shard_size")
image_bytes=$(( (bytes * shards * 6) + (1 << 30) ))

make_fs() { # fs -> prints the mount point
    local fs=$1 img="$work/$1.img" mnt="$work/$1" dev
    truncate -s "$image_bytes" "$img"
    case "$fs" in
    xfs) mkfs.xfs -q -f -m reflink=1 "$img" ;;
    ext4) mkfs.ext4 -q -F "$img" ;;
    esac
    dev=$(losetup -f --show "$img")
    loops+=("$dev")
    mkdir -p "$mnt"
    mount "$dev" "$mnt"
    mounts+=("$mnt")
}

median_of() { # json file, key -> the key's median of the only series
    python3 -c '
import json, sys
rep = json.load(open(sys.argv[1]))
print(rep["results"][0]["median"][sys.argv[2]])' "$1" "$2"
}

for fs in xfs ext4; do
    make_fs "$fs"
    echo "== $fs: $shards shards of $shard_size, $repeat runs" >&2
    "$bench" --mode merge --shards "$shards" --shard-size "$shard_size" --size 1K \
        --repeat "$repeat" --spool "$work/$fs" --logctl "$logctl" --json >"$work/$fs.json"
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
for k in ("logctl_s", "cat_s", "cat_sync_s", "copy_s"):
    print("  %-12s runs %s  median %.4f" % (k, " ".join("%.4f" % x[k] for x in r["runs"]), r["median"][k]))
' "$work/$fs.json" >&2
done

# One more merge on XFS, kept, to look at the output's extents.
"$bench" --mode merge --shards "$shards" --shard-size "$shard_size" --size 1K --repeat 1 \
    --spool "$work/xfs" --logctl "$logctl" --keep --json >"$work/kept.json"
kept=$(python3 -c '
import json, sys
print(json.load(open(sys.argv[1]))["results"][0]["kept"][0])' "$work/kept.json")
merged="$kept/merged-logctl.lsm"
# xfs_bmap -v: the last column is the extent's flags; 0100000 means shared.
read -r extents shared < <(xfs_bmap -v "$merged" | awk '
    NR > 2 && $2 != "hole" { n++; if ($NF ~ /^[01]*1[0-9][0-9][0-9][0-9][0-9]$/) s++ }
    END { print n + 0, s + 0 }')

xfs_s=$(median_of "$work/xfs.json" logctl_s)
ext4_s=$(median_of "$work/ext4.json" logctl_s)
echo
echo "merge of $shards x $shard_size sealed shards, median of $repeat runs, $(date -u +%F) on $(hostname)"
printf '%-28s %10.4f s\n' "logctl merge on ext4" "$ext4_s"
printf '%-28s %10.4f s\n' "logctl merge on xfs reflink" "$xfs_s"
python3 -c 'import sys; print("%-28s %10.1fx" % ("xfs speed-up over ext4", float(sys.argv[1]) / float(sys.argv[2])))' "$ext4_s" "$xfs_s"
echo "merged file on xfs: $extents extents, $shared flagged shared (xfs_bmap -v)"
[ "$extents" -gt 0 ] && [ "$shared" = "$extents" ] || die "the merged file's extents are not all shared"
