#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets in common/fuzz: small valid
inputs, so the fuzzer starts from inputs that reach deep into each parser
(a CRC or a name rule is hard to guess), and small invalid ones, one per
refusal the parser knows, so each error path is replayed by `meson test`.

Run it from anywhere: python3 common/fuzz/make-seeds.py. It replaces the
files named seed-* in corpus/<target>/ and leaves every other file there
alone: regression inputs (regress-*) are kept by hand, not generated.
It also writes fuzz-config.dict, the config keys as a libFuzzer dictionary,
and fuzz-json.dict, JSON's tokens and the admin protocol's member names.

The byte layouts are those of docs/PROTOCOL.md and docs/FORMAT.md (and
common/wire.h, common/shard_format.h); the values of the config keys follow
config/logshard.conf; the JSON seeds are the admin requests and replies of
docs/PROTOCOL.md and the edges of common/json.h.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def crc32c_extend(crc, data):
    """CRC32C (Castagnoli, reflected 0x82F63B78), chained like crc32c_extend."""
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def crc32c(data):
    return crc32c_extend(0, data)


# ---- wire ----------------------------------------------------------------

HELLO, WELCOME, APPEND, ACK, ERROR = 1, 2, 3, 4, 5

# fuzz-wire.c reads two bytes first: indexes into its limit tables. Index 4
# is the daemon's defaults (max_frame_bytes 4 MiB, max_record_bytes 1 MiB).
DEFAULTS = bytes([4, 4])
SMALL_RECORDS = bytes([4, 2])  # max_record_bytes 16
SMALL_FRAMES = bytes([2, 4])  # max_frame_bytes 64


def frame(ftype, payload, length=None, reserved=b"\0\0\0"):
    n = len(payload) if length is None else length
    return struct.pack("<IB", n, ftype) + reserved + payload


def hello(name, version=1, flags=0):
    return frame(HELLO, struct.pack("<HH", version, flags) + name)


def append(records, count=None):
    body = b"".join(struct.pack("<I", len(r)) + r for r in records)
    n = len(records) if count is None else count
    return frame(APPEND, struct.pack("<I", n) + body)


def welcome(version=1, policy=2, reserved=0, max_record=1 << 20, max_frame=4 << 20):
    return frame(WELCOME, struct.pack("<HBBII", version, policy, reserved, max_record, max_frame))


def ack(n):
    return frame(ACK, struct.pack("<Q", n))


def error(code, message):
    return frame(ERROR, struct.pack("<I", code) + message)


def wire_seeds():
    s = {}
    s["session"] = DEFAULTS + hello(b"app") + append([b"one", b"two", b"three"]) + append([b"x"])
    s["replies"] = DEFAULTS + welcome() + ack(4) + error(90, b"record 0 is over max_record_bytes")
    s["hello-64-byte-name"] = DEFAULTS + hello(b"n" * 64)
    s["hello-65-byte-name"] = DEFAULTS + hello(b"n" * 65)
    s["hello-traversal"] = DEFAULTS + hello(b"../x")
    s["hello-slash"] = DEFAULTS + hello(b"a/b")
    s["hello-dot"] = DEFAULTS + hello(b".hidden")
    s["hello-empty-name"] = DEFAULTS + hello(b"")
    s["hello-not-utf8"] = DEFAULTS + hello(b"\xff\xfe")
    s["hello-short"] = DEFAULTS + frame(HELLO, b"\x01\x00")
    s["hello-version-2"] = DEFAULTS + hello(b"app", version=2)
    s["hello-flags"] = DEFAULTS + hello(b"app", flags=1)
    s["append-no-records"] = DEFAULTS + hello(b"app") + append([], count=0)
    s["append-short"] = DEFAULTS + hello(b"app") + frame(APPEND, b"\x01\x00")
    s["append-count-too-high"] = DEFAULTS + hello(b"app") + append([b"a"], count=2)
    s["append-left-over"] = DEFAULTS + hello(b"app") + frame(APPEND, struct.pack("<II", 1, 1) + b"ab")
    s["append-empty-record"] = DEFAULTS + hello(b"app") + append([b""])
    s["append-record-past-end"] = DEFAULTS + hello(b"app") + frame(
        APPEND, struct.pack("<II", 1, 100) + b"short")
    s["append-record-past-end-then-more"] = DEFAULTS + hello(b"app") + frame(
        APPEND, struct.pack("<II", 2, 100) + b"short")
    s["append-prefix-past-end"] = DEFAULTS + hello(b"app") + frame(
        APPEND, struct.pack("<II", 2, 1) + b"a" + b"\x01\x00")
    s["append-over-max-record"] = SMALL_RECORDS + hello(b"app") + append([b"a", b"b" * 17])
    s["append-at-max-record"] = SMALL_RECORDS + hello(b"app") + append([b"b" * 16])
    s["append-many"] = DEFAULTS + hello(b"app") + append([bytes([i]) * (i % 7 + 1) for i in range(40)])
    s["header-4gib-length"] = DEFAULTS + frame(APPEND, b"", length=0xFFFFFFFF)
    s["header-over-ceiling"] = bytes([6, 4]) + frame(APPEND, b"", length=(256 << 20) + 1)
    s["header-over-max-frame"] = SMALL_FRAMES + hello(b"app") + append([b"z" * 80])
    s["header-reserved"] = DEFAULTS + frame(HELLO, b"", reserved=b"\0\1\0")
    s["header-unknown-type"] = DEFAULTS + frame(9, b"")
    s["header-type-0"] = DEFAULTS + frame(0, b"")
    s["partial-frame"] = DEFAULTS + hello(b"app") + frame(APPEND, b"\x01\0\0\0\x05\0\0\0ab", length=13)
    s["partial-header"] = DEFAULTS + hello(b"app") + b"\x10\0\0"
    s["welcome-short"] = DEFAULTS + frame(WELCOME, b"\x01\0\x02\0")
    s["welcome-reserved"] = DEFAULTS + welcome(reserved=1)
    s["ack-short"] = DEFAULTS + frame(ACK, b"\x01\0\0\0")
    s["error-code-0"] = DEFAULTS + error(0, b"no")
    s["error-no-message"] = DEFAULTS + error(5, b"")
    s["error-nul-in-message"] = DEFAULTS + error(5, b"a\0b")
    s["error-1024"] = DEFAULTS + error(22, b"m" * 1024)
    s["error-1025"] = DEFAULTS + error(22, b"m" * 1025)
    s["error-short"] = DEFAULTS + frame(ERROR, b"\x05\0")
    s["empty-frames"] = DEFAULTS + b"".join(frame(t, b"") for t in (HELLO, WELCOME, APPEND, ACK, ERROR))
    s["limits-zero"] = bytes([0, 0]) + hello(b"app")
    s["empty"] = b""
    s["one-byte"] = b"\x04"
    return s


