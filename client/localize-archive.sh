#!/bin/sh
# Builds the installed static archive liblogshard.a from the library's
# objects so that it defines only the public API as global symbols.
#
#   localize-archive.sh OUTPUT INPUT WORKDIR OBJCOPY AR CC...
#
# INPUT is an archive of every object of the library (client/ and the wire
# codec from common/), all compiled with hidden visibility except the calls
# marked LOGSHARD_EXPORT. The C compiler links them into one relocatable
# object (cc -r), where the library's own calls between its files are
# resolved; objcopy then makes every hidden symbol local, which leaves the
# public calls as the only globals. A program linking the archive can
# therefore define its own wire_* (or anything else) without a clash, and
# nothing internal becomes ABI by accident. tests/test-abi.sh checks the
# result against client/liblogshard.map.
set -eu

out=$1 in=$2 work=$3 objcopy=$4 ar=$5
shift 5

mkdir -p "$work"
"$@" -r -nostdlib -o "$work/logshard-all.o" \
    -Wl,--whole-archive "$in" -Wl,--no-whole-archive
"$objcopy" --localize-hidden "$work/logshard-all.o" "$work/logshard.o"
rm -f "$out"
# D: zero timestamps and owners, so the archive is reproducible.
"$ar" rcD "$out" "$work/logshard.o"
