#!/usr/bin/env python3
"""Writes the seed corpus of the merge intent fuzz target
(corpus/merge-intent/): valid intents, so the fuzzer starts from inputs that
pass the checksum and reach every field, and small invalid ones, one per
refusal the parser knows, so each error path is replayed by `meson test`.
It also writes fuzz-merge-intent.dict, the intent's keywords as a libFuzzer
dictionary.

Run it from anywhere: python3 merge/fuzz/make-seeds.py. It replaces the
files named seed-* in corpus/merge-intent/ and leaves every other file there
alone: regression inputs (regress-*) are kept by hand, not generated.

The layout is the one at the top of merge/merge-intent.c. The CRC32C code
is common/fuzz/make-seeds.py's.
"""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus", "merge-intent")

_spec = importlib.util.spec_from_file_location(
    "common_seeds", os.path.join(HERE, "..", "..", "common", "fuzz", "make-seeds.py"))
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)
crc32c = _common.crc32c

A1 = b"alpha.0000000000000001.shard"
A2 = b"alpha.00000000000000ff.shard"
B7 = b"beta.0000000000000007.shard"


def body(delete=1, dir=b"/var/lib/logshard/merged", output=b"merged-1.lsm",
         temp=b".merged-1.lsm.42.tmp", sources=((10, A1), (20, A2), (30, B7)),
         total=None, count=None):
    if total is None:
        total = sum(n for n, _ in sources)
    if count is None:
        count = len(sources)
    text = b"logshard-merge-intent 1\n"
    text += b"delete %d\n" % delete if isinstance(delete, int) else b"delete " + delete + b"\n"
    text += b"dir " + dir + b"\noutput " + output + b"\ntemp " + temp + b"\n"
    text += b"bytes %d\nsources %d\n" % (total, count)
    for n, name in sources:
        text += b"source %d " % n + name + b"\n"
    return text


def sealed(b):
    return b + b"end %08x\n" % crc32c(b)


def seeds():
    s = {}
    good = body()
    # Valid intents.
    s["good"] = sealed(good)
    s["good-keep"] = sealed(body(delete=0))
    s["good-no-sources"] = sealed(body(sources=()))
    s["good-escaped"] = sealed(body(dir=b"/tmp/a dir\\nwith \\\\ a newline", output=b"out\\\\put"))
    s["good-leading-zeros"] = sealed(body().replace(b"bytes 60", b"bytes 0060"))
    s["good-max-total"] = sealed(body(sources=((2**64 - 11, A1), (10, A2))))
    s["good-producer-order"] = sealed(body(sources=((1, b"B.0000000000000001.shard"),
                                                    (1, b"a.0000000000000001.shard"),
                                                    (1, b"a.b.0000000000000001.shard"))))
    # A stream whose later shard has the lower id: by position, ids go down.
    s["good-stream-order"] = sealed(body(sources=((10, A2), (10, A1))))
    s["good-long-producer"] = sealed(body(sources=((5, b"p" * 64 + b".0000000000000001.shard"),)))
    # Damage the checksum catches.
    s["bad-crc"] = good + b"end 00000000\n"
    # Upper-case hex, which the writer never uses: a body whose CRC has a
    # letter in it.
    upper = next(b for b in (body(output=b"merged-%d.lsm" % k) for k in range(100))
                 if (b"%08x" % crc32c(b)) != (b"%08X" % crc32c(b)))
    s["bad-crc-upper"] = upper + (b"end %08X\n" % crc32c(upper))
    s["bad-no-end"] = good
    s["bad-cut"] = sealed(good)[:-5]
    s["bad-empty"] = b""
    s["bad-nul"] = sealed(good.replace(b"merged-1", b"merged\x001"))
    # Hand edits with a correct checksum.
    s["bad-version"] = sealed(good.replace(b"intent 1", b"intent 2"))
    s["bad-delete"] = sealed(body(delete=b"2"))
    s["bad-crlf"] = sealed(good.replace(b"\n", b"\r\n"))
    s["bad-order-fields"] = sealed(good.replace(b"output merged-1.lsm\ntemp .merged-1.lsm.42.tmp",
                                                b"temp .merged-1.lsm.42.tmp\noutput merged-1.lsm"))
    s["bad-escape"] = sealed(body(output=b"a\\tb"))
    s["bad-relative-dir"] = sealed(body(dir=b"merged"))
    s["bad-output-path"] = sealed(body(output=b"../escape"))
    s["bad-temp-dotdot"] = sealed(body(temp=b".."))
    s["bad-temp-is-output"] = sealed(body(temp=b"merged-1.lsm"))
    s["bad-source-path"] = sealed(body(sources=((10, b"../alpha.0000000000000001.shard"),)))
    s["bad-source-name"] = sealed(body(sources=((10, b"alpha.000000000000000F.shard"),)))
    s["bad-source-dot"] = sealed(body(sources=((10, b".alpha.0000000000000001.shard"),)))
    s["bad-duplicate"] = sealed(body(sources=((10, A1), (10, A1))))
    s["bad-duplicate-apart"] = sealed(body(sources=((10, A1), (10, A2), (10, A1))))
    s["bad-out-of-order"] = sealed(body(sources=((10, B7), (10, A1))))
    s["bad-total"] = sealed(body(total=61))
    s["bad-sum-overflow"] = sealed(body(sources=((2**64 - 1, A1), (10, A2)), total=9))
    s["bad-count-huge"] = sealed(body(count=2**64 - 1))
    s["bad-count-over"] = sealed(body(count=4))
    s["bad-count-under"] = sealed(body(count=2))
    s["bad-number-overflow"] = sealed(good.replace(b"bytes 60", b"bytes 18446744073709551616"))
    s["bad-extra-line"] = sealed(good + b"source 1 " + B7 + b"\n")
    return s


def intent_dict():
    words = [b"logshard-merge-intent 1\n", b"delete 0\n", b"delete 1\n", b"dir /", b"output ",
             b"temp ", b"bytes ", b"sources ", b"source ", b"end ", b".shard", b"\\n", b"\\\\",
             b"0000000000000001", b"18446744073709551615", b"\n", b" ", b"/", b".."]
    lines = ["# libFuzzer dictionary for fuzz-merge-intent, written by make-seeds.py."]
    for w in words:
        esc = "".join(chr(c) if 32 <= c < 127 and chr(c) not in '"\\' else "\\x%02x" % c
                      for c in w)
        lines.append('"%s"' % esc)
    return "\n".join(lines) + "\n"


def main():
    os.makedirs(CORPUS, exist_ok=True)
    for name in os.listdir(CORPUS):
        if name.startswith("seed-"):
            os.unlink(os.path.join(CORPUS, name))
    s = seeds()
    for name, data in sorted(s.items()):
        with open(os.path.join(CORPUS, "seed-" + name), "wb") as f:
            f.write(data)
    print("%s: %d seeds" % (CORPUS, len(s)))
    with open(os.path.join(HERE, "fuzz-merge-intent.dict"), "w") as f:
        f.write(intent_dict())


if __name__ == "__main__":
    main()