# ---- shard files -----------------------------------------------------------

MAGIC = b"LOGSHRD\x01"


STREAM = bytes(range(0x10, 0x20))


def shard_header(producer=b"app", uid=1000, gid=1000, pid=4242, shard_id=1,
                 created_ns=1_700_000_000_000_000_000, version=1, header_len=None,
                 producer_len=None, bad_crc=False, stream=None, first=0, source=None,
                 hflags=0):
    """stream (16 bytes, zeros for none) and first give the version 3 fields,
    written between the fixed part and the name; None leaves them out.
    source (and hflags) give version 4's, after the stream fields; None
    leaves them out."""
    extra = b"" if stream is None else stream + struct.pack("<Q", first)
    if source is not None:
        extra += struct.pack("<HH", source, hflags)
    size = 42 + len(extra) + len(producer) + 4
    h = MAGIC + struct.pack("<HHIIIQQH", version, size if header_len is None else header_len,
                            uid, gid, pid, shard_id, created_ns,
                            len(producer) if producer_len is None else producer_len)
    h += extra + producer
    crc = crc32c(h) ^ (1 if bad_crc else 0)
    return h + struct.pack("<I", crc)


CREDS_FLAG = 0x80000000


def record(payload, ts=1_700_000_000_000_000_001, length=None, bad_crc=False, creds=None,
           lflags=None):
    """creds (pid, uid, gid) makes a version 4 record with credentials: the
    flag in the length field, the block after the timestamp, both under the
    CRC. lflags, when given, replaces the length field's high bits."""
    n = len(payload) if length is None else length
    if lflags is None:
        lflags = 0 if creds is None else CREDS_FLAG
    head = struct.pack("<I", n | lflags)
    stamp = struct.pack("<Q", ts)
    if creds is not None:
        stamp += struct.pack("<III", *creds)
    crc = crc32c_extend(crc32c_extend(crc32c(head), stamp), payload) ^ (1 if bad_crc else 0)
    return head + struct.pack("<I", crc) + stamp + payload


def trailer(shard_len, records, newest_ns=1_700_000_000_000_000_002, align=64, length=None):
    """The seal trailer of a version 2 shard of shard_len bytes."""
    n = length
    if n is None:
        end = shard_len + 40
        n = (end + align - 1) // align * align - shard_len if align > 1 else 40
    head = struct.pack("<II", 0x4C414553, n)
    tail = struct.pack("<QQQI", shard_len, records, newest_ns, n)
    return head + b"\0" * (n - 40) + tail + struct.pack("<I", crc32c_extend(crc32c(head), tail))


def sealed(producer=b"app", records=(b"one", b"two", b"three"), **kw):
    kw.setdefault("version", 2)
    body = shard(producer, records, **kw)
    return body + trailer(len(body), len(records))


def shard(producer=b"app", records=(b"one", b"two", b"three"), **kw):
    return shard_header(producer, **kw) + b"".join(record(r, ts=1_700_000_000_000_000_000 + i)
                                                   for i, r in enumerate(records))


