#!/usr/bin/env bash
# The whole product path on one machine: install the build dependencies,
# build, start logshardd on its embedded defaults (spool and sockets in
# ./demo), send records from a few producers, merge, and show the result.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
if [ ! -f build/build.ninja ]; then
  meson setup build -Dtests=false >/dev/null  # the tests need more (scripts/run-tests.sh)
fi
ninja -C build >/dev/null

demo=$PWD/demo
rm -rf "$demo"
mkdir -p "$demo"
export LOGSHARD_SOCKET=$demo/logshard.sock
export LOGSHARD_ADMIN_SOCKET=$demo/admin.sock

# No config file: every setting is the embedded default but the paths,
# which go to ./demo instead of /run/logshard and /var/lib/logshard.
build/daemon/logshardd --config /dev/null --spool "$demo/spool" --socket "$LOGSHARD_SOCKET" \
  --admin-socket "$LOGSHARD_ADMIN_SOCKET" 2>"$demo/logshardd.log" &
daemon=$!
trap 'kill $daemon 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  [ -S "$LOGSHARD_SOCKET" ] && break
  kill -0 $daemon 2>/dev/null || { cat "$demo/logshardd.log"; exit 1; }
  sleep 0.05
done

echo "== three producers send their lines (logctl send, through liblogshard)"
senders=()
for name in web api worker; do
  for i in 1 2 3; do
    echo "$name: request $i handled at $(date +%T.%N)"
  done | build/logctl/logctl send --producer "$name" --verbose &
  senders+=($!)
done
for pid in "${senders[@]}"; do
  wait "$pid"
done

echo "== the daemon's figures (logctl status, over the admin socket)"
build/logctl/logctl status

echo "== stop the daemon (SIGTERM seals every shard)"
kill -TERM $daemon
wait $daemon
trap - EXIT
echo "-- daemon log:"
cat "$demo/logshardd.log"
echo "-- sealed shards:"
ls -l "$demo/spool/done"

echo "== merge the shards into one file (copy_file_range)"
build/logctl/logctl merge --spool "$demo/spool" --output "$demo/merged.lsm"

echo "== what came out (logctl cat --meta)"
build/logctl/logctl cat --meta "$demo/merged.lsm"
