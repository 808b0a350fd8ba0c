#!/usr/bin/env bash
# The packaging as an operator meets it:
#   1. `meson install --destdir` of this build puts every file where it belongs,
#      and the installed header, library and pkg-config file build the example
#      of logshard(3);
#   2. `systemd-analyze verify` accepts the installed units without a word;
#   3. `systemd-analyze security` scores the service (printed, not asserted);
#   4. the man pages render without a groff warning and say what the code
#      does: every option of every --help, every key of the example config and
#      every name of <logshard.h> appears in its page;
#   5. `dpkg-buildpackage -us -uc -b` builds the three packages from a copy of
#      the working tree, they hold what they should, and the extracted
#      binaries, library and header work together (a daemon, the example
#      producer, logctl cat);
#   6. when the machine allows it (root, systemd-nspawn, overlayfs), the
#      packages are installed into a throw-away overlay of / and that system
#      is booted with systemd: socket activation, the hardened unit with
#      io_uring under its seccomp filter, reload, watchdog, stop and restart,
#      group-based access, the fallback when seccomp refuses io_uring, and
#      logshard-syslog.socket: logshardd as the syslog daemon journald
#      forwards to, in place of (a stand-in for) rsyslog, and the way back;
#      logshard-prune.timer enabled, and its service pruning under its unit
#      (tests/packaging-boot.sh, in a private mount namespace).
#
# Usage: test-packaging.sh SOURCE_ROOT BUILD_ROOT. tests/meson.build passes the
# install directories of the build (LOGSHARD_PREFIX, LOGSHARD_UNITDIR, ...).
# Exit status: 0 passed, 1 failed, 77 skipped (a tool is missing; steps 1-4
# still ran and passed when only the Debian tools are missing).
# LOGSHARD_TEST_BOOT=0 leaves out step 6; LOGSHARD_KEEP_TMP=1 keeps the
# scratch directory.
set -euo pipefail

# Nothing here depends on the I/O backend or on fault injection; the units
# do not pass these either (meson test --setup threads sets the first).
unset LOGSHARD_IO_BACKEND LOGSHARD_FAULTS

SRC=$(cd "${1:?source root}" && pwd)
BUILD=$(cd "${2:?build root}" && pwd)
: "${LOGSHARD_PREFIX:?run through meson test}"

failures=0
skip_reason=
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
note() { echo "  $*"; }
step() { echo; echo "== $*"; STEP_START=$SECONDS; }
step_done() { echo "   ($((SECONDS - STEP_START)) s)"; }

need() {
    local t
    for t in "$@"; do
        if ! command -v "$t" >/dev/null 2>&1; then
            echo "SKIP: '$t' is not installed (bash scripts/install-deps.sh installs it)"
            exit 77
        fi
    done
}
need meson systemd-analyze groff man lexgrog nm cc pkg-config

T=$(mktemp -d "${TMPDIR:-/tmp}/logshard-packaging.XXXXXX")
cleanup() {
    local pid
    for pid in ${CLEANUP_PIDS:-}; do
        kill "$pid" 2>/dev/null || true
    done
    if [ -n "${LOGSHARD_KEEP_TMP:-}" ]; then
        echo "scratch directory kept: $T"
    else
        rm -rf "$T"
    fi
}
trap cleanup EXIT
CLEANUP_PIDS=

FUNCTIONS=(logshard_connect logshard_append logshard_flush logshard_close logshard_unacked
           logshard_error_message logshard_fsync_policy logshard_strerror
           logshard_connect_sized logshard_error logshard_error_origin logshard_fd
           logshard_events logshard_process logshard_version logshard_version_string
           logshard_reconnects)
VERSION=$(meson introspect "$BUILD" --projectinfo | sed -n 's/.*"version": *"\([^"]*\)".*/\1/p')

# The example program of logshard(3), taken from the page itself.
man_example() {
    sed -n '/^\.SH EXAMPLES/,/^\.SH /p' "$SRC/packaging/man/logshard.3" |
        sed -n '/^\.EX/,/^\.EE/p' | sed '1d;$d' | sed 's/\\e/\\/g; s/\\-/-/g'
}

