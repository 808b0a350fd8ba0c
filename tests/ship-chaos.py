#!/usr/bin/env python3
"""Shipping under chaos, end to end, with real programs only.

Four producers (`logctl send`, restart-proof through liblogshard) feed a
real logshardd; `logctl ship --follow` ships to librdkafka's mock cluster
(tests/kafka-mock, the Kafka protocol over TCP). Round after round, at
random: broker requests refused with Kafka errors of every kind the
shipper meets (retriable, abortable, fatal, fencing), brokers down and up
(one, or all of them),
partition leaders and the transaction coordinator moved to another broker,
partitions left without a leader for a while, slow brokers, the shipper
killed with SIGKILL or stopped with SIGSTOP for
seconds, the daemon killed with SIGKILL and started again, and shards
rotated and merged with --delete. A shipper that exits is started again,
as logshard-ship.service would be. At the end a last `logctl ship` ships
what is left, and kcat, reading with isolation.level=read_committed, must
see every record of every producer exactly once, in order.

Environment: LOGSHARDD, LOGCTL, KAFKA_MOCK, KCAT (set by meson);
LOGSHARD_TEST_SEED (default: from the clock; printed),
LOGSHARD_SHIP_CHAOS_ROUNDS (default 50), LOGSHARD_SHIP_CHAOS_RECORDS
(records per producer, default 10000). Exit status 0 when every record
arrived once, 1 otherwise, 77 (skipped) without the mock or kcat."""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PRODUCERS = ["alpha", "beta", "gamma", "delta"]
BROKERS = 3
# The mock's partitions of an auto-created topic (kafka-mock.c), and the
# shipper's progress topic (its default name, docs/SHIP.md).
PARTITIONS = 4
PROGRESS_TOPIC = "logshard-ship-progress"
ERRORS = {
    "Produce": ["NOT_LEADER_FOR_PARTITION", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS",
                "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "OUT_OF_ORDER_SEQUENCE_NUMBER",
                "UNKNOWN_PRODUCER_ID", "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED",
                "INVALID_RECORD", "KAFKA_STORAGE_ERROR", "UNKNOWN_TOPIC_OR_PART",
                "LEADER_NOT_AVAILABLE", "TOPIC_AUTHORIZATION_FAILED", "MSG_SIZE_TOO_LARGE",
                "INVALID_TXN_STATE"],
    "InitProducerId": ["COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
                       "COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS",
                       "PRODUCER_FENCED", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
                       "REQUEST_TIMED_OUT"],
    "AddPartitionsToTxn": ["CONCURRENT_TRANSACTIONS", "COORDINATOR_NOT_AVAILABLE",
                           "NOT_COORDINATOR", "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED",
                           "UNKNOWN_TOPIC_OR_PART", "INVALID_TXN_STATE",
                           "TOPIC_AUTHORIZATION_FAILED", "COORDINATOR_LOAD_IN_PROGRESS",
                           "REQUEST_TIMED_OUT"],
    "EndTxn": ["CONCURRENT_TRANSACTIONS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
               "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED", "INVALID_TXN_STATE",
               "REQUEST_TIMED_OUT", "COORDINATOR_LOAD_IN_PROGRESS", "UNKNOWN_PRODUCER_ID"],
    "FindCoordinator": ["COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "REQUEST_TIMED_OUT"],
    "Metadata": ["REQUEST_TIMED_OUT", "LEADER_NOT_AVAILABLE"],
    "Fetch": ["NOT_LEADER_FOR_PARTITION", "REQUEST_TIMED_OUT", "OFFSET_OUT_OF_RANGE",
              "UNKNOWN_TOPIC_OR_PART"],
    "ListOffsets": ["NOT_LEADER_FOR_PARTITION", "REQUEST_TIMED_OUT", "LEADER_NOT_AVAILABLE",
                    "OFFSET_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PART"],
}
# Left out on purpose: DUPLICATE_SEQUENCE_NUMBER. A real broker answers it
# only for a batch it already has; the mock, told to, answers it for one
# it then does not have, a loss no client could see.


def default_signals():
    """What a user's shell gives a program: default dispositions, no mask."""
    for sig in (signal.SIGINT, signal.SIGPIPE, signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


class Chaos:
    def __init__(self, seed, rounds, records):
        self.rng = random.Random(seed)
        self.rounds = rounds
        self.records = records
        self.dir = tempfile.mkdtemp(prefix="logshard-ship-chaos.", dir="/var/tmp")
        self.spool = os.path.join(self.dir, "spool")
        self.sock = os.path.join(self.dir, "sock")
        self.admin = os.path.join(self.dir, "admin")
        self.log = open(os.path.join(self.dir, "ship.log"), "a")
        self.daemon_log = open(os.path.join(self.dir, "daemon.log"), "a")
        self.mock = self.daemon = self.ship = None
        self.senders = {}
        self.sent = {name: 0 for name in PRODUCERS}
        self.restarts = 0

    # ---- the programs ----
    def start_mock(self):
        self.mock = subprocess.Popen([os.environ["KAFKA_MOCK"], "--brokers", str(BROKERS)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     preexec_fn=default_signals)
        self.brokers = self.mock.stdout.readline().strip()
        # The topics as the shipper's first Metadata request would make
        # them, made now: moving a leader of a topic not there yet would
        # make it, with fewer partitions.
        for topic in [f"logs.{name}" for name in PRODUCERS] + [PROGRESS_TOPIC]:
            self.mock_command(f"topic {topic} {PARTITIONS}")

    def mock_command(self, line):
        self.mock.stdin.write(line + "\n")
        self.mock.stdin.flush()
        answer = self.mock.stdout.readline().strip()
        if answer != "ok":
            raise RuntimeError(f"kafka-mock: '{line}': {answer}")

    def start_daemon(self):
        self.daemon = subprocess.Popen([os.environ["LOGSHARDD"], "-s", self.spool, "-S", self.sock,
                                        "-A", self.admin, "-f", "batch"],
                                       stderr=self.daemon_log, preexec_fn=default_signals)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.sock) or not os.path.exists(self.admin):
            if time.monotonic() > deadline or self.daemon.poll() is not None:
                raise RuntimeError("logshardd did not come up")
            time.sleep(0.02)

    def logctl(self, *args, **kw):
        return subprocess.run([os.environ["LOGCTL"], *args], preexec_fn=default_signals, **kw)

    def wait_senders_connected(self):
        """Until the daemon has taken every sender. A first connection finds
        no daemon when a round kills it before the sender connected, and
        `logctl send` then fails at once, as it should (no daemon listens);
        only a connection the daemon took is the library's to keep."""
        deadline = time.monotonic() + 30
        while True:
            r = self.logctl("status", "--admin-socket", self.admin, "--json",
                            capture_output=True, text=True)
            if r.returncode == 0 and json.loads(r.stdout)["producers_connected"] >= len(PRODUCERS):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the senders did not connect within 30 s: {r.stdout}{r.stderr}")
            time.sleep(0.02)

    def start_ship(self):
        self.ship = subprocess.Popen(
            [os.environ["LOGCTL"], "ship", "--spool", self.spool, "--brokers", self.brokers,
             "--admin-socket", self.admin, "--topic", "logs.{producer}", "--follow",
             "--set", "transaction_records=300", "--set", "transaction_interval=50"],
            stdout=self.log, stderr=self.log, preexec_fn=default_signals)

    def send(self, name, count):
        first = self.sent[name]
        count = min(count, self.records - first)
        if count > 0:
            lines = "".join(f"{name} {i:012d}\n" for i in range(first, first + count))
            try:
                self.senders[name].stdin.write(lines.encode())
                self.senders[name].stdin.flush()
            except BrokenPipeError:
                code = self.senders[name].wait(timeout=30)
                raise RuntimeError(f"logctl send -p {name} exited {code} with "
                                   f"{self.records - first} records still to send; "
                                   "its error is above") from None
            self.sent[name] += count

    def for_a_while(self, n, what, start, end, longest, shortest=0.1):
        """Round n: the mock command start, then, after shortest to longest
        seconds, end."""
        print(f"round {n}: {what} for a while", flush=True)
        self.mock_command(start)
        time.sleep(self.rng.uniform(shortest, longest))
        self.mock_command(end)

    def move(self, n):
        """What a cluster does when a broker is replaced or rebalanced: the
        leaders of a topic's partitions move, or the shipper's transaction
        coordinator does, or a partition has no leader for a while."""
        rng = self.rng
        what = rng.random()
        topic = rng.choice([f"logs.{name}" for name in PRODUCERS] + [PROGRESS_TOPIC])
        if what < 0.4:
            broker = rng.randint(1, BROKERS)
            print(f"round {n}: every partition of {topic} led by broker {broker}", flush=True)
            for partition in range(PARTITIONS):
                self.mock_command(f"leader {topic} {partition} {broker}")
        elif what < 0.7:
            partition = rng.randrange(PARTITIONS)
            broker = rng.randint(1, BROKERS)
            self.for_a_while(n, f"{topic} [{partition}] without a leader",
                             f"leader {topic} {partition} -1",
                             f"leader {topic} {partition} {broker}", 1.5)
        else:
            # The id the first shipper made for the spool (ship-id.c).
            try:
                with open(os.path.join(self.spool, "ship", "id")) as f:
                    txid = f.read().strip()
            except FileNotFoundError:
                txid = ""
            if not txid:
                print(f"round {n}: no transactional id made yet; nothing moved", flush=True)
                return
            broker = rng.randint(1, BROKERS)
            print(f"round {n}: the transaction coordinator of {txid} moves to broker {broker}",
                  flush=True)
            self.mock_command(f"coordinator transaction {txid} {broker}")

    # ---- one round ----
    def round(self, n):
        rng = self.rng
        for name in PRODUCERS:
            self.send(name, rng.randint(50, 2 * self.records // self.rounds))
        act = rng.random()
        if act < 0.48:
            api = rng.choice(sorted(ERRORS))
            err = rng.choice(ERRORS[api])
            count = rng.randint(1, 5)
            print(f"round {n}: the next {count} {api} requests fail with {err}", flush=True)
            self.mock_command(f"errors {api} {count} {err}")
        elif act < 0.55:
            broker = rng.randint(1, BROKERS)
            self.for_a_while(n, f"broker {broker} down", f"down {broker}", f"up {broker}", 1.5)
        elif act < 0.59:
            self.for_a_while(n, "every broker down", "down -1", "up -1", 3)
        elif act < 0.63:
            self.move(n)
        elif act < 0.69:
            self.for_a_while(n, "every broker 300 ms slow", "rtt -1 300", "rtt -1 0", 1.0,
                             shortest=0.2)
        elif act < 0.77:
            print(f"round {n}: SIGKILL the shipper", flush=True)
            self.ship.kill()
            self.ship.wait()
            self.start_ship()
            self.restarts += 1
        elif act < 0.83:
            print(f"round {n}: SIGSTOP the shipper for a while", flush=True)
            self.ship.send_signal(signal.SIGSTOP)
            time.sleep(rng.uniform(0.5, 3))
            self.ship.send_signal(signal.SIGCONT)
        elif act < 0.91:
            print(f"round {n}: SIGKILL the daemon, start it again", flush=True)
            self.daemon.kill()
            self.daemon.wait()
            time.sleep(rng.uniform(0, 1.0))
            self.start_daemon()
        else:
            print(f"round {n}: rotate every shard, merge --delete", flush=True)
            self.logctl("rotate", "--admin-socket", self.admin, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
            r = self.logctl("merge", "--delete", "--spool", self.spool, capture_output=True,
                            text=True)
            if r.returncode not in (0, 3):  # 3: a shipper's delete held the lock
                raise RuntimeError(f"logctl merge --delete: {r.returncode}: {r.stderr}")
        time.sleep(rng.uniform(0.05, 0.6))
        if self.ship.poll() is not None:
            print(f"round {n}: the shipper exited {self.ship.returncode}; started again",
                  flush=True)
            self.start_ship()
            self.restarts += 1

    # ---- the whole run ----
    def run(self):
        self.start_mock()
        self.start_daemon()
        for name in PRODUCERS:
            self.senders[name] = subprocess.Popen(
                [os.environ["LOGCTL"], "send", "-s", self.sock, "-p", name],
                stdin=subprocess.PIPE, preexec_fn=default_signals)
        self.wait_senders_connected()
        self.start_ship()
        for n in range(self.rounds):
            self.round(n)
        for name in PRODUCERS:
            self.send(name, self.records)
            self.senders[name].stdin.close()
        for name, p in self.senders.items():
            if p.wait(timeout=300) != 0:
                raise RuntimeError(f"logctl send -p {name} failed: {p.returncode}")
        self.ship.send_signal(signal.SIGTERM)
        self.ship.wait(timeout=120)
        self.daemon.send_signal(signal.SIGTERM)
        if self.daemon.wait(timeout=60) != 0:
            raise RuntimeError(f"logshardd exited {self.daemon.returncode} on SIGTERM")
        # What is left, by one run after everything is sealed; errors
        # injected but not yet taken may make a run or a few fail first.
        for attempt in range(12):
            r = self.logctl("ship", "--spool", self.spool, "--brokers", self.brokers, "--topic",
                            "logs.{producer}", stdout=self.log, stderr=self.log)
            print(f"last ship: exit {r.returncode}", flush=True)
            if r.returncode == 0:
                break
        else:
            raise RuntimeError("no last logctl ship succeeded")
        return self.check()

    def check(self):
        bad = 0
        for name in PRODUCERS:
            out = subprocess.run([os.environ["KCAT"], "-C", "-b", self.brokers, "-t",
                                  f"logs.{name}", "-e", "-q", "-X",
                                  "isolation.level=read_committed", "-f", "%k %s\n"],
                                 capture_output=True, text=True, timeout=120).stdout.split("\n")
            seqs = []
            for line in filter(None, out):
                key, who, seq = line.split(" ")
                if key != name or who != name:
                    print(f"logs.{name}: a message not of {name}: {line}")
                    bad += 1
                seqs.append(int(seq))
            twice = len(seqs) - len(set(seqs))
            missing = self.records - len(set(seqs))
            backwards = sum(1 for a, b in zip(seqs, seqs[1:]) if b <= a)
            print(f"logs.{name}: {len(seqs)} messages for {self.records} records: {twice} twice, "
                  f"{missing} missing, {backwards} out of order", flush=True)
            bad += twice + missing + backwards
        return bad

    def stop(self):
        for p in [self.ship, self.daemon, *self.senders.values()]:
            if p and p.poll() is None:
                p.kill()
                p.wait()
        if self.mock and self.mock.poll() is None:
            self.mock.stdin.close()
            self.mock.wait(timeout=30)


def main():
    for var in ("LOGSHARDD", "LOGCTL", "KAFKA_MOCK", "KCAT"):
        if not os.environ.get(var):
            print(f"{var} is not set: skipped")
            return 77
    seed = int(os.environ.get("LOGSHARD_TEST_SEED") or time.time_ns() % 1000000007)
    rounds = int(os.environ.get("LOGSHARD_SHIP_CHAOS_ROUNDS", "50"))
    records = int(os.environ.get("LOGSHARD_SHIP_CHAOS_RECORDS", "10000"))
    print(f"seed: LOGSHARD_TEST_SEED={seed}", flush=True)
    chaos = Chaos(seed, rounds, records)
    bad = 1
    try:
        bad = chaos.run()
    finally:
        chaos.stop()
        if bad:
            print(f"kept for a look: {chaos.dir} (ship.log, daemon.log, spool/)")
        else:
            shutil.rmtree(chaos.dir, ignore_errors=True)
    print(f"shipper restarts: {chaos.restarts}; "
          + ("every record exactly once" if bad == 0 else f"{bad} faults") +
          f" (LOGSHARD_TEST_SEED={seed})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
