#!/usr/bin/env bash
# Installs the dependencies, builds logshard twice (a development build and
# an ASan+UBSan build, both with test-only fault injection compiled in) and
# runs every test: in both builds on io_uring, and once more in the
# development build on the thread-pool fallback, as on a machine where
# io_uring is unavailable.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh --tests

build() {
  local dir=$1; shift
  if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "$@"
  else
    meson setup "$dir" "$@"
  fi
  ninja -C "$dir"
}

echo "== development build (warnings are errors)"
build build -Dtests=true -Dfault_injection=true
meson test -C build --print-errorlogs --num-processes 2

echo "== the same tests on the thread-pool I/O path (no io_uring)"
meson test -C build --setup threads --print-errorlogs --num-processes 2

echo "== sanitizer build (address, undefined)"
build build-sanitize -Dtests=true -Db_sanitize=address,undefined -Dbuildtype=debug -Dfault_injection=true
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C build-sanitize --print-errorlogs --num-processes 2

echo "== fuzzing: corpus replay and 60 s of each libFuzzer target (clang)"
bash scripts/fuzz.sh --seconds 60