# Starts DAEMON with its spool and sockets under DIR, waits until it listens;
# prints its pid. It starts through `env --default-signal` (coreutils 8.31 or
# later) with every signal's disposition at its default, as from a login
# shell: a shell cannot undo a SIG_IGN it inherited (SIGPIPE, when the test
# runner ignores it), and it ignores SIGINT and SIGQUIT itself in a
# background command.
start_daemon() {
    local daemon=$1 dir=$2 i admin=()
    mkdir -p "$dir"
    # Never the system's admin socket in /run/logshard.
    "$daemon" --help | grep -q -- --admin-socket && admin=(--admin-socket "$dir/admin.sock")
    env --default-signal "$daemon" --spool "$dir/spool" --socket "$dir/sock" "${admin[@]}" \
        >"$dir/log" 2>&1 &
    for i in $(seq 1 100); do
        if grep -q "listening on" "$dir/log" 2>/dev/null; then
            echo $!
            return 0
        fi
        sleep 0.05
    done
    cat "$dir/log" >&2
    return 1
}
# Stops it and waits for it to exit (it was started in a subshell, so it is
# not this shell's child to wait for).
stop_daemon() {
    local i
    kill -TERM "$1" 2>/dev/null || true
    for i in $(seq 1 200); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.05
    done
    kill -KILL "$1" 2>/dev/null || true
}

# ---------------------------------------------------------------------------
step "1. meson install --destdir"
D=$T/destdir
meson install -C "$BUILD" --no-rebuild --destdir "$D" --quiet >"$T/install.log" 2>&1 ||
    { cat "$T/install.log"; fail "meson install failed"; exit 1; }
expect=(
    "$LOGSHARD_SBINDIR/logshardd" "$LOGSHARD_BINDIR/logctl"
    "$LOGSHARD_UNITDIR/logshardd.service" "$LOGSHARD_UNITDIR/logshardd.socket"
    "$LOGSHARD_UNITDIR/logshard-syslog.socket"
    "$LOGSHARD_UNITDIR/logshard-prune.service" "$LOGSHARD_UNITDIR/logshard-prune.timer"
    "$LOGSHARD_SYSUSERSDIR/logshard.conf" "$LOGSHARD_TMPFILESDIR/logshard.conf"
    "$LOGSHARD_SYSCONFDIR/logshard/logshard.conf"
    "$LOGSHARD_INCLUDEDIR/logshard.h"
    "$LOGSHARD_LIBDIR/liblogshard.so.0" "$LOGSHARD_LIBDIR/liblogshard.so"
    "$LOGSHARD_LIBDIR/liblogshard.a" "$LOGSHARD_LIBDIR/pkgconfig/logshard.pc"
    "$LOGSHARD_MANDIR/man8/logshardd.8" "$LOGSHARD_MANDIR/man1/logctl.1"
    "$LOGSHARD_MANDIR/man5/logshard.conf.5" "$LOGSHARD_MANDIR/man3/logshard.3"
    "$LOGSHARD_DATADIR/doc/logshard/PACKAGING.md"
)
for f in "${FUNCTIONS[@]}"; do
    expect+=("$LOGSHARD_MANDIR/man3/$f.3")
done
for f in "${expect[@]}"; do
    [ -e "$D$f" ] || fail "not installed: $f"
done
for f in "$LOGSHARD_SBINDIR/logshardd" "$LOGSHARD_BINDIR/logctl"; do
    [ -x "$D$f" ] || fail "not executable: $f"
done
note "$(find "$D" \( -type f -o -type l \) | wc -l) files installed; the ${#expect[@]} expected are there"
svc=$D$LOGSHARD_UNITDIR/logshardd.service
grep -q "^ExecStart=$LOGSHARD_SBINDIR/logshardd " "$svc" ||
    fail "logshardd.service: ExecStart= does not run $LOGSHARD_SBINDIR/logshardd"
if grep -n '@[A-Z_]*@' "$svc"; then
    fail "logshardd.service: a placeholder was left unsubstituted"
fi
svc=$D$LOGSHARD_UNITDIR/logshard-prune.service
grep -q "^ExecStart=$LOGSHARD_BINDIR/logctl prune " "$svc" ||
    fail "logshard-prune.service: ExecStart= does not run $LOGSHARD_BINDIR/logctl prune"
if grep -n '@[A-Z_]*@' "$svc"; then
    fail "logshard-prune.service: a placeholder was left unsubstituted"
fi

