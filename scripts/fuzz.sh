#!/usr/bin/env bash
# Builds the libFuzzer targets of common/fuzz, merge/fuzz and ship/fuzz with clang,
# ASan and UBSan, replays every input of their corpora, then fuzzes each
# target for a bounded time. Exits non-zero when any input crashes, leaks,
# trips a sanitizer, times out or breaks a contract the target checks; the
# input is then saved under build-fuzz/artifacts/<target>/.
#
#   bash scripts/fuzz.sh                      every target, 60 s each
#   bash scripts/fuzz.sh --seconds 600        longer
#   bash scripts/fuzz.sh --target wire        one target (wire, shard-reader, config, json,
#                                             spool-names, stream-positions,
#                                             seal-index, syslog-msg, syslog-frame,
#                                             merge-intent, ship-progress)
#   bash scripts/fuzz.sh --replay-only        the corpus replay alone
#
# New inputs the fuzzer finds go to build-fuzz/corpus/<target>/, not to the
# seed corpus in the repository: a crash is added there by hand, as a
# regress-* file, once the bug it shows is fixed (common/fuzz/meson.build).
# Each target lives in the fuzz/ folder next to the code it drives.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(wire shard-reader config json spool-names stream-positions seal-index syslog-msg
         syslog-frame merge-intent ship-progress)
seconds=60
replay_only=false
build=build-fuzz

usage() {
  sed -n '2,19s/^# \{0,1\}//p' "$0"
  exit "${1:-0}"
}

while (($#)); do
  case $1 in
    --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
    --seconds=*) seconds=${1#*=}; shift ;;
    --target) targets=("${2:?--target needs a name}"); shift 2 ;;
    --target=*) targets=("${1#*=}"); shift ;;
    --replay-only) replay_only=true; shift ;;
    -h|--help) usage 0 ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; usage 2 >&2 ;;
  esac
done
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: --seconds wants a whole number of seconds above 0, not '$seconds'" >&2
  exit 2
fi
# The folder of a target: the fuzz/ folder whose corpus/ has its name.
fuzz_dir() {
  local d
  for d in common/fuzz merge/fuzz ship/fuzz; do
    if [ -d "$d/corpus/$1" ]; then
      echo "$d"
      return 0
    fi
  done
  return 1
}
for t in "${targets[@]}"; do
  if ! fuzz_dir "$t" >/dev/null; then
    echo "fuzz.sh: no target '$t' (there are: wire, shard-reader, config, json, spool-names, stream-positions, seal-index, syslog-msg, syslog-frame, merge-intent, ship-progress)" >&2
    exit 2
  fi
done
if ! command -v clang >/dev/null; then
  echo "fuzz.sh: clang is missing (Debian 12: apt-get install clang libclang-rt-14-dev," \
       "or bash scripts/install-deps.sh)" >&2
  exit 1
fi

echo "== fuzz build (clang, libFuzzer, address and undefined sanitizers) in $build"
if [ -f "$build/build.ninja" ]; then
  meson configure "$build" -Dfuzzing=true -Db_sanitize=address,undefined \
    -Db_lundef=false -Dtests=false
else
  CC=clang meson setup "$build" -Dfuzzing=true -Db_sanitize=address,undefined \
    -Db_lundef=false -Dtests=false
fi
# Only the fuzz targets: the rest of the project has its own builds.
ninja_targets=()
for t in "${targets[@]}"; do
  ninja_targets+=("$(fuzz_dir "$t")/fuzz-$t")
done
ninja -C "$build" "${ninja_targets[@]}"

# UBSan stops at the first report (the targets are also built with
# -fno-sanitize-recover=all); libFuzzer sets up ASan itself, leaks included.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
failed=()

for t in "${targets[@]}"; do
  dir=$(fuzz_dir "$t")
  exe=$build/$dir/fuzz-$t
  seeds=$dir/corpus/$t
  artifacts=$build/artifacts/$t
  opts=(-timeout=25 -artifact_prefix="$artifacts/")
  if [ -f "$dir/fuzz-$t.dict" ]; then
    opts+=(-dict="$dir/fuzz-$t.dict")
  fi
  mkdir -p "$artifacts" "$build/corpus/$t"

  echo "== $t: replaying $seeds"
  mapfile -t inputs < <(find "$seeds" -type f ! -name '.*' | sort)
  # With file arguments libFuzzer runs each once and stops at the first
  # failure, which is what a regression replay wants.
  if ! "$exe" "${opts[@]}" "${inputs[@]}" >"$build/replay-$t.log" 2>&1; then
    tail -n 40 "$build/replay-$t.log" >&2
    echo "fuzz.sh: $t: an input of $seeds fails (log: $build/replay-$t.log)" >&2
    failed+=("$t (replay)")
    continue
  fi
  echo "   ${#inputs[@]} inputs, all pass"
  $replay_only && continue

  echo "== $t: fuzzing for ${seconds}s"
  # The first directory receives what the fuzzer finds; the seeds are read
  # only. -print_final_stats gives the figures the issue asks for.
  if ! "$exe" "${opts[@]}" -max_total_time="$seconds" -print_final_stats=1 \
      "$build/corpus/$t" "$seeds" >"$build/fuzz-$t.log" 2>&1; then
    tail -n 60 "$build/fuzz-$t.log" >&2
    echo "fuzz.sh: $t: the fuzzer found a failing input, saved in $artifacts/" \
         "(log: $build/fuzz-$t.log)" >&2
    failed+=("$t")
    continue
  fi
  # The last status line (execs, cov, ft, corp) and the final stats.
  grep -E '^#[0-9]+' "$build/fuzz-$t.log" | tail -n 1
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' \
    "$build/fuzz-$t.log" | tr '\n' ' '
  echo
done

if ((${#failed[@]})); then
  echo "fuzz.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: all targets pass"
