#!/usr/bin/env bash
# Installs the dependencies, builds logshard twice (a normal development build
# and an ASan+UBSan build) and runs every test in both.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh

run_suite() {
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@"
  fi
  ninja -C "$dir"
  meson test -C "$dir" --print-errorlogs --num-processes 2
}

echo "== development build (warnings are errors)"
run_suite build

echo "== sanitizer build (address, undefined)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  run_suite build-sanitize -Db_sanitize=address,undefined -Dbuildtype=debug