def shard_seeds():
    s = {}
    s["shard"] = shard()
    s["shard-one-byte-records"] = shard(records=[bytes([i]) for i in range(32)])
    s["shard-64-byte-name"] = shard(producer=b"p" * 64)
    s["header-only"] = shard_header()
    s["merged"] = shard(b"alpha", shard_id=1) + shard(b"beta", shard_id=2) + shard(b"alpha", shard_id=3)
    s["merged-empty-shard-between"] = shard(b"a") + shard_header(b"b") + shard(b"c")
    s["torn-record"] = shard()[:-2]
    s["torn-record-header"] = shard() + record(b"four")[:9]
    s["torn-header"] = shard_header()[:30]
    s["torn-second-header"] = shard() + shard_header(b"next")[:20]
    s["magic-only"] = MAGIC
    s["magic-prefix"] = MAGIC[:4]
    s["bad-magic"] = b"LOGSHRD\x02" + shard()[8:]
    s["no-header"] = record(b"orphan")
    s["bad-record-crc"] = shard_header() + record(b"one") + record(b"two", bad_crc=True) + record(b"three")
    s["bad-header-crc"] = shard_header(bad_crc=True) + record(b"one")
    s["zero-length-record"] = shard_header() + record(b"", length=0)
    s["huge-record-length"] = shard_header() + record(b"abc", length=0xFFFFFFFF)
    s["record-length-past-end"] = shard_header() + record(b"abc", length=4096)
    s["record-at-format-max"] = shard_header() + record(b"abc", length=256 << 20)
    s["version-2"] = shard(version=2)
    s["version-4-without-its-fields"] = shard(version=4)
    s["version-5"] = shard(version=5)
    s["version-3-without-its-fields"] = shard(version=3)
    s["sealed"] = sealed()
    s["sealed-merged"] = sealed(b"alpha", shard_id=1) + sealed(b"beta", records=(), shard_id=2)
    s["sealed-then-record"] = sealed() + record(b"late")
    s["sealed-torn-trailer"] = sealed()[:-7]
    s["sealed-wrong-count"] = shard(version=2) + trailer(len(shard(version=2)), 2)
    s["trailer-in-version-1"] = shard() + trailer(len(shard()), 3)
    s["header-len-mismatch"] = shard_header(header_len=60)
    s["producer-len-0"] = shard_header(producer=b"", producer_len=0)
    s["producer-len-65"] = shard_header(producer=b"p" * 65)
    s["producer-dot"] = shard(producer=b".hidden")
    s["producer-slash"] = shard(producer=b"a/b")
    s["garbage-after-shard"] = shard() + b"\0" * 20
    s["garbage-between-shards"] = shard(b"a") + b"junk" + shard(b"b")
    s["empty"] = b""
    # Salvage (shard_reader_skip_damage): damage the reader must skip alone
    # or resynchronise after, in merged files of sealed shards.
    hdr2 = shard_header(version=2)
    body = hdr2 + record(b"one") + record(b"two", bad_crc=True) + record(b"three")
    s["salvage-bad-crc-sealed"] = body + trailer(len(body), 3)
    bad_len = hdr2 + record(b"one") + record(b"two", length=9) + record(b"three")
    s["salvage-bad-length-merged"] = (bad_len + trailer(len(bad_len), 3) +
                                      sealed(b"beta", shard_id=2) + sealed(b"gamma", shard_id=3))
    s["salvage-bad-header-merged"] = (shard(version=2, bad_crc=True) + sealed(b"beta", shard_id=2))
    later = sealed(b"beta", shard_id=2)
    third = sealed(b"gamma", shard_id=3)
    # A length that lands exactly on the third shard's second record.
    two_at = len(hdr2) + len(record(b"one"))
    first = len(body) + len(trailer(len(body), 3))
    target = first + len(later) + len(shard_header(b"gamma", version=2)) + len(record(b"one"))
    into = hdr2 + record(b"one") + record(b"two", length=target - two_at - 16) + record(b"three")
    s["salvage-length-onto-third-shard"] = into + trailer(len(into), 3) + later + third
    inner = hdr2 + record(shard_header(b"inner", version=2), bad_crc=True) + record(b"after")
    s["salvage-magic-in-damaged-payload"] = inner + trailer(len(inner), 2) + later
    s["salvage-bad-trailer-merged"] = sealed()[:-1] + b"\x01" + later
    # Version 3: the producer's stream and the first record's position.
    v3 = dict(version=3, stream=STREAM)
    s["v3-shard"] = shard(first=500, **v3)
    s["v3-sealed"] = sealed(first=500, **v3)
    s["v3-64-byte-name"] = shard(producer=b"p" * 64, first=1, **v3)
    s["v3-no-stream"] = sealed(version=3, stream=bytes(16))
    s["v3-position-without-stream"] = shard(version=3, stream=bytes(16), first=7)
    s["v3-position-limit"] = shard(first=(1 << 63) - 1, **v3)
    s["v3-position-out-of-range"] = shard(first=1 << 63, **v3)
    s["v3-stream-as-version-2"] = shard(version=2, stream=STREAM, first=5)
    s["v3-torn-header"] = shard_header(first=5, **v3)[:60]
    s["v3-bad-header-crc"] = shard(first=5, bad_crc=True, **v3)
    s["v3-merged-with-v2"] = (sealed(b"alpha", shard_id=1, first=0, **v3) +
                              sealed(b"beta", shard_id=2) +
                              sealed(b"alpha", shard_id=3, first=3, **v3))
    hdr3 = shard_header(first=100, **v3)
    crc3 = hdr3 + record(b"one") + record(b"two", bad_crc=True) + record(b"three")
    s["v3-salvage-bad-crc-sealed"] = crc3 + trailer(len(crc3), 3)
    len3 = hdr3 + record(b"one") + record(b"two", length=9) + record(b"three")
    s["v3-salvage-resync-merged"] = (len3 + trailer(len(len3), 3) + sealed(b"beta", shard_id=2) +
                                     sealed(b"app", shard_id=3, first=103, **v3))
    # An active shard with zeros written ahead of its records, one of them
    # caught while it was being copied in (its end still zero).
    s["active-zeros-ahead"] = shard() + bytes(4096)
    half = record(b"four")
    s["active-record-being-written"] = shard() + half[:-1] + bytes(1 + 4096)
    # Version 4: the source in the header, the sender's credentials on the
    # records that carry them (the flag in the length field).
    s.update(v4_seeds())
    return s


def v4_shard(producer=b"cron.u0", recs=None, source=1, stream=bytes(16), first=0, seal=True,
             **kw):
    """A version 4 shard of the records given as (payload, creds or None)."""
    if recs is None:
        recs = [(b"<13>cron[1]: one", (101, 0, 0)), (b"<13>cron[2]: two", None),
                (b"<13>cron[3]: three", (103, 0, 0))]
    body = shard_header(producer, version=4, stream=stream, first=first, source=source, **kw)
    body += b"".join(record(p, ts=1_700_000_000_000_000_000 + i, creds=c)
                     for i, (p, c) in enumerate(recs))
    return body + trailer(len(body), len(recs)) if seal else body