# The shared library exports exactly the public functions, each at the
# version node of client/liblogshard.map, as debian/liblogshard0.symbols says.
exported=$(nm -D --defined-only "$D$LOGSHARD_LIBDIR/liblogshard.so.0" | awk '$2 == "T" { sub("@@", "@", $3); print $3 }' | sort)
listed=$(awk '/^ logshard_/ { print $1 }' "$SRC/debian/liblogshard0.symbols" | sort)
[ "$exported" = "$listed" ] ||
    fail "exported symbols differ from debian/liblogshard0.symbols: $(diff <(echo "$listed") <(echo "$exported") | grep '^[<>]' | tr '\n' ' ')"
for f in "${FUNCTIONS[@]}"; do
    grep -q "^ $f@LOGSHARD_[0-9.]* " "$SRC/debian/liblogshard0.symbols" || fail "liblogshard0.symbols lacks $f"
done

# The installed header, library and pkg-config file build the example of
# logshard(3), linked shared and linked static.
man_example >"$T/example.c"
export PKG_CONFIG_SYSROOT_DIR=$D PKG_CONFIG_LIBDIR=$D$LOGSHARD_LIBDIR/pkgconfig
san=()
if [ -n "${LOGSHARD_SANITIZE:-}" ] && [ "$LOGSHARD_SANITIZE" != none ]; then
    san=(-fsanitize="$LOGSHARD_SANITIZE")
fi
if cc "${san[@]}" -Wall -Werror -o "$T/example" "$T/example.c" $(pkg-config --cflags --libs logshard) 2>"$T/cc.log" &&
   cc "${san[@]}" -Wall -Werror -o "$T/example-static" "$T/example.c" $(pkg-config --cflags logshard) \
       "$D$(pkg-config --variable=libdir logshard | sed "s|^$D||")/liblogshard.a" 2>>"$T/cc.log"; then
    note "the example of logshard(3) builds against the installed files (shared and static)"
else
    cat "$T/cc.log"
    fail "the example of logshard(3) does not build against the installed files"
fi
unset PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_LIBDIR
step_done

# ---------------------------------------------------------------------------
step "2. systemd-analyze verify"
# systemd 252 verifies units inside a root directory (--root): the installed
# tree, so that ExecStart= finds the installed daemon. The root also needs the
# units ours depend on (sysinit.target, sockets.target, ...), taken from this
# machine, and /bin/kill for ExecReload=; Documentation=man: pages are looked
# up by running man(1), pointed at the installed pages with MANPATH.
R=$T/verify-root
cp -a "$D" "$R"
mkdir -p "$R/usr/lib/systemd/system" "$R/bin"
for dir in /lib/systemd/system /usr/lib/systemd/system; do
    [ -d "$dir" ] || continue
    find "$dir" -maxdepth 1 ! -name 'logshardd.*' ! -name 'logshard-*' ! -path "$dir" \
        -exec cp -a -n {} "$R/usr/lib/systemd/system/" \;
done
cp "$(type -P kill)" "$R/bin/kill"
verify_out=$(MANPATH="$D$LOGSHARD_MANDIR:" systemd-analyze verify --root="$R" \
                 logshardd.socket logshardd.service logshard-ship.service \
                 logshard-syslog.socket logshard-prune.service logshard-prune.timer 2>&1) ||
    fail "systemd-analyze verify failed"
if [ -n "$verify_out" ]; then
    echo "$verify_out"
    fail "systemd-analyze verify had something to say about the units"
else
    note "logshardd.socket, logshardd.service, logshard-ship.service, logshard-syslog.socket, logshard-prune.service and logshard-prune.timer verify without a warning (systemd $(systemd-analyze --version | awk 'NR == 1 { print $2 }'))"
fi
step_done

# ---------------------------------------------------------------------------
step "3. systemd-analyze security"
if security_out=$(systemd-analyze security --offline=true --root="$R" logshardd.service 2>&1); then
    echo "$security_out" | grep '✗' | sed 's/  */ /g; s/^/  /'
    echo "$security_out" | grep 'Overall exposure' | sed 's/^→ */  /'
else
    echo "$security_out"
    fail "systemd-analyze security could not load logshardd.service"
fi
step_done

