#!/usr/bin/env bash
# Installs what logshard needs on Debian 12. Run as root.
#   bash scripts/install-deps.sh           what building and running need
#   bash scripts/install-deps.sh --tests   that, and the tools the tests use
set -euo pipefail

packages=(
  build-essential meson ninja-build pkg-config
  libuv1-dev liburing-dev libinih-dev libsystemd-dev
  librdkafka-dev  # logctl ship
  libmimalloc-dev  # logctl's allocator (logctl ship makes small blocks for every record)
)
if [ "${1:-}" = --tests ]; then
  packages+=(
    libcmocka-dev  # the unit and integration tests
    systemd python3  # systemd-socket-activate, systemd-analyze; the fuzz seeds
    kcat  # tests/test-ship*: the consumer that reads what logctl ship produced
    valgrind  # tests/test-limits-records.c runs a producer under it
    prometheus  # promtool: tests/test-admin-metrics.c checks the metrics file with it
    e2fsprogs  # mkfs.ext4: tests/test-diskfull.c fills a small ext4 loop device
    clang libclang-rt-14-dev  # scripts/fuzz.sh: clang's libFuzzer and sanitizers
    groff-base man-db debhelper dpkg-dev systemd-container  # tests/test-packaging.sh
  )
elif [ -n "${1:-}" ]; then
  echo "usage: $0 [--tests]" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  # Only the tools are wanted: packages that ship a service (prometheus) must
  # not start one. policy-rc.d exit 101 tells the maintainer scripts so.
  guard=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    guard=1
  fi
  trap '[ -z "$guard" ] || rm -f /usr/sbin/policy-rc.d' EXIT
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