def v4_seeds():
    s = {}
    v4 = dict(version=4, stream=bytes(16))
    s["v4-datagram"] = v4_shard()
    s["v4-datagram-unsealed"] = v4_shard(seal=False)
    s["v4-stream-source"] = v4_shard(b"app", source=2, stream=STREAM, first=40,
                                     recs=[(b"<14>x", None), (b"<14>y", None)])
    s["v4-unknown-source"] = v4_shard(source=3)
    s["v4-largest-source"] = v4_shard(source=0xFFFF)
    s["v4-client-source"] = v4_shard(source=0)
    s["v4-header-flags"] = v4_shard(hflags=1)
    s["v4-header-flags-top"] = v4_shard(hflags=0x8000)
    s["v4-64-byte-name"] = v4_shard(producer=b"p" * 64)
    s["v4-position-without-stream"] = v4_shard(first=7)
    s["v4-as-version-3"] = shard_header(version=3, stream=bytes(16), source=1)
    s["v4-torn-header"] = shard_header(source=1, **v4)[:68]
    s["v4-bad-header-crc"] = shard_header(source=1, bad_crc=True, **v4)
    s["v4-creds-one-byte"] = v4_shard(recs=[(bytes([i]), (i, i, i)) for i in range(1, 9)])
    s["v4-creds-largest-ids"] = v4_shard(recs=[(b"m", (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF))])
    hdr4 = shard_header(b"cron.u0", source=1, **v4)
    s["v4-creds-torn-in-block"] = hdr4 + record(b"one", creds=(1, 2, 3))[:22]
    s["v4-creds-torn-in-payload"] = hdr4 + record(b"one", creds=(1, 2, 3))[:-1]
    s["v4-creds-at-format-max"] = hdr4 + record(b"abc", length=256 << 20, creds=(1, 2, 3))
    s["v4-reserved-bit-30"] = hdr4 + record(b"one", lflags=0x40000000)
    s["v4-reserved-bit-29"] = hdr4 + record(b"one", lflags=0x20000000)
    s["v4-creds-and-reserved"] = hdr4 + record(b"one", creds=(1, 2, 3), lflags=0xC0000000)
    s["v4-creds-zero-length"] = hdr4 + record(b"", creds=(1, 2, 3))
    hdr3 = shard_header(version=3, stream=STREAM, first=5)
    s["v4-creds-in-version-3"] = hdr3 + record(b"one") + record(b"two", creds=(1, 2, 3))
    s["v4-creds-in-version-2"] = (shard_header(version=2) + record(b"one") +
                                  record(b"two", creds=(1, 2, 3)))
    # Salvage: a flipped credential byte (the framing holds: skipped alone),
    # a cleared flag (the claimed end moves by 12 bytes: resync).
    body = (hdr4 + record(b"one", creds=(1, 0, 0)) + record(b"two", creds=(2, 0, 0)) +
            record(b"three"))
    at = len(hdr4) + len(record(b"one", creds=(1, 0, 0))) + 16
    flipped = body[:at] + bytes([body[at] ^ 0x01]) + body[at + 1:]
    s["v4-salvage-bad-creds-sealed"] = flipped + trailer(len(flipped), 3)
    at = len(hdr4) + len(record(b"one", creds=(1, 0, 0))) + 3
    cleared = body[:at] + bytes([body[at] & 0x7F]) + body[at + 1:]
    s["v4-salvage-flag-cleared-merged"] = (cleared + trailer(len(cleared), 3) +
                                           v4_shard(b"next.u0", shard_id=2))
    s["v4-merged-with-v2-v3"] = (sealed(b"alpha", shard_id=1) +
                                 sealed(b"beta", shard_id=2, version=3, stream=STREAM, first=9) +
                                 v4_shard(shard_id=3) +
                                 shard(b"delta", shard_id=4, version=1))
    return s


# ---- config ----------------------------------------------------------------

# section, key, a valid value, an out-of-range or malformed value
KEYS = [
    ("daemon", "spool", "/var/lib/logshard", ""),
    ("daemon", "socket", "/run/logshard/logshard.sock", ""),
    ("daemon", "socket_mode", "0660", "0999"),
    ("daemon", "io_backend", "auto", "epoll"),
    ("daemon", "socket_group", "adm", ""),
    ("sync", "fsync", "batch", "sometimes"),
    ("sync", "fsync_interval", "1s", "0ms"),
    ("limits", "max_record_bytes", "1M", "257M"),
    ("limits", "max_frame_bytes", "4M", "4095"),
    ("limits", "session_buffer_bytes", "8MiB", "12Q"),
    ("limits", "max_producers", "1024", "0"),
    ("limits", "max_producers_per_uid", "16", "+5"),
    ("limits", "memory_limit_bytes", "256M", "512K"),
    ("limits", "max_open_shards", "4096", "1e3"),
    ("limits", "hello_timeout_ms", "10000", "5"),
    ("limits", "idle_timeout_ms", "1m", "2d"),
    ("access", "allowed_uids", "0, root", "nosuchuser-fuzz"),
    ("access", "allowed_gids", "0 root", "4294967295"),
    ("shard", "max_shard_bytes", "64M", "18446744073709551616"),
    ("shard", "max_shard_age", "1h", "999999999999999999d"),
]


def full_config():
    out, section = [], None
    for sec, key, good, _ in KEYS:
        if sec != section:
            out.append("\n[%s]" % sec)
            section = sec
        out.append("%s = %s" % (key, good))
    return ("\n".join(out) + "\n").encode()