# ---------------------------------------------------------------------------
step "4. man pages"
for page in "$SRC"/packaging/man/*.[1-8]; do
    name=$(basename "$page")
    out=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
    [ -z "$out" ] || { echo "$out"; fail "$name: groff warnings"; }
    out=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
    [ -z "$out" ] || { echo "$out"; fail "$name: man -l warnings"; }
    lexgrog "$page" >/dev/null 2>&1 || fail "$name: lexgrog cannot read its NAME section"
done
note "$(ls "$SRC"/packaging/man/*.[1-8] | wc -l) pages render without warnings"

# Every long option of every --help appears in the page (as \-\-option).
mentions_option() {
    local o=${2#--}
    grep -qF -e "\\-\\-$o" -e "\\-\\-${o//-/\\-}" -- "$1"
}
logctl=$D$LOGSHARD_BINDIR/logctl
logshardd=$D$LOGSHARD_SBINDIR/logshardd
export LD_LIBRARY_PATH=$D$LOGSHARD_LIBDIR
for opt in $("$logshardd" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    mentions_option "$SRC/packaging/man/logshardd.8" "$opt" || fail "logshardd.8 does not document $opt"
done
commands=$("$logctl" --help | awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')
for cmd in $commands; do
    grep -q "^\.SS \"logctl $cmd" "$SRC/packaging/man/logctl.1" || fail "logctl.1 has no section for 'logctl $cmd'"
    for opt in $("$logctl" "$cmd" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
        mentions_option "$SRC/packaging/man/logctl.1" "$opt" || fail "logctl.1 does not document 'logctl $cmd $opt'"
    done
done
# Every section and key of the example configuration appears in logshard.conf(5).
# The lines of [producer_quotas] are no keys but name patterns of the
# operator's (PATTERN = SIZE), its example's "audit = 0" among them.
for key in $(awk '/^\[/ { sect = $0 }
                  sect != "[producer_quotas]" && /^# *[a-z_]+ = / {
                      sub(/^# */, ""); sub(/ = .*/, ""); print }' "$SRC/config/logshard.conf" |
             sort -u); do
    grep -qw -- "$key" "$SRC/packaging/man/logshard.conf.5" || fail "logshard.conf.5 does not document '$key'"
done
for sect in $(sed -n 's/^\[\([a-z]*\)\]$/\1/p' "$SRC/config/logshard.conf"); do
    grep -q "^\.SH \"\[$sect\] SECTION\"" "$SRC/packaging/man/logshard.conf.5" ||
        fail "logshard.conf.5 has no section for [$sect]"
done
# Every function and macro of <logshard.h> appears in logshard(3).
for name in $(grep -o 'logshard_[a-z_]*(' "$SRC/include/logshard.h" | tr -d '(' | sort -u) \
            $(grep -o 'LOGSHARD_[A-Z0-9_]*' "$SRC/include/logshard.h" | grep -v '^LOGSHARD_H$' | sort -u); do
    grep -qw -- "$name" "$SRC/packaging/man/logshard.3" || fail "logshard.3 does not document $name"
done
for f in $(grep -o 'logshard_[a-z_]*(' "$SRC/include/logshard.h" | tr -d '(' | sort -u); do
    [ -e "$D$LOGSHARD_MANDIR/man3/$f.3" ] || fail "man3/$f.3 is not installed (packaging/meson.build)"
    printf '%s\n' "${FUNCTIONS[@]}" | grep -qx "$f" || fail "$f is missing from FUNCTIONS in this script"
done
unset LD_LIBRARY_PATH
note "every --help option, config key and public name is in its man page"
step_done

# ---------------------------------------------------------------------------
step "5. Debian packages"
debian_tools=(dpkg-buildpackage dpkg-checkbuilddeps dpkg-deb dpkg-architecture dh)
for t in "${debian_tools[@]}"; do
    command -v "$t" >/dev/null 2>&1 || skip_reason="'$t' is not installed (bash scripts/install-deps.sh installs it)"
done
if [ -z "$skip_reason" ] && ! dpkg-checkbuilddeps "$SRC/debian/control" 2>"$T/builddeps.log"; then
    skip_reason="build dependencies missing: $(cat "$T/builddeps.log")"
fi
if [ -n "$skip_reason" ]; then
    echo "SKIP: package build: $skip_reason"
