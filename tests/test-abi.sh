#!/usr/bin/env bash
# The library's ABI as a linker sees it:
#   - liblogshard.so exports exactly the functions client/liblogshard.map
#     lists, each at the version node the map puts it in, plus the nodes;
#   - liblogshard.a defines exactly the same names as global symbols, and
#     nothing internal (the wire codec linked into it included);
#   - every function <logshard.h> declares is in the map, and the other way
#     round;
#   - the version macros of <logshard.h> are the project's version;
#   - a program built against the header of release 0.1.0 refers to the
#     library only through LOGSHARD_1 symbols, as a binary linked against
#     0.1.0 does (test-abi-compat runs such a program against this library).
#
# Usage: test-abi.sh SOURCE_ROOT PROJECT_VERSION LIBLOGSHARD_SO LIBLOGSHARD_A COMPAT_PROGRAM
set -euo pipefail

src=$1 version=$2 so=$3 archive=$4 compat=$5
map=$src/client/liblogshard.map
header=$src/include/logshard.h
fails=0

fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

# Prints a diff of two sorted lists (one name a line) and fails when they differ.
same() {
    local what=$1 want=$2 got=$3
    if [ "$want" != "$got" ]; then
        fail "$what"
        diff <(echo "$want") <(echo "$got") | grep '^[<>]' | sed 's/^</  missing:/; s/^>/  extra:  /' >&2 || true
    fi
}

for tool in nm awk sed diff; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done

# "name@NODE" for every global of the map; comments and "local: *;" are left out.
map_symbols=$(sed 's:/\*.*\*/::; /\/\*/,/\*\//d' "$map" | awk '
    /^[A-Za-z0-9_.]+ *\{/ { node = $1; sub(/\{.*/, "", node); global = 0; next }
    /global:/             { global = 1; next }
    /local:/              { global = 0; next }
    /^\}/                 { node = ""; next }
    node != "" && global  { gsub(/[ \t;]/, ""); if ($0 != "") print $0 "@" node }' | sort)
map_names=$(echo "$map_symbols" | sed 's/@.*//' | sort)
map_nodes=$(sed 's:/\*.*\*/::; /\/\*/,/\*\//d' "$map" | sed -n 's/^\([A-Za-z0-9_.]*\) *{.*/\1/p' | sort)
[ -n "$map_names" ] || fail "no symbols found in $map"

# The shared library: functions at their nodes ("name@@NODE" is the default
# version, which is how every one of ours is defined), and the node names.
so_symbols=$(nm -D --defined-only "$so" | awk '$2 != "A" { sub("@@", "@", $3); print $3 }' | sort)
so_nodes=$(nm -D --defined-only "$so" | awk '$2 == "A" { print $3 }' | sort)
same "liblogshard.so exports other symbols or versions than client/liblogshard.map lists" \
    "$map_symbols" "$so_symbols"
same "liblogshard.so defines other version nodes than client/liblogshard.map" "$map_nodes" "$so_nodes"
if nm -D --defined-only "$so" | awk '$2 != "A"' | grep -v '@@' >/dev/null; then
    fail "liblogshard.so has a symbol that is not the default version: $(nm -D --defined-only "$so" | awk '$2 != "A"' | grep -v '@@' | tr '\n' ' ')"
fi

# The static archive: the same names, nothing more.
a_names=$(nm -g --defined-only "$archive" | awk 'NF == 3 { print $3 }' | sort)
same "liblogshard.a defines other global symbols than client/liblogshard.map lists" \
    "$map_names" "$a_names"

# The header declares exactly the functions of the map.
h_names=$(sed -n 's/^[a-z][a-z0-9_ ]*[ *]\(logshard_[a-z0-9_]*\)(.*/\1/p' "$header" | sort -u)
same "<logshard.h> declares other functions than client/liblogshard.map lists" "$map_names" "$h_names"

# The version macros of the header are the project's version (and with
# them what logshard_version() returns, which the library takes from them).
macro() { sed -n "s/^#define $1 \\(.*\\)$/\\1/p" "$header"; }
h_version="$(macro LOGSHARD_VERSION_MAJOR).$(macro LOGSHARD_VERSION_MINOR).$(macro LOGSHARD_VERSION_PATCH)"
[ "$h_version" = "$version" ] ||
    fail "<logshard.h> says version $h_version, the project (meson.build) $version"
[ "$(macro LOGSHARD_VERSION_STRING)" = "\"$version\"" ] ||
    fail "LOGSHARD_VERSION_STRING is $(macro LOGSHARD_VERSION_STRING), not \"$version\""

# A program built against the 0.1.0 header binds to LOGSHARD_1 only.
compat_refs=$(nm -D --undefined-only "$compat" | awk '$2 ~ /^logshard_/ { print $2 }' | sort)
[ -n "$compat_refs" ] || fail "$compat refers to no logshard_ symbol: is it linked with the shared library?"
for ref in $compat_refs; do
    case $ref in
    *@LOGSHARD_1) ;;
    *) fail "$compat refers to $ref; a program built against release 0.1.0 must bind to LOGSHARD_1" ;;
    esac
done

if [ "$fails" -ne 0 ]; then
    exit 1
fi
echo "liblogshard.so and liblogshard.a export exactly the $(echo "$map_names" | wc -l) functions of client/liblogshard.map ($(echo "$map_nodes" | tr '\n' ' ')); the 0.1.0 program binds to LOGSHARD_1"