def config_seeds():
    s = {}
    s["full"] = full_config()
    s["example"] = open(os.path.join(HERE, "..", "..", "config", "logshard.conf"), "rb").read()
    s["empty"] = b""
    s["comments-only"] = b"# nothing\n; nothing either\n"
    for sec, key, good, bad in KEYS:
        s["key-%s" % key] = ("[%s]\n%s = %s\n" % (sec, key, good)).encode()
        s["bad-%s" % key] = ("[%s]\n%s = %s\n" % (sec, key, bad)).encode()
    s["sizes"] = b"64K\n[limits]\nmax_record_bytes = 64KiB\nmax_frame_bytes = 1G\n"
    s["durations"] = b"90min\n[sync]\nfsync = interval\nfsync_interval = 250ms\n[shard]\nmax_shard_age = 2d\n"
    s["first-line-hex"] = b"0x1F\n"
    s["first-line-octal"] = b"0755\n"
    s["first-line-overflow"] = b"18446744073709551615T\n"
    s["first-line-sign"] = b"-1\n"
    s["first-line-blank"] = b" 12\n"
    s["unknown-section"] = b"[network]\nport = 1\n"
    s["unknown-section-alone"] = b"[network]\n"
    s["unknown-key"] = b"[daemon]\nspools = /tmp\n"
    s["key-outside-section"] = b"spool = /tmp\n"
    s["no-equals"] = b"[daemon]\nspool\n"
    s["unclosed-section"] = b"[daemon\nspool = /tmp\n"
    s["empty-section-name"] = b"[]\n"
    s["indented"] = b"[daemon]\n  spool = /tmp\n\tsocket = /tmp/s\n"
    s["crlf"] = b"[daemon]\r\nspool = /tmp\r\n"
    s["bom"] = b"\xef\xbb\xbf[daemon]\nspool = /tmp\n"
    s["nul-in-line"] = b"[daemon]\nspool = /t\0mp\nsocket = /s\n"
    s["inline-comment"] = b"[limits]\nmax_record_bytes = 1M ; a comment\n"
    s["duplicate-key"] = b"[daemon]\nspool = /a\nspool = /b\n"
    s["long-line"] = b"[daemon]\nspool = /" + b"x" * 400 + b"\n"
    s["long-comment"] = b"# " + b"c" * 400 + b"\n[daemon]\nspool = /tmp\n"
    s["long-line-no-newline"] = b"[daemon]\nspool = /" + b"x" * 400
    s["no-final-newline"] = b"[sync]\nfsync = always"
    s["id-lists"] = b"[access]\nallowed_uids = 0,,1\t2 root,\nallowed_gids =\n"
    s["memory-below-session"] = b"[limits]\nmemory_limit_bytes = 1M\nsession_buffer_bytes = 8M\n"
    s["frame-below-record"] = b"[limits]\nmax_record_bytes = 4M\nmax_frame_bytes = 4M\n"
    return s


def config_dict():
    words = set()
    for sec, key, good, _ in KEYS:
        words.update(["[%s]" % sec, key, good])
    words.update(["none", "interval", "batch", "always", "uring", "threads",
                  "K", "KB", "KiB", "M", "MiB", "G", "GiB", "T", "TiB",
                  "ms", "s", "m", "min", "h", "d", " = ", "\n", "#", ";"])
    lines = ["# libFuzzer dictionary for fuzz-config, written by make-seeds.py."]
    for w in sorted(words):
        esc = "".join(c if c.isprintable() and c not in '"\\' else "\\x%02x" % ord(c) for c in w)
        lines.append('"%s"' % esc)
    return "\n".join(lines) + "\n"


# ---- JSON (the admin protocol) ---------------------------------------------

# A status reply as the daemon writes it: every member of docs/PROTOCOL.md.
STATUS_REPLY = (
    b'{"version":1,"ok":true,"command":"status","status":{"version":"0.1.0","pid":4242,'
    b'"started":"2026-12-01T10:00:00Z","uptime_s":0.348237984,"fsync_policy":"batch",'
    b'"io_backend":"io_uring","spool":"/var/lib/logshard","admin_socket":"/run/logshard/admin.sock",'
    b'"metrics_file":null,"producers_connected":0,"connections_accepted":1,"active_shards":0,'
    b'"shards_opened":1,"shards_sealed":1,"records":{"received":2,"acknowledged":2,'
    b'"per_s_10s":5.86567950565367,"per_s_since_start":5.743198880912428},"bytes":{"received":6,'
    b'"per_s_10s":17.59703851696101,"per_s_since_start":17.229596642737285},'
    b'"rate_window_s":0.340966464,"fsync":{"syncs":4,"count":1,"sum_s":0.000577651,'
    b'"p50_s":0.00075,"p99_s":0.000995},"acks_pending":0,"bytes_waiting":0,"memory_bytes":0,'
    b'"io_pending":0,"errors":{"protocol":0,"io":0,"refused_access":0,"refused_limit":0,'
    b'"timeout":0,"refused_admin":0},"disk":{"active_files":0,"active_bytes":0,"done_files":1,'
    b'"done_bytes":4096,"quarantine_files":0,"quarantine_bytes":0,"fs_avail_bytes":84914323456,'
    b'"fs_free_bytes":252722216960,"fs_size_bytes":270553174016}}}\n')

LS_REPLY = (
    b'{"version":1,"ok":true,"command":"ls","spool":"/var/lib/logshard","shards":['
    b'{"producer":"web-1","shard":"18ed0c66c50c305a","state":"active",'
    b'"file":"active/web-1.18ed0c66c50c305a.tmp","size":4096,"records":57,'
    b'"records_received":60,"records_acknowledged":57,"created":"2026-12-01T10:00:00.000000001Z",'
    b'"first":"2026-12-01T10:00:00.000000002Z","last":null,"uid":1000,"gid":1000,"pid":4242}]}\n')

ROTATE_REPLY = (
    b'{"version":1,"ok":true,"command":"rotate","producer":"web-1","retired":1,"busy":0,'
    b'"sealed":[{"producer":"web-1","shard":"18ed0c66c50c305a",'
    b'"file":"done/web-1.18ed0c66c50c305a.shard","records":57,"bytes":4096}],'
    b'"failed":[{"producer":"web-2","shard":"18ed0c66c50c305b","file":"quarantine/x",'
    b'"error":"fdatasync failed: Input/output error","quarantined":true}]}\n')