else
    # Build from a copy of the working tree: the files git tracks plus new
    # ones it does not ignore (so uncommitted work is built as CI would build
    # it once committed), never the build directories.
    P=$T/deb/logshard-$VERSION
    mkdir -p "$P"
    if git -C "$SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (cd "$SRC" && git ls-files -z --cached --others --exclude-standard |
             while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
             tar -cf - --null -T -) | tar -xf - -C "$P"
    else
        (cd "$SRC" && tar -cf - --exclude=./.git --exclude='./build*' --exclude=./debian/tmp .) |
            tar -xf - -C "$P"
    fi
    build_start=$SECONDS
    if (cd "$P" && dpkg-buildpackage -us -uc -b) >"$T/dpkg-buildpackage.log" 2>&1; then
        note "dpkg-buildpackage -us -uc -b: $((SECONDS - build_start)) s"
    else
        tail -40 "$T/dpkg-buildpackage.log"
        fail "dpkg-buildpackage failed (log above)"
    fi
    # Nothing of the build may land in the source tree itself.
    for f in debian/tmp debian/files debian/.debhelper debian/logshard debian/debhelper-build-stamp; do
        [ ! -e "$SRC/$f" ] || fail "$f exists in the source tree (left by a package build there?)"
    done
    MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
    ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
    debver=$(cd "$P" && dpkg-parsechangelog -S Version)
    declare -A contents=(
        [logshard]="./usr/sbin/logshardd ./usr/bin/logctl ./etc/logshard/logshard.conf
                    ./lib/systemd/system/logshardd.service ./lib/systemd/system/logshardd.socket
                    ./lib/systemd/system/logshard-ship.service ./usr/share/doc/logshard/SHIP.md
                    ./lib/systemd/system/logshard-syslog.socket
                    ./lib/systemd/system/logshard-prune.service
                    ./lib/systemd/system/logshard-prune.timer ./usr/share/doc/logshard/RETENTION.md
                    ./usr/lib/sysusers.d/logshard.conf ./usr/lib/tmpfiles.d/logshard.conf
                    ./usr/lib/sysctl.d/50-logshard.conf
                    ./usr/share/man/man8/logshardd.8.gz ./usr/share/man/man1/logctl.1.gz
                    ./usr/share/man/man5/logshard.conf.5.gz ./usr/share/doc/logshard/copyright
                    ./usr/share/doc/logshard/PACKAGING.md"
        [liblogshard0]="./usr/lib/$MA/liblogshard.so.0 ./usr/lib/$MA/liblogshard.so.$VERSION"
        [liblogshard-dev]="./usr/include/logshard.h ./usr/lib/$MA/liblogshard.so
                           ./usr/lib/$MA/liblogshard.a ./usr/lib/$MA/pkgconfig/logshard.pc
                           ./usr/share/man/man3/logshard.3.gz"
    )
    for f in "${FUNCTIONS[@]}"; do
        contents[liblogshard-dev]+=" ./usr/share/man/man3/$f.3.gz"
    done
    X=$T/deb/root
    for pkg in logshard liblogshard0 liblogshard-dev; do
        deb=$T/deb/${pkg}_${debver}_$ARCH.deb
        if [ ! -f "$deb" ]; then
            fail "$pkg: no $(basename "$deb")"
            continue
        fi
        dpkg-deb -c "$deb" | awk '{ print $6 }' >"$T/deb/$pkg.list"
        for path in ${contents[$pkg]}; do
            # dh_compress leaves short documents uncompressed: either will do.
            grep -qxF -e "$path" -e "$path.gz" "$T/deb/$pkg.list" ||
                fail "$pkg: $path is not in the package"
        done
        note "${pkg}_${debver}: $(grep -vc '/$' "$T/deb/$pkg.list") files, the expected ones included"
        dpkg -x "$deb" "$X"
    done
    if [ -f "$T/deb/logshard_${debver}_$ARCH.deb" ]; then
        dpkg-deb -e "$T/deb/logshard_${debver}_$ARCH.deb" "$T/deb/control"
        grep -qx /etc/logshard/logshard.conf "$T/deb/control/conffiles" ||
            fail "logshard: /etc/logshard/logshard.conf is not a conffile"
        # The user must exist before tmpfiles hands it the spool.
        users_line=$(grep -n 'systemd-sysusers' "$T/deb/control/postinst" | head -1 | cut -d: -f1)
        tmpfiles_line=$(grep -n 'systemd-tmpfiles' "$T/deb/control/postinst" | head -1 | cut -d: -f1)
        [ -n "$users_line" ] && [ -n "$tmpfiles_line" ] && [ "$users_line" -lt "$tmpfiles_line" ] ||
            fail "logshard.postinst does not run systemd-sysusers before systemd-tmpfiles"
        grep -q "deb-systemd-helper enable 'logshardd.socket'" "$T/deb/control/postinst" ||
            fail "logshard.postinst does not enable logshardd.socket"
        # Retention does nothing until configured: its timer is enabled, its
        # service never started by the installation.
        grep -q "deb-systemd-helper enable 'logshard-prune.timer'" "$T/deb/control/postinst" ||
            fail "logshard.postinst does not enable logshard-prune.timer"
        ! grep -q "deb-systemd-invoke .*start.*logshard-prune.service" "$T/deb/control/postinst" ||
            fail "logshard.postinst starts logshard-prune.service"
        ! grep -q "deb-systemd-helper enable 'logshard-prune.service'" "$T/deb/control/postinst" ||
            fail "logshard.postinst enables logshard-prune.service"
    fi
    if [ -x "$X/usr/sbin/logshardd" ] && [ -x "$X/usr/bin/logctl" ]; then
        v=$("$X/usr/sbin/logshardd" --version) || true
        [ "$v" = "logshardd $VERSION" ] || fail "packaged logshardd --version says '$v'"
        v=$("$X/usr/bin/logctl" --version) || true
        [ "$v" = "logctl (logshard) $VERSION" ] || fail "packaged logctl --version says '$v'"
        # The packaged daemon, the example producer built against the
        # packaged header and library, and the packaged logctl together.
        cc -Wall -o "$T/deb/example" "$T/example.c" -I"$X/usr/include" \
            -L"$X/usr/lib/$MA" -llogshard -Wl,-rpath,"$X/usr/lib/$MA" 2>"$T/deb/cc.log" ||
            { cat "$T/deb/cc.log"; fail "the example does not build against the packages"; }
        if pid=$(start_daemon "$X/usr/sbin/logshardd" "$T/deb/run"); then
            CLEANUP_PIDS=$pid
            LOGSHARD_SOCKET=$T/deb/run/sock "$T/deb/example" || fail "the example producer failed"
            stop_daemon "$pid"
            CLEANUP_PIDS=
            got=$("$X/usr/bin/logctl" cat "$T"/deb/run/spool/done/billing.*.shard 2>&1) || true
            [ "$got" = "invoice 42 paid" ] || fail "logctl cat of the example's shard printed '$got'"
            note "packaged logshardd, liblogshard and logctl work together (--version $VERSION)"
        else
            fail "the packaged logshardd did not start"
        fi
    fi
