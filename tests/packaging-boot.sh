#!/usr/bin/env bash
# Step 6 of test-packaging.sh: the Debian packages installed into a
# throw-away overlay of / and that system booted with systemd-nspawn, run
# in a private mount namespace (test-packaging.sh starts it under unshare).
#
# Usage: packaging-boot.sh DIR EXPECTED_BACKEND DEB...
# Exit status 0 passed, 1 failed, 77 this machine cannot boot a container.
set -euo pipefail

boot_step() {
    local dir=$1 expect_backend=$2
    shift 2
    local root=$dir/root nspawn leader i state fails=0 sent=0 pid pid2 status
    check() { echo "  FAIL: $*" >&2; fails=$((fails + 1)); }
    ct() { nsenter -t "$leader" -a "$@"; }
    # Sends N lines as USER with producer NAME; counts them when it worked.
    send() {
        local user=$1 name=$2 n=$3
        if seq 1 "$n" | ct runuser -u "$user" -- logctl send --producer "$name"; then
            sent=$((sent + n))
            return 0
        fi
        return 1
    }
    unit_show() { ct systemctl show -P "$1" logshardd.service; }
    # SIGTERM asks nspawn to power the container off; SIGKILL if it lingers.
    stop_container() {
        local j
        kill -TERM "$nspawn" 2>/dev/null || true
        for j in $(seq 1 100); do
            kill -0 "$nspawn" 2>/dev/null || break
            sleep 0.2
        done
        kill -KILL "$nspawn" 2>/dev/null || true
        wait "$nspawn" 2>/dev/null || true
    }

    mkdir -p "$dir/layers" "$root"
    if ! mount -t tmpfs -o size=2G,mode=0755 logshard-test "$dir/layers" ||
       ! mkdir "$dir/layers/upper" "$dir/layers/work" ||
       ! mount -t overlay overlay \
             -o "lowerdir=/,upperdir=$dir/layers/upper,workdir=$dir/layers/work" "$root"; then
        echo "cannot mount a writable overlay of /"
        return 77
    fi
    cp "$@" "$root/tmp/"
    local names=()
    for i in "$@"; do names+=("/tmp/$(basename "$i")"); done
    # No /proc in the chroot: systemd-tmpfiles in postinst complains and
    # leaves the directories to the boot, which is what an image build does.
    if ! chroot "$root" env DEBIAN_FRONTEND=noninteractive dpkg -i "${names[@]}" >"$dir/dpkg.log" 2>&1; then
        cat "$dir/dpkg.log"
        echo "  FAIL: dpkg -i of the packages failed"
        return 1
    fi
    echo "  installed with dpkg -i: $(grep -o "Creating user '[a-z]*'[^.]*" "$dir/dpkg.log" || echo "user existed")"

    # The syslog socket's queue length (net.unix.max_dgram_qlen) belongs to
    # a network namespace and is fixed when a socket is created. This
    # container shares the host's network, whose sysctls its systemd-sysctl
    # cannot write: the test applies the package's sysctl.d file on the host
    # before the boot, as the boot of a machine would, and puts the host's
    # value back when this process exits.
    local sysctl_file=$root/usr/lib/sysctl.d/50-logshard.conf want_qlen
    want_qlen=$(sed -n 's/^net\.unix\.max_dgram_qlen *= *\([0-9][0-9]*\)$/\1/p' "$sysctl_file" 2>/dev/null)
    if [ -z "$want_qlen" ]; then
        check "the package's $sysctl_file does not set net.unix.max_dgram_qlen"
    else
        # Global: the trap runs after this function has returned.
        HOST_QLEN=$(cat /proc/sys/net/unix/max_dgram_qlen)
        trap 'echo "$HOST_QLEN" >/proc/sys/net/unix/max_dgram_qlen' EXIT
        echo "$want_qlen" >/proc/sys/net/unix/max_dgram_qlen
    fi

    # basic.target: sockets.target and what it needs, not multi-user.target,
    # so logshardd.service starts only when a producer connects.
    systemd-nspawn -q -D "$root" -M "logshard-test-$$" --register=no --keep-unit \
        --link-journal=no --boot --console=read-only -- systemd.unit=basic.target \
        >"$dir/nspawn.log" 2>&1 &
    nspawn=$!
    # The container's init: a descendant of nspawn named systemd, in a PID
    # namespace of its own (nspawn's first children are not yet).
    leader=
    for i in $(seq 1 300); do
        for pid in $(pgrep -P "$nspawn"; pgrep -P "$(pgrep -P "$nspawn" | tr '\n' ',' | sed 's/,$//')" 2>/dev/null); do
            if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = systemd ] &&
               [ "$(readlink "/proc/$pid/ns/pid")" != "$(readlink /proc/self/ns/pid)" ]; then
                leader=$pid
                break 2
            fi
        done
        kill -0 "$nspawn" 2>/dev/null || break
        sleep 0.1
    done
    # systemctl answers once the container's manager listens on its bus.
    state=
    for i in $(seq 1 120); do
        [ -n "$leader" ] || break
        state=$(timeout 120 nsenter -t "$leader" -a systemctl is-system-running --wait 2>/dev/null) || true
        [ -n "$state" ] && break
        kill -0 "$nspawn" 2>/dev/null || break
        sleep 0.5
    done
    case $state in
    running | degraded) ;;
    *)
        tail -20 "$dir/nspawn.log"
        echo "the container did not boot (state '$state')"
        stop_container
        return 77
        ;;
    esac
    echo "  booted to basic.target ($state)"
    [ -z "$want_qlen" ] || [ "$(ct cat /proc/sys/net/unix/max_dgram_qlen)" = "$want_qlen" ] ||
        check "net.unix.max_dgram_qlen in the container is $(ct cat /proc/sys/net/unix/max_dgram_qlen), not the package's $want_qlen"

    # Socket activation: the socket listens, the service waits for a producer.
    [ "$(ct systemctl is-active logshardd.socket)" = active ] || check "logshardd.socket is not active"
    [ "$(ct systemctl is-active logshardd.service)" = inactive ] ||
        check "logshardd.service runs before any producer connected"
    [ "$(ct stat -c '%U:%G %a' /run/logshard/logshard.sock)" = "logshard:logshard 660" ] ||
        check "socket: $(ct stat -c '%U:%G %a' /run/logshard/logshard.sock)"
    for i in "" /active /done /quarantine /merged; do
        [ "$(ct stat -c '%U:%G %a' "/var/lib/logshard$i")" = "logshard:logshard 750" ] ||
            check "/var/lib/logshard$i: $(ct stat -c '%U:%G %a' "/var/lib/logshard$i" 2>&1)"
    done

    # Members of the group logshard may produce; others may not.
    ct useradd -M -G logshard ls-producer
    ct useradd -M ls-other
    send ls-producer boot-test 1000 || check "a member of the group logshard could not send"
    if seq 1 3 | ct runuser -u ls-other -- logctl send --producer intruder 2>"$dir/other.err"; then
        check "a user outside the group logshard could send"
    fi
    grep -q "Permission denied" "$dir/other.err" || check "the refusal was not EACCES: $(cat "$dir/other.err")"
    [ "$(ct systemctl is-active logshardd.service)" = active ] ||
        check "logshardd.service was not started by the first connection"
    status=$(unit_show StatusText)
    echo "  activated by the first producer; STATUS=$status"
    case $status in
    *"$expect_backend"*) echo "  io_uring under the unit's seccomp filter: $expect_backend, as outside it" ;;
    *) check "expected $expect_backend under the unit, STATUS says: $status" ;;
    esac

    # Reload keeps the process.
    pid=$(unit_show MainPID)
    ct systemctl reload logshardd.service || check "systemctl reload failed"
    [ "$(unit_show MainPID)" = "$pid" ] || check "reload replaced the process"
    ct journalctl -q -u logshardd.service -g "reloaded the settings" >/dev/null ||
        check "no 'reloaded the settings' in the journal"
    send ls-producer after-reload 100 || check "sending after the reload failed"

    # A planned restart under load: a producer that knows nothing of it
    # (logctl send, through the library) sees no error, and every record
    # is in the spool once, in order (checked after the merge below). The
    # journal shows that the stream was resumed across the restarts, so the
    # producer was not simply done before them. The lines keep coming until
    # both restarts are done (at least 200,000; 20 million at most, should
    # the marker never come), so the restarts meet the load however fast
    # the producer and however slow the machine; their count is noted.
    rm -f "$dir/restarts-done" "$dir/restart-load.count"
    (
        n=0
        while { [ ! -e "$dir/restarts-done" ] || [ "$n" -lt 200000 ]; } && [ "$n" -lt 20000000 ]; do
            seq $((n + 1)) $((n + 100000))
            n=$((n + 100000))
        done
        echo "$n" >"$dir/restart-load.count"
    ) | ct runuser -u ls-producer -- logctl send --producer restart-load \
        >"$dir/restart-load.out" 2>&1 &
    local load=$! load_lines=0
    # runuser inside the container can take longer to start the producer
    # than two restarts take: wait (30 s at most) until its shard is open.
    for i in $(seq 1 300); do
        ct sh -c 'ls /var/lib/logshard/active/restart-load.*.tmp' >/dev/null 2>&1 && break
        kill -0 "$load" 2>/dev/null || break
        sleep 0.1
    done
    ct sh -c 'ls /var/lib/logshard/active/restart-load.*.tmp' >/dev/null 2>&1 ||
        check "the producer under load did not open its shard within 30 s"
    for i in 1 2; do
        ct systemctl restart logshardd.service || check "systemctl restart $i under load failed"
    done
    touch "$dir/restarts-done"
    if wait "$load"; then
        load_lines=$(cat "$dir/restart-load.count" 2>/dev/null || echo 0)
        sent=$((sent + load_lines))
        echo "  systemctl restart twice under load ($load_lines lines): the producer saw no error"
    else
        check "the producer under load failed across systemctl restart: $(cat "$dir/restart-load.out")"
    fi
    ct journalctl -q -u logshardd.service -g "resumes stream" >/dev/null ||
        check "no resumed stream in the journal: the restarts did not meet the load"

    # The watchdog is fed: with WatchdogSec=2s the daemon lives on.
    ct mkdir -p /run/systemd/system/logshardd.service.d
    printf '[Service]\nWatchdogSec=2s\n' | ct tee /run/systemd/system/logshardd.service.d/watchdog.conf >/dev/null
    ct systemctl daemon-reload
    ct systemctl restart logshardd.service
    pid=$(unit_show MainPID)
    send ls-producer watchdog 100 || check "sending under WatchdogSec=2s failed"
    sleep 5
    [ "$(unit_show MainPID)" = "$pid" ] && [ "$(unit_show NRestarts)" = 0 ] ||
        check "the watchdog killed the daemon (WatchdogSec=2s; MainPID $pid -> $(unit_show MainPID))"
    echo "  reload and a 2 s watchdog leave the daemon running (pid $pid)"
    ct rm /run/systemd/system/logshardd.service.d/watchdog.conf

    # Stop drains and exits 0; the socket stays and the next producer
    # starts the daemon again.
    ct systemctl daemon-reload
    ct systemctl stop logshardd.service 2>/dev/null
    [ "$(unit_show Result)" = success ] || check "stopping did not end in success: $(unit_show Result)"
    ct test -S /run/logshard/logshard.sock || check "stopping the service removed the socket"
    send ls-producer after-stop 100 || check "sending after a stop failed"
    pid2=$(unit_show MainPID)
    [ "$pid2" != 0 ] && [ "$pid2" != "$pid" ] || check "the service was not activated again"
    echo "  stop drains (Result=success), the socket stays, the next producer restarts it"

    # Where seccomp refuses io_uring, the daemon falls back to the thread pool
    # (SystemCallErrorNumber=EPERM makes the refusal an error, not a kill).
    printf '[Service]\nSystemCallFilter=~io_uring_setup io_uring_enter io_uring_register\n' |
        ct tee /run/systemd/system/logshardd.service.d/no-uring.conf >/dev/null
    ct systemctl daemon-reload
    ct systemctl restart logshardd.service
    send ls-producer no-uring 100 || check "sending with io_uring refused failed"
    status=$(unit_show StatusText)
    case $status in
    *thread-pool*) echo "  io_uring refused by seccomp: $status" ;;
    *) check "io_uring refused by seccomp, yet STATUS says: $status" ;;
    esac
    ct rm /run/systemd/system/logshardd.service.d/no-uring.conf
    ct systemctl daemon-reload
    ct systemctl stop logshardd.service 2>/dev/null

    # Every record sent is in done/; a merge run as logshard gets them all.
    if ct runuser -u logshard -- logctl merge --spool /var/lib/logshard --delete \
           --output /var/lib/logshard/merged/boot-test.lsm >/dev/null; then
        i=$(ct logctl cat /var/lib/logshard/merged/boot-test.lsm | wc -l)
        [ "$i" = "$sent" ] || check "merged $i records, $sent were sent"
        echo "  logctl merge as logshard: $i records, all that were sent"
        ct logctl cat --producer restart-load /var/lib/logshard/merged/boot-test.lsm |
            awk -v n="$load_lines" '$0 != NR { bad = 1; exit } END { exit bad || NR != n || n == 0 }' ||
            check "the records sent across the restarts are not 1 to $load_lines, once each, in order"
    else
        check "logctl merge as the user logshard failed"
    fi
    # The admin socket, which the daemon binds itself in its RuntimeDirectory.
    if ct logctl --help | grep -q '^  status '; then
        ct systemctl start logshardd.service
        if ct logctl status >"$dir/status.out" 2>&1; then
            echo "  logctl status (root, through the admin socket): $(head -1 "$dir/status.out")"
        else
            cat "$dir/status.out"
            check "logctl status as root failed under the unit"
        fi
        ct systemctl stop logshardd.service 2>/dev/null
    fi
    echo "  live exposure: $(ct systemd-analyze security logshardd.service 2>/dev/null | grep 'Overall exposure' | sed 's/^→ *//')"

    # The shipper: without brokers its ExecCondition skips it (not failed);
    # with them (librdkafka's mock cluster on the host, whose network the
    # container shares) it ships what a producer sends, under its unit.
    # It needs brokers first: the package installs it, neither enabled nor started.
    [ "$(ct systemctl is-enabled logshard-ship.service 2>&1)" = disabled ] ||
        check "logshard-ship.service is $(ct systemctl is-enabled logshard-ship.service 2>&1) after installation, not disabled"
    ct systemctl start logshard-ship.service 2>/dev/null || true
    if ct systemctl is-failed -q logshard-ship.service; then
        check "logshard-ship.service failed without brokers instead of being skipped"
    else
        echo "  logshard-ship.service without [ship] brokers: skipped ($(ct systemctl show -P ActiveState logshard-ship.service))"
    fi
    if [ -n "${KAFKA_MOCK:-}" ] && [ -n "${KCAT:-}" ]; then
        local mock_out=$dir/kafka-mock.out brokers="" n=0
        mkfifo "$dir/kafka-mock.in"
        "$KAFKA_MOCK" --brokers 1 <"$dir/kafka-mock.in" >"$mock_out" 2>"$dir/kafka-mock.err" &
        local mock=$!
        exec {mock_in}>"$dir/kafka-mock.in"
        for i in $(seq 1 100); do
            brokers=$(head -1 "$mock_out" 2>/dev/null)
            [ -n "$brokers" ] && break
            sleep 0.1
        done
        printf '\n[ship]\nbrokers = %s\ntopic = boot.{producer}\n' "$brokers" |
            ct tee -a /etc/logshard/logshard.conf >/dev/null
        ct systemctl start logshard-ship.service || check "logshard-ship.service did not start"
        send ls-producer shipped 500 || check "sending to be shipped failed"
        for i in $(seq 1 300); do
            n=$("$KCAT" -C -b "$brokers" -t boot.shipped -e -q -X isolation.level=read_committed \
                2>/dev/null | wc -l)
            [ "$n" -ge 500 ] && break
            sleep 0.2
        done
        if [ "$n" = 500 ]; then
            echo "  logshard-ship.service shipped the 500 records of a producer to Kafka (read_committed: $n)"
        else
            check "logshard-ship.service: $n of 500 records in Kafka"
            ct journalctl -q -u logshard-ship.service --no-pager | tail -20
        fi
        ct logctl ship --status >"$dir/ship-status.out" 2>&1 ||
            check "logctl ship --status failed: $(cat "$dir/ship-status.out")"
        ct systemctl stop logshard-ship.service
        [ "$(ct systemctl show -P Result logshard-ship.service)" = success ] ||
            check "stopping logshard-ship.service: $(ct systemctl show -P Result logshard-ship.service)"
        echo "  live exposure of the shipper: $(ct systemd-analyze security logshard-ship.service 2>/dev/null | grep 'Overall exposure' | sed 's/^→ *//')"
        exec {mock_in}>&-
        wait "$mock" 2>/dev/null || true
    else
        echo "  no kafka-mock or kcat in this build: the shipper is not run under its unit"
    fi

    # Retention: the timer is enabled and waiting; without a [retention]
    # limit a run removes nothing, with one it removes an old merged file
    # under the hardened unit and keeps a young one.
    [ "$(ct systemctl is-enabled logshard-prune.timer 2>&1)" = enabled ] ||
        check "logshard-prune.timer is $(ct systemctl is-enabled logshard-prune.timer 2>&1) after installation, not enabled"
    [ "$(ct systemctl is-active logshard-prune.timer 2>&1)" = active ] ||
        check "logshard-prune.timer is $(ct systemctl is-active logshard-prune.timer 2>&1), not active"
    local old_merged=/var/lib/logshard/merged/merged-20000101T000000.000000000Z.lsm
    local new_merged
    new_merged=/var/lib/logshard/merged/merged-$(date -u +%Y%m%dT%H%M%S).000000000Z.lsm
    ct runuser -u logshard -- sh -c "echo old >$old_merged && echo new >$new_merged"
    ct systemctl start logshard-prune.service || check "logshard-prune.service failed without limits"
    ct test -e "$old_merged" || check "logshard-prune.service removed a file without a [retention] limit"
    printf '\n[retention]\nmerged_max_age = 30d\n' | ct tee -a /etc/logshard/logshard.conf >/dev/null
    if ct systemctl start logshard-prune.service &&
       [ "$(ct systemctl show -P Result logshard-prune.service)" = success ] &&
       ! ct test -e "$old_merged" && ct test -e "$new_merged"; then
        echo "  logshard-prune.service under its unit: removed a merged file past merged_max_age, kept a young one"
    else
        check "logshard-prune.service with merged_max_age = 30d: $(ct systemctl show -P Result logshard-prune.service); $(ct journalctl -q -u logshard-prune.service --no-pager | tail -5)"
    fi
    echo "  live exposure of the retention service: $(ct systemd-analyze security logshard-prune.service 2>/dev/null | grep 'Overall exposure' | sed 's/^→ *//')"

    # logshard as the machine's syslog daemon: logshard-syslog.socket takes
    # the socket journald forwards to (ForwardToSyslog=yes), and the way back.
    # A stand-in for Debian's rsyslog.service holds that socket first, the way
    # rsyslog does (Requires=syslog.socket, Alias=syslog.service): it appends
    # every datagram it reads to a file. The commands are those of README.md.
    local ident=boot-syslog-$$ uid fwd standin=no inv
    uid=$(ct id -u ls-other)
    # Polls COMMAND... until it succeeds, for SECONDS at most.
    wait_until() {
        local deadline=$((SECONDS + $1))
        shift
        until "$@"; do
            [ "$SECONDS" -lt "$deadline" ] || return 1
            sleep 0.2
        done
    }
    # The records of identifier $1 in the spool (--meta): one line each.
    syslog_records() { ct logctl cat --spool /var/lib/logshard --meta -t "$1" 2>&1; }
    # Whether the spool holds text $2 of identifier $1 from the uid of ls-other.
    syslog_has() { syslog_records "$1" | grep -q " uid=$uid .*$1: $2\$"; }
    standin_has() { ct grep -q "$1" /run/standin-syslog.log 2>/dev/null; }
    # Whether the journal of the running logshardd matches PCRE pattern $1
    # (journalctl -g).
    invocation_says() {
        inv=$(unit_show InvocationID)
        ct journalctl -q "_SYSTEMD_INVOCATION_ID=$inv" -g "$1" >/dev/null 2>&1
    }

    [ "$(ct systemctl is-enabled logshard-syslog.socket 2>&1)" = disabled ] ||
        check "logshard-syslog.socket is $(ct systemctl is-enabled logshard-syslog.socket 2>&1) after installation, not disabled"
    [ "$(ct systemctl is-active logshard-syslog.socket)" = inactive ] ||
        check "logshard-syslog.socket is $(ct systemctl is-active logshard-syslog.socket) after installation, not inactive"
    # journald.conf lists its defaults commented out; a drop-in would follow.
    fwd=$(ct systemd-analyze cat-config systemd/journald.conf |
              sed -n 's/^#\{0,1\}ForwardToSyslog=//p' | tail -1)
    if [ "$fwd" = yes ]; then
        echo "  journald in the container: ForwardToSyslog=yes (its default)"
    else
        ct mkdir -p /etc/systemd/journald.conf.d
        printf '[Journal]\nForwardToSyslog=yes\n' |
            ct tee /etc/systemd/journald.conf.d/logshard-test.conf >/dev/null
        ct systemctl restart systemd-journald.service
        echo "  journald in the container had ForwardToSyslog=${fwd:-(not listed)}: set to yes in journald.conf.d/logshard-test.conf"
    fi
    if ct test -x /usr/bin/python3; then
        standin=yes
        printf '%s\n' 'import socket' 's = socket.socket(fileno=3)' \
            'with open("/run/standin-syslog.log", "ab", 0) as f:' \
            '    while True:' '        f.write(s.recv(65536) + b"\n")' |
            ct tee /run/standin-syslog.py >/dev/null
        printf '%s\n' '[Unit]' 'Description=stand-in for rsyslog' 'Requires=syslog.socket' '' \
            '[Service]' 'ExecStart=/usr/bin/python3 /run/standin-syslog.py' '' \
            '[Install]' 'WantedBy=multi-user.target' 'Alias=syslog.service' |
            ct tee /etc/systemd/system/rsyslog.service >/dev/null
        ct systemctl daemon-reload
        ct systemctl enable --now rsyslog.service 2>/dev/null || check "the stand-in rsyslog.service did not start"
        ct runuser -u ls-other -- logger -t "$ident-rsyslog" "to the stand-in"
        wait_until 30 standin_has "$ident-rsyslog: to the stand-in" ||
            check "the stand-in rsyslog did not get a logger message through journald within 30 s"
    else
        echo "  no python3 in the container: no stand-in for rsyslog, its commands are left out"
    fi

    # The switch, with the commands of README.md. systemd 252 refuses to
    # start a socket unit while the service it triggers runs; a stop, then a
    # transaction of starts only (socket units start before their service).
    ct systemctl start logshardd.service
    if ct systemctl start logshard-syslog.socket 2>/dev/null; then
        echo "  note: this systemd started logshard-syslog.socket while logshardd.service ran"
        ct systemctl stop logshard-syslog.socket
    else
        echo "  starting logshard-syslog.socket while logshardd.service runs is refused, as docs/PACKAGING.md says"
    fi
    if [ "$standin" = yes ]; then
        ct systemctl disable --now rsyslog.service syslog.socket 2>/dev/null ||
            check "systemctl disable --now rsyslog.service syslog.socket failed"
    fi
    ct systemctl enable logshard-syslog.socket 2>/dev/null || check "systemctl enable logshard-syslog.socket failed"
    ct systemctl stop logshardd.socket logshardd.service ||
        check "systemctl stop logshardd.socket logshardd.service failed"
    ct systemctl start logshardd.socket logshard-syslog.socket logshardd.service ||
        check "systemctl start logshardd.socket logshard-syslog.socket logshardd.service failed"
    [ "$(ct systemctl is-active logshard-syslog.socket logshardd.service | tr '\n' ' ')" = "active active " ] ||
        check "after the switch: logshard-syslog.socket and logshardd.service are $(ct systemctl is-active logshard-syslog.socket logshardd.service | tr '\n' ' ')"
    [ "$(ct stat -c '%U:%G %a' /run/systemd/journal/syslog 2>&1)" = "root:root 666" ] ||
        check "/run/systemd/journal/syslog: $(ct stat -c '%U:%G %a' /run/systemd/journal/syslog 2>&1)"
    wait_until 10 invocation_says "syslog datagrams on /run/systemd/journal/syslog .socket from systemd." ||
        check "logshardd did not get the syslog socket with its producer socket: $(ct journalctl -q "_SYSTEMD_INVOCATION_ID=$inv" | tail -3)"
    ct runuser -u ls-other -- logger -t "$ident" "through journald"
    ct logctl rotate >/dev/null || check "logctl rotate failed"
    if wait_until 30 syslog_has "$ident" "through journald"; then
        echo "  logger as uid $uid -> /dev/log -> journald -> logshard-syslog.socket -> logshardd: $(syslog_records "$ident" | awk '{ print $1 }')"
    else
        check "logger -t $ident as uid $uid: not in the spool with that uid within 30 s; logctl cat --meta -t $ident printed: $(syslog_records "$ident")"
    fi
    send ls-producer while-syslog 100 || check "a producer could not send while logshardd is the syslog daemon"

    # A service's stdout (systemd-run) and systemd-cat's lines, forwarded by
    # journald, with a restart of logshardd in the middle: every line stored
    # once, in order, under the identifier journald gives it and the uid that
    # wrote it. The socket unit holds the socket across the restart; journald
    # drops (and counts) what finds its queue full, and the queue holds
    # net.unix.max_dgram_qlen datagrams (the package's sysctl.d file, applied
    # above), so the lines trickle, 5 a second from each writer.
    local lines=40 run_unit="ls-stdout-$$" cat_pid t0 qlen
    qlen=$(ct cat /proc/sys/net/unix/max_dgram_qlen)
    # The numbers of the lines "$2 N" of identifier $1 from that uid, in the
    # order logctl cat gives them.
    numbered() {
        syslog_records "$1" | grep " uid=$uid " | sed -n "s/.*: $2 \([0-9]*\)\$/\1/p"
    }
    in_journal() { ct journalctl -q -t "$1" -g "$2\$" >/dev/null 2>&1; }
    all_stored() {
        ct logctl rotate >/dev/null 2>&1
        [ "$(numbered "$ident-run" "stdout line" | wc -l)" -ge "$lines" ] &&
            [ "$(numbered "$ident-cat" "cat line" | wc -l)" -ge "$lines" ]
    }
    ct systemd-run -q --unit="$run_unit" -p User=ls-other -p SyslogIdentifier="$ident-run" \
        /bin/sh -c "i=1; while [ \$i -le $lines ]; do echo \"stdout line \$i\"; i=\$((i + 1)); sleep 0.2; done" ||
        check "systemd-run of a service that prints to stdout failed"
    ct runuser -u ls-other -- /bin/sh -c "i=1; while [ \$i -le $lines ]; do echo \"cat line \$i\"; i=\$((i + 1)); sleep 0.2; done | systemd-cat -t '$ident-cat'" &
    cat_pid=$!
    wait_until 30 in_journal "$ident-run" "stdout line 8" && wait_until 30 in_journal "$ident-cat" "cat line 8" ||
        check "journald did not get line 8 of the service and of systemd-cat within 30 s"
    t0=$(date +%s%N)
    ct systemctl restart logshardd.service || check "systemctl restart logshardd.service while services log failed"
    echo "  restarted logshardd while a service and systemd-cat were logging: $((($(date +%s%N) - t0) / 1000000)) ms (net.unix.max_dgram_qlen $qlen)"
    [ "$(ct systemctl is-active "$run_unit")" = active ] ||
        check "the service printing to stdout ended before the restart was over: the restart was not in the middle"
    wait "$cat_pid" || check "systemd-cat as ls-other failed"
    if wait_until 30 all_stored; then
        if [ "$(numbered "$ident-run" "stdout line" | tr '\n' ' ')" = "$(seq 1 "$lines" | tr '\n' ' ')" ] &&
            [ "$(numbered "$ident-cat" "cat line" | tr '\n' ' ')" = "$(seq 1 "$lines" | tr '\n' ' ')" ]; then
            echo "  systemd-run stdout and systemd-cat -> journald -> logshardd: $lines lines each, once and in order across the restart, as uid $uid"
        else
            check "across the restart: the service's lines were stored as [$(numbered "$ident-run" "stdout line" | tr '\n' ' ')], systemd-cat's as [$(numbered "$ident-cat" "cat line" | tr '\n' ' ')], not 1..$lines once each"
        fi
    else
        check "within 30 s of the last line: $(numbered "$ident-run" "stdout line" | wc -l) of the service's and $(numbered "$ident-cat" "cat line" | wc -l) of systemd-cat's $lines lines in the spool; journald: $(ct journalctl -q -u systemd-journald.service -g missed | tail -2)"
    fi

    # Datagrams sent straight to a new socket while the daemon is still
    # starting (it is held in ExecStartPre) wait in the kernel's queue and
    # keep their sender's credentials: PassCredentials=yes. The socket unit
    # is started anew for this: SO_PASSCRED, once the daemon has set it, stays
    # on the socket systemd keeps, whatever the unit says.
    printf '[Service]\nExecStartPre=/bin/sleep 8\n' |
        ct tee /run/systemd/system/logshardd.service.d/slow-start.conf >/dev/null
    ct systemctl daemon-reload
    ct systemctl stop logshard-syslog.socket logshardd.service 2>/dev/null
    ct systemctl start logshard-syslog.socket || check "logshard-syslog.socket did not start again"
    ct systemctl start --no-block logshardd.service
    in_start_pre() { [ "$(unit_show SubState)" = start-pre ]; }
    wait_until 5 in_start_pre || check "logshardd.service is $(unit_show SubState), not held in start-pre"
    ct runuser -u ls-other -- logger -u /run/systemd/journal/syslog -t "$ident-queued" "before the daemon"
    in_start_pre || check "logshardd.service left start-pre before the datagram was sent: the check proves nothing"
    if wait_until 30 syslog_has "$ident-queued" "before the daemon"; then
        echo "  a datagram queued before the daemon read the socket kept uid $uid"
    else
        check "a datagram queued before the daemon started: not in the spool with uid $uid within 30 s; logctl cat --meta -t $ident-queued printed: $(syslog_records "$ident-queued")"
    fi
    ct rm /run/systemd/system/logshardd.service.d/slow-start.conf
    ct systemctl daemon-reload

    # The way back: the socket unit stops and removes its node at once; the
    # restart makes the daemon let go of the socket it was handed.
    ct systemctl disable --now logshard-syslog.socket 2>/dev/null ||
        check "systemctl disable --now logshard-syslog.socket failed"
    ! ct test -e /run/systemd/journal/syslog || check "stopping logshard-syslog.socket left /run/systemd/journal/syslog"
    ct systemctl restart logshardd.service || check "systemctl restart logshardd.service after the way back failed"
    [ "$(ct systemctl is-active logshardd.service)" = active ] ||
        check "logshardd.service is $(ct systemctl is-active logshardd.service) after the way back"
    if invocation_says "syslog datagrams on"; then
        check "logshardd still reads a syslog socket after logshard-syslog.socket was stopped"
    fi
    send ls-producer after-syslog 100 || check "a producer could not send after the way back"
    if [ "$standin" = yes ]; then
        ct systemctl enable --now rsyslog.service 2>/dev/null || check "systemctl enable --now rsyslog.service failed"
        [ "$(ct systemctl is-active syslog.socket rsyslog.service logshard-syslog.socket | tr '\n' ' ')" = "active active inactive " ] ||
            check "after the way back: syslog.socket, rsyslog.service, logshard-syslog.socket are $(ct systemctl is-active syslog.socket rsyslog.service logshard-syslog.socket | tr '\n' ' ')"
        ct runuser -u ls-other -- logger -t "$ident-back" "to the stand-in again"
        wait_until 30 standin_has "$ident-back: to the stand-in again" ||
            check "after the way back the stand-in rsyslog did not get a logger message within 30 s"
        ct logctl rotate >/dev/null || check "logctl rotate failed"
        [ -z "$(ct logctl cat --spool /var/lib/logshard -t "$ident-back" 2>&1)" ] ||
            check "after the way back logshardd still got: $(ct logctl cat --spool /var/lib/logshard -t "$ident-back" 2>&1)"
        # Conflicts=: starting either socket unit stops the other one (and
        # rsyslog.service with its socket).
        ct systemctl stop logshardd.service 2>/dev/null
        ct systemctl start logshard-syslog.socket || check "starting logshard-syslog.socket over syslog.socket failed"
        [ "$(ct systemctl is-active syslog.socket rsyslog.service logshard-syslog.socket | tr '\n' ' ')" = "inactive inactive active " ] ||
            check "starting logshard-syslog.socket did not stop syslog.socket and rsyslog: $(ct systemctl is-active syslog.socket rsyslog.service logshard-syslog.socket | tr '\n' ' ')"
        ct systemctl start rsyslog.service || check "starting rsyslog.service over logshard-syslog.socket failed"
        [ "$(ct systemctl is-active syslog.socket rsyslog.service logshard-syslog.socket | tr '\n' ' ')" = "active active inactive " ] ||
            check "starting rsyslog.service did not stop logshard-syslog.socket: $(ct systemctl is-active syslog.socket rsyslog.service logshard-syslog.socket | tr '\n' ' ')"
        ct runuser -u ls-other -- logger -t "$ident-again" "once more"
        wait_until 30 standin_has "$ident-again: once more" ||
            check "after the conflicting starts the stand-in rsyslog did not get a logger message within 30 s"
        echo "  the way back: rsyslog (a stand-in) gets the messages again; Conflicts= stops one socket unit when the other starts"
    fi
    send ls-producer after-way-back 100 || check "a producer could not send at the end"
    echo "  the way back leaves logshardd working (producers served, no syslog socket)"

    if [ "$fails" -gt 0 ]; then
        echo "  --- journal of logshardd.service"
        ct journalctl -q -u logshardd.service -u logshardd.socket -u logshard-ship.service \
            -u logshard-syslog.socket -u logshard-prune.service --no-pager | tail -30
    fi
    stop_container
    [ "$fails" -eq 0 ]
}

set +e
boot_step "$@"
exit $?