def error_reply(code, name, message):
    return (b'{"version":1,"ok":false,"error":{"code":%d,"name":"%s","message":"%s"}}\n'
            % (code, name, message))


def json_seeds():
    s = {}
    s["request-status"] = b'{"version":1,"command":"status"}\n'
    s["request-ls"] = b'{"version":1,"command":"ls","producer":"web-1"}\n'
    s["request-rotate-all"] = b'{"version":1,"command":"rotate","producer":null}\n'
    s["request-unknown-member"] = b'{"version":1,"command":"ls","later":{"a":[1,2]}}\n'
    s["request-version-2"] = b'{"version":2,"command":"status"}\n'
    s["reply-status"] = STATUS_REPLY
    s["reply-ls"] = LS_REPLY
    s["reply-ls-empty"] = b'{"version":1,"ok":true,"command":"ls","spool":"spool","shards":[]}\n'
    s["reply-rotate"] = ROTATE_REPLY
    s["reply-rotate-none"] = (b'{"version":1,"ok":true,"command":"rotate","producer":null,'
                              b'"retired":0,"busy":0,"sealed":[],"failed":[]}\n')
    s["reply-einval"] = error_reply(22, b"EINVAL", b"unknown command 'fly' (status, ls, rotate)")
    s["reply-ebadmsg"] = error_reply(74, b"EBADMSG",
                                     b"request is not JSON: unexpected character at byte 0")
    s["reply-eprotonosupport"] = error_reply(
        93, b"EPROTONOSUPPORT", b"admin protocol version 2 is not supported (this daemon speaks 1)")
    # Values alone, and white space.
    for name, text in [("null", b"null"), ("true", b"true"), ("false", b"false"),
                       ("zero", b"0"), ("string", b'"x"'), ("empty-array", b"[]"),
                       ("empty-object", b"{}")]:
        s["value-" + name] = text
    s["white-space"] = b' \t\r\n{ "a" : [ 1 , 2 ] }\r\n '
    s["empty"] = b""
    s["blank"] = b" \n"
    # Numbers: the u64 edge, beyond it, signs, fractions, exponents, the
    # double range, and the length limit (63 characters pass, 64 do not).
    numbers = {
        "u64-max": b"18446744073709551615", "u64-max-plus-1": b"18446744073709551616",
        "negative": b"-42", "negative-zero": b"-0", "fraction": b"0.1", "whole-fraction": b"1.0",
        "exponent": b"1e3", "exponent-signs": b"[1E+2,1e-2,-1.5E-0]", "double-max": b"1.7976931348623157e308",
        "overflow": b"1e309", "negative-overflow": b"-1e309", "underflow": b"1e-400",
        "denormal": b"4.9e-324", "63-chars": b"1" + b"0" * 62, "64-chars": b"1" + b"0" * 63,
        "leading-zero": b"01", "negative-leading-zero": b"-01", "bare-minus": b"-",
        "plus": b"+1", "dot-first": b".5", "dot-last": b"1.", "exponent-empty": b"1e",
        "exponent-sign-only": b"1e+", "hex": b"0x10", "nan": b"NaN", "infinity": b"-Infinity",
    }
    for name, text in numbers.items():
        s["number-" + name] = text
    # Strings: every escape, \u0000, surrogates paired and alone, raw UTF-8
    # at its edges, and what the parser refuses.
    strings = {
        "escapes": rb'"\" \\ \/ \b \f \n \r \t \u00e9 \u20AC"',
        "nul": rb'"a\u0000b"',
        "surrogate-pair": rb'"\ud83d\ude00"',
        "lone-high": rb'"\ud800"',
        "lone-low": rb'"\udc00"',
        "high-then-other-escape": rb'"\ud800\u0041"',
        "high-then-high": rb'"\ud800\ud800\udc00"',
        "high-at-end": rb'"\ud800\u"',
        "utf8-edges": '"\u0080\u07ff\u0800\uffff\U00010000\U0010ffff"'.encode(),
        "bad-escape": rb'"\x41"',
        "short-u": rb'"\u12"',
        "bad-hex": rb'"\u12g4"',
        "unterminated": b'"abc',
        "backslash-at-end": b'"abc\\',
        "escaped-quote-at-end": b'"abc\\"',
        "tab": b'"a\tb"',
        "newline": b'"a\nb"',
        "del": b'"a\x7fb"',
        "overlong-nul": b'"\xc0\x80"',
        "overlong-slash": b'"\xe0\x80\xaf"',
        "overlong-4": b'"\xf0\x80\x80\x80"',
        "surrogate-utf8": b'"\xed\xa0\x80"',
        "above-max": b'"\xf4\x90\x80\x80"',
        "lone-continuation": b'"\x80"',
        "truncated-utf8": b'"\xe2\x82"',
        "ff": b'"\xff"',
        "single-quotes": b"'a'",
    }
    for name, text in strings.items():
        s["string-" + name] = text
    # Structure.
    s["duplicate-keys"] = b'{"command":"ls","command":"rotate"}'
    s["nul-in-member-name"] = b'{"command\\u0000x":"rotate","command":"ls"}'
    s["empty-member-name"] = b'{"":1}'
    s["trailing-comma-array"] = b"[1,]"
    s["trailing-comma-object"] = b'{"a":1,}'
    s["missing-colon"] = b'{"a" 1}'
    s["bare-member-name"] = b"{a:1}"
    s["member-name-not-string"] = b"{1:1}"
    s["missing-comma"] = b"[1 2]"
    s["text-after"] = b"[1] x"
    s["two-documents"] = b"{} {}"
    s["comment"] = b"[1 /* no */]"
    s["bom"] = b"\xef\xbb\xbf{}"
    s["words-cut"] = b"[tru,nul,fals]"
    s["words-longer"] = b"[truex]"
    s["nesting-32"] = b"[" * 32 + b"]" * 32
    s["nesting-33"] = b"[" * 33 + b"]" * 33
    s["nesting-32-objects"] = b'{"a":' * 31 + b"{}" + b"}" * 31
    s["nesting-unclosed"] = b"[" * 1000
    s["request-cut"] = b'{"version":1,"command":"sta'
    s["many-items"] = b"[" + b",".join(b"%d" % i for i in range(300)) + b"]"
    return s