fi
step_done

# ---------------------------------------------------------------------------
step "6. boot with systemd (nspawn)"
boot_skip=
if [ "${LOGSHARD_TEST_BOOT:-1}" = 0 ]; then
    boot_skip="LOGSHARD_TEST_BOOT=0"
elif [ "$(id -u)" != 0 ]; then
    boot_skip="not root"
elif [ -n "$skip_reason" ] || [ ! -f "${T}/deb/logshard_${debver:-}_${ARCH:-}.deb" ]; then
    boot_skip="no packages were built"
else
    for t in systemd-nspawn nsenter unshare; do
        command -v "$t" >/dev/null 2>&1 || boot_skip="'$t' is not installed (package systemd-container)"
    done
fi
if [ -n "$boot_skip" ]; then
    echo "skipped: $boot_skip"
else
    # Whether io_uring works here at all, outside any sandbox: under the
    # unit it must then work too.
    expect_backend="thread-pool"
    if pid=$(start_daemon "$X/usr/sbin/logshardd" "$T/deb/probe"); then
        grep -q "io_uring$" "$T/deb/probe/log" && expect_backend="io_uring"
        stop_daemon "$pid"
    fi
    debs=("$T/deb/logshard_${debver}_$ARCH.deb" "$T/deb/liblogshard0_${debver}_$ARCH.deb")
    # A private mount namespace: the overlay and its tmpfs vanish with it.
    set +e
    timeout -k 10 300 unshare --mount --propagation private -- \
        bash "$SRC/tests/packaging-boot.sh" "$T/boot" "$expect_backend" "${debs[@]}"
    rc=$?
    set -e
    case $rc in
    0) ;;
    77) echo "skipped: this machine cannot boot a container (see above)" ;;
    *) fail "the packaged service does not behave under systemd (step 6)" ;;
    esac
fi
step_done

echo
if [ "$failures" -gt 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
if [ -n "$skip_reason" ]; then
    echo "steps 1-4 passed; the package build was skipped: $skip_reason"
    exit 77
fi
echo "all packaging checks passed"