JSON_TOKENS = ["{", "}", "[", "]", ":", ",", '"', "true", "false", "null", "-", ".", "e",
               "E+", "e-", "0", "18446744073709551615", "1e308", "\\\"", "\\\\", "\\/", "\\b",
               "\\f", "\\n", "\\r", "\\t", "\\u", "\\u0000", "\\ud800", "\\udc00", "\\uffff",
               "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xef\xbf\xbd", "\xed\xa0\x80",
               "\xc0\x80", "\xf4\x90\x80\x80"]
ADMIN_NAMES = ["version", "command", "producer", "status", "ls", "rotate", "ok", "error",
               "code", "name", "message", "shards", "sealed", "failed", "retired", "busy"]


def json_dict():
    lines = ["# libFuzzer dictionary for fuzz-json, written by make-seeds.py."]
    for w in JSON_TOKENS + ['"%s"' % n for n in ADMIN_NAMES]:
        esc = "".join(c if c.isprintable() and c not in '"\\' and ord(c) < 0x80
                      else "\\x%02x" % ord(c) for c in w)
        lines.append('"%s"' % esc)
    return "\n".join(lines) + "\n"


# ---- spool names ---------------------------------------------------------

# fuzz-spool-names.c reads one byte first: 0 parses a name, 1 formats one
# (a kind byte, an id of 8 bytes, the producer), 2 makes a merged name (8
# bytes of seconds, 4 of nanoseconds, 2 of attempt). Names follow
# docs/FORMAT.md, "Files in the spool".
def spool_names_seeds():
    s = {}
    good = {
        "tmp": b"app.0000000000000001.tmp",
        "shard": b"app.00000000000000ff.shard",
        "dots": b"a.b.c.0123456789abcdef.shard",
        "dash": b"-x_9.ffffffffffffffff.tmp",
        "longest": b"n" * 64 + b".0000000000000001.shard",
    }
    bad = {
        "upper-hex": b"app.000000000000000F.shard",
        "15-digits": b"app.000000000000001.shard",
        "17-digits": b"app.00000000000000001.shard",
        "no-producer": b".0000000000000001.shard",
        "dot-producer": b".app.0000000000000001.tmp",
        "slash": b"a/b.0000000000000001.shard",
        "too-long": b"n" * 65 + b".0000000000000001.shard",
        "quarantined": b"app.0000000000000001.shard.1",
        "merged": b"merged-20240101T120000.123456789Z.lsm",
        "nul": b"app\0.0000000000000001.shard",
    }
    for name, text in list(good.items()) + list(bad.items()):
        s["parse-" + name] = b"\x00" + text
    s["format-tmp"] = b"\x01\x00" + struct.pack("<Q", 1) + b"app"
    s["format-shard"] = b"\x01\x01" + struct.pack("<Q", 2**64 - 1) + b"a.b"
    s["format-bad-producer"] = b"\x01\x01" + struct.pack("<Q", 7) + b".hidden"
    s["format-nul"] = b"\x01\x00" + struct.pack("<Q", 7) + b"a\0b"
    s["merged"] = b"\x02" + struct.pack("<qIH", 1704110400, 123456789, 0)
    s["merged-suffix"] = b"\x02" + struct.pack("<qIH", 1704110400, 5, 999)
    s["merged-far"] = b"\x02" + struct.pack("<qIH", 2**62, 0, 1)
    return s

# ---- stream positions ------------------------------------------------------

# fuzz-stream-positions.c takes the bytes of a file (docs/FORMAT.md,
# "Stream positions file"): a header line, stream lines, an end line with
# the count and the CRC32C of every byte before it.
def positions_text(lines, count=None, crc=None, header=b"logshard-stream-positions 1\n"):
    body = header + b"".join(lines)
    n = len(lines) if count is None else count
    c = crc32c(body) if crc is None else crc
    return body + b"end %d %08x\n" % (n, c)


def stream_line(sid, nxt, newest, uid, producer):
    return b"stream %s %d %d %d %s\n" % (sid, nxt, newest, uid, producer)


def stream_positions_seeds():
    a = b"0123456789abcdef0123456789abcdef"
    b = b"fedcba9876543210fedcba9876543210"
    s = {}
    s["empty-list"] = positions_text([])
    s["one"] = positions_text([stream_line(a, 42, 1700000000000000000, 1000, b"app")])
    s["two"] = positions_text([stream_line(a, 42, 1700000000000000000, 1000, b"app"),
                               stream_line(b, 0, 0, 0, b"x.y-z_9")])
    s["unsorted"] = positions_text([stream_line(b, 7, 1, 2, b"b"), stream_line(a, 9, 3, 4, b"a")])
    s["duplicate"] = positions_text([stream_line(a, 5, 9, 1, b"old"),
                                     stream_line(a, 8, 3, 2, b"new")])
    s["largest"] = positions_text([stream_line(a, 2**63 - 1, 2**64 - 1, 2**32 - 1, b"n" * 64)])
    s["bad-crc"] = positions_text([stream_line(a, 1, 1, 1, b"a")], crc=0)
    s["bad-count"] = positions_text([stream_line(a, 1, 1, 1, b"a")], count=2)
    s["bad-version"] = positions_text([], header=b"logshard-stream-positions 2\n")
    s["bad-zero-id"] = positions_text([stream_line(b"0" * 32, 1, 1, 1, b"a")])
    s["bad-upper-id"] = positions_text([stream_line(a.upper(), 1, 1, 1, b"a")])
    s["bad-position"] = positions_text([stream_line(a, 2**63, 1, 1, b"a")])
    s["bad-overflow"] = positions_text([stream_line(a, 1, 2**64, 1, b"a")])
    s["bad-uid"] = positions_text([stream_line(a, 1, 1, 2**32, b"a")])
    s["bad-leading-zero"] = positions_text([b"stream %s 01 1 1 a\n" % a])
    s["bad-producer"] = positions_text([stream_line(a, 1, 1, 1, b".hidden")])
    s["bad-unknown-line"] = positions_text([b"streams %s 1 1 1 a\n" % a])
    s["cut"] = positions_text([stream_line(a, 1, 1, 1, b"a")])[:-1]
    s["after-end"] = positions_text([]) + b"x"
    return s


# ---- seal index ------------------------------------------------------------

# fuzz-seal-index.c takes the bytes of <spool>/done.index (common/seal_index.h):
# entries of u32 magic "LSIX", u16 entry length (36 + name length), u16 name
# length, u64 inode, u64 created_ns, u64 newest_ns, the name of a sealed shard
# (no NUL), and the CRC32C of all bytes before it. The reader takes every good
# entry and, past anything else, looks for the next magic.
SEAL_FIXED = 36


def seal_entry(name, inode=1, created=1_700_000_000_000_000_000, newest=1_700_000_000_000_000_009,
               entry_len=None, name_len=None, magic=b"LSIX", bad_crc=False, extra=b""):
    body = magic + struct.pack("<HHQQQ", SEAL_FIXED + len(name) if entry_len is None else entry_len,
                               len(name) if name_len is None else name_len,
                               inode, created, newest) + name + extra
    c = crc32c(body) ^ (1 if bad_crc else 0)
    return body + struct.pack("<I", c)


def shard_name(producer, shard_id):
    return b"%s.%016x.shard" % (producer, shard_id)


def seal_index_seeds():
    a = seal_entry(shard_name(b"app", 0xab), inode=12)
    b = seal_entry(shard_name(b"web-1", 1), inode=13, created=5, newest=6)
    c = seal_entry(shard_name(b"a.b_c", 2**64 - 1), inode=2**64 - 1, created=0, newest=2**64 - 1)
    longest = seal_entry(shard_name(b"n" * 64, 7), inode=99)
    s = {}
    s["empty"] = b""
    s["one"] = a
    s["three"] = a + b + c
    s["longest-name"] = longest
    s["torn-tail"] = a + b + c[:len(c) // 2]
    s["garbage-then-entry"] = b"not an index\n\0\xffLSI" + a
    s["garbage-between"] = a + b"LSIXLSIX\x01\x02" + b + b"\0" * 7 + c
    s["damaged-middle"] = a + seal_entry(shard_name(b"web-1", 1), inode=13, bad_crc=True) + c
    # A later entry for a name replaces an earlier one.
    s["same-name-twice"] = a + b + seal_entry(shard_name(b"app", 0xab), inode=14, newest=7)
    # A torn append with later appends behind it, shorter and longer than
    # what the torn entry announced.
    s["torn-then-short"] = longest[:20] + a
    s["torn-then-long"] = longest[:20] + a + b + c
    s["bad-magic"] = seal_entry(shard_name(b"app", 1), magic=b"LSIY")
    s["bad-entry-length"] = seal_entry(shard_name(b"app", 1), entry_len=SEAL_FIXED + 1)
    # The entry length one more than the name asks for, with a byte there
    # and the CRC after it right: only the lengths rule refuses it.
    name = shard_name(b"app", 1)
    s["bad-entry-length-crc-right"] = seal_entry(name, entry_len=SEAL_FIXED + len(name) + 1,
                                                 extra=b"x")
    s["bad-name-length"] = seal_entry(shard_name(b"app", 1), name_len=5)
    s["bad-name-empty"] = seal_entry(b"")
    s["bad-name-too-long"] = seal_entry(shard_name(b"n" * 65, 1))
    s["bad-name-nul"] = seal_entry(b"app\0.0000000000000001.shard")
    s["bad-name-nul-after"] = seal_entry(b"app.0000000000000001.shard\0xyz")
    s["bad-name-tmp"] = seal_entry(b"app.0000000000000001.tmp")
    s["bad-name-upper-hex"] = seal_entry(b"app.000000000000000F.shard")
    s["bad-crc"] = seal_entry(shard_name(b"app", 1), bad_crc=True)
    return s


def write(target, seeds):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    for name in os.listdir(d):
        if name.startswith("seed-"):
            os.unlink(os.path.join(d, name))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(d, "seed-" + name), "wb") as f:
            f.write(data)
    print("%s: %d seeds" % (d, len(seeds)))


def main():
    write("wire", wire_seeds())
    write("shard-reader", shard_seeds())
    write("config", config_seeds())
    write("json", json_seeds())
    write("spool-names", spool_names_seeds())
    write("stream-positions", stream_positions_seeds())
    write("seal-index", seal_index_seeds())
    with open(os.path.join(HERE, "fuzz-config.dict"), "w") as f:
        f.write(config_dict())
    with open(os.path.join(HERE, "fuzz-json.dict"), "w") as f:
        f.write(json_dict())


if __name__ == "__main__":
    main()
