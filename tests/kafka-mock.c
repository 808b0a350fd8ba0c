/* kafka-mock: librdkafka's mock Kafka cluster in a process of its own, so
 * that tests and benchmarks of `logctl ship` talk the Kafka protocol over
 * 127.0.0.1 to a peer they can break on purpose, without a real broker.
 *
 *   kafka-mock [--brokers N] [--partitions N] [--ready-file PATH] [--verbose]
 *
 * It prints the bootstrap servers as one line on stdout (and into the ready
 * file, if asked), then reads commands from stdin, one a line, and answers
 * every line with exactly one line, "ok" or "error: <why>":
 *
 *   down ID | up ID                broker ID stops or starts listening
 *   rtt ID MS                      broker ID delays its responses by MS
 *   topic NAME PARTITIONS          creates a topic
 *   errors API COUNT ERROR         the next COUNT requests of API fail
 *   leader TOPIC PARTITION ID      broker ID leads the partition (-1: none;
 *                                  a topic not there yet is made, with
 *                                  PARTITION + 1 partitions)
 *   coordinator TYPE KEY ID        broker ID coordinates the transactional
 *                                  id (TYPE transaction) or consumer group
 *                                  (TYPE group) KEY
 *   quit                           ends (as do end of file, SIGTERM, SIGINT)
 *
 * An ID of -1 means every broker, as in librdkafka's own calls.
 *
 * Only the public, experimental API of <librdkafka/rdkafka_mock.h> as of
 * librdkafka 2.0.2 is used; that header says it is not covered by the
 * library's stability guarantees, which is one more reason this program
 * stays in tests/ and is never installed. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

/* The mock gives every topic that a Metadata request creates this many
 * partitions. 2.0.2 hard-codes it (mcluster->defaults.partition_cnt in
 * rdkafka_mock.c) and its public header has no call to change it. */
#define MOCK_AUTO_CREATE_PARTITIONS 4

/* Limits that only catch typing mistakes: far more than any test needs, and
 * small enough that the mock, which allocates every broker and partition up
 * front, never runs out of memory or file descriptors because of a typo. */
#define MAX_BROKERS 64
#define MAX_PARTITIONS 10000
#define MAX_ERRORS 100000
#define MAX_RTT_MS 3600000

/* Kafka's own limit on a topic name. */
#define MAX_TOPIC_NAME 249

/* Commands are a few words; a longer line is a mistake of the sender. */
#define LINE_MAX_BYTES 1024

/* Kafka protocol API keys, from the Kafka protocol guide. librdkafka's
 * rdkafka_protocol.h has them as RD_KAFKAP_*, but that header is not
 * installed. The list is the requests the 2.0.2 mock serves (its
 * rd_kafka_mock_api_handlers table); an error pushed for any other key
 * would never be taken off the stack. */
static const struct api_key {
    const char *name;
    int16_t key;
} api_keys[] = {
    { "Produce", 0 },
    { "Fetch", 1 },
    { "ListOffsets", 2 },
    { "Metadata", 3 },
    { "OffsetCommit", 8 },
    { "OffsetFetch", 9 },
    { "FindCoordinator", 10 },
    { "JoinGroup", 11 },
    { "Heartbeat", 12 },
    { "LeaveGroup", 13 },
    { "SyncGroup", 14 },
    { "ApiVersions", 18 },
    { "InitProducerId", 22 },
    { "AddPartitionsToTxn", 24 },
    { "AddOffsetsToTxn", 25 },
    { "EndTxn", 26 },
    { "TxnOffsetCommit", 28 },
};

/* Names Kafka or older librdkafka releases use for codes whose name in
 * rd_kafka_err2name() is a different one; rdkafka.h keeps them as macros,
 * which rd_kafka_err2name() cannot know about. */
static const struct error_alias {
    const char *name;
    rd_kafka_resp_err_t err;
} error_aliases[] = {
    { "NOT_LEADER_OR_FOLLOWER", RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION },
    { "GROUP_LOAD_IN_PROGRESS", RD_KAFKA_RESP_ERR_GROUP_LOAD_IN_PROGRESS },
    { "GROUP_COORDINATOR_NOT_AVAILABLE", RD_KAFKA_RESP_ERR_GROUP_COORDINATOR_NOT_AVAILABLE },
    { "NOT_COORDINATOR_FOR_GROUP", RD_KAFKA_RESP_ERR_NOT_COORDINATOR_FOR_GROUP },
};

#define ERR_PREFIX "RD_KAFKA_RESP_ERR_"

struct options {
    int brokers;
    const char *ready_file;
    bool verbose;
};

struct mock {
    rd_kafka_t *rk;
    rd_kafka_mock_cluster_t *cluster;
    int brokers;
};

/* Room for the reason of an "error:" answer. */
struct why {
    char text[512];
};

static const char *program = "kafka-mock";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [--brokers N] [--partitions N] [--ready-file PATH] [--verbose]\n"
            "  --brokers N       brokers in the cluster, ids 1..N (default 3)\n"
            "  --partitions N    partitions of auto-created topics; librdkafka %s's\n"
            "                    mock always gives them %d, so only %d is accepted\n"
            "                    (create other topics with the 'topic' command)\n"
            "  --ready-file PATH also write the bootstrap servers line to PATH\n"
            "  --verbose         librdkafka's log lines, the mock's among them, on stderr\n"
            "commands on stdin, one a line, each answered 'ok' or 'error: ...':\n"
            "  down ID | up ID | rtt ID MS | topic NAME PARTITIONS |\n"
            "  errors API COUNT ERROR | quit\n",
            program, rd_kafka_version_str(), MOCK_AUTO_CREATE_PARTITIONS,
            MOCK_AUTO_CREATE_PARTITIONS);
}

static int fail_why(struct why *why, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fills why and returns err, so a command fails in one statement. */
static int fail_why(struct why *why, int err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why->text, sizeof(why->text), fmt, ap);
    va_end(ap);
    return err;
}

/* Parses a whole decimal number within [min, max]. Returns 0, -EINVAL for
 * something that is not a number, -ERANGE for one out of range. */
static int parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (end == s || *end != '\0')
        return -EINVAL;
    if (errno == ERANGE || v < min || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

/* parse_long with the answer's wording for what was wrong. */
static int parse_arg(const char *what, const char *s, long min, long max, long *out,
                     struct why *why)
{
    int r = parse_long(s, min, max, out);

    if (r == -EINVAL)
        return fail_why(why, r, "%s '%s' is not a number", what, s);
    if (r == -ERANGE)
        return fail_why(why, r, "%s %s is out of range %ld..%ld", what, s, min, max);
    return 0;
}

static int lookup_api(const char *name, int16_t *key)
{
    for (size_t i = 0; i < sizeof(api_keys) / sizeof(api_keys[0]); i++) {
        if (strcasecmp(api_keys[i].name, name) == 0) {
            *key = api_keys[i].key;
            return 0;
        }
    }
    /* The mock calls it ApiVersion, Kafka ApiVersions; take both. */
    if (strcasecmp(name, "ApiVersion") == 0) {
        *key = 18;
        return 0;
    }
    return -ENOENT;
}

/* Finds an error code by the name rd_kafka_err2name() gives it
 * (NOT_LEADER_FOR_PARTITION, _TRANSPORT, ...), with or without the
 * RD_KAFKA_RESP_ERR_ prefix, in any case, or by its number. */
static int lookup_error(const char *name, rd_kafka_resp_err_t *err)
{
    long n;

    if (strncasecmp(name, ERR_PREFIX, strlen(ERR_PREFIX)) == 0)
        name += strlen(ERR_PREFIX);
    if (*name == '\0')
        return -ENOENT;

    for (int e = RD_KAFKA_RESP_ERR__BEGIN + 1; e < RD_KAFKA_RESP_ERR_END_ALL; e++) {
        /* For a code without a description err2name makes up "ERR_<n>?",
         * which no name given here can match because of the '?'. */
        if (strcasecmp(rd_kafka_err2name((rd_kafka_resp_err_t)e), name) == 0) {
            *err = (rd_kafka_resp_err_t)e;
            return 0;
        }
    }
    for (size_t i = 0; i < sizeof(error_aliases) / sizeof(error_aliases[0]); i++) {
        if (strcasecmp(error_aliases[i].name, name) == 0) {
            *err = error_aliases[i].err;
            return 0;
        }
    }
    if (parse_long(name, RD_KAFKA_RESP_ERR__BEGIN + 1, RD_KAFKA_RESP_ERR_END_ALL - 1, &n) == 0 &&
        strchr(rd_kafka_err2name((rd_kafka_resp_err_t)n), '?') == NULL) {
        *err = (rd_kafka_resp_err_t)n;
        return 0;
    }
    return -ENOENT;
}

/* Kafka's rule for topic names: 1 to 249 of [a-zA-Z0-9._-], not "." or "..".
 * The mock itself takes anything, and a topic a real client cannot name
 * would only make a test fail later and further from the typo. */
static bool valid_topic_name(const char *name)
{
    size_t len = strlen(name);

    if (len == 0 || len > MAX_TOPIC_NAME || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* A broker id as the mock's calls take it: 1..N, or -1 for all brokers. */
static int parse_broker(const struct mock *m, const char *s, int32_t *id, struct why *why)
{
    long v;
    int r = parse_long(s, -1, m->brokers, &v);

    if (r == -EINVAL)
        return fail_why(why, r, "broker id '%s' is not a number", s);
    if (r < 0 || v == 0)
        return fail_why(why, -ERANGE, "broker id %s: brokers are 1..%d, or -1 for all", s,
                        m->brokers);
    *id = (int32_t)v;
    return 0;
}

/* Turns a mock call's result into the command's: 0, or -EIO with librdkafka's
 * description of the error after what the call was about. */
static int mock_result(rd_kafka_resp_err_t err, struct why *why, const char *what)
{
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
        return 0;
    return fail_why(why, -EIO, "%s: %s (%s)", what, rd_kafka_err2str(err),
                    rd_kafka_err2name(err));
}

/* 0, or -EINVAL with why saying what a topic name may be. */
static int check_topic_name(const char *name, struct why *why)
{
    if (valid_topic_name(name))
        return 0;
    return fail_why(why, -EINVAL,
                    "topic name '%.*s' is not 1 to %d of [a-zA-Z0-9._-] (nor . or ..)",
                    MAX_TOPIC_NAME, name, MAX_TOPIC_NAME);
}

static int cmd_updown(struct mock *m, char **argv, struct why *why)
{
    bool up = strcmp(argv[0], "up") == 0;
    char what[64];
    int32_t id = 0; /* set unless parse_broker fails; -O3 cannot tell */
    int r = parse_broker(m, argv[1], &id, why);

    if (r < 0)
        return r;
    snprintf(what, sizeof(what), "%s broker %d", up ? "starting" : "stopping", (int)id);
    return mock_result(up ? rd_kafka_mock_broker_set_up(m->cluster, id)
                          : rd_kafka_mock_broker_set_down(m->cluster, id),
                       why, what);
}

static int cmd_rtt(struct mock *m, char **argv, struct why *why)
{
    char what[64];
    int32_t id = 0; /* set unless parsing fails; -O3 cannot tell */
    long ms = 0;
    int r = parse_broker(m, argv[1], &id, why);

    if (r < 0)
        return r;
    r = parse_arg("rtt", argv[2], 0, MAX_RTT_MS, &ms, why);
    if (r < 0)
        return r;
    snprintf(what, sizeof(what), "rtt of broker %d", (int)id);
    return mock_result(rd_kafka_mock_broker_set_rtt(m->cluster, id, (int)ms), why, what);
}

static int cmd_topic(struct mock *m, char **argv, struct why *why)
{
    char what[MAX_TOPIC_NAME + 32];
    long partitions = 0; /* set unless parse_arg fails; -O3 cannot tell */
    int r;

    r = check_topic_name(argv[1], why);
    if (r < 0)
        return r;
    r = parse_arg("partition count", argv[2], 1, MAX_PARTITIONS, &partitions, why);
    if (r < 0)
        return r;
    snprintf(what, sizeof(what), "creating topic %s", argv[1]);
    /* 2.0.2 places replicas with the cluster's own factor, min(3, brokers),
     * whatever is passed here; pass that same number so the request says
     * what the topic gets. */
    return mock_result(rd_kafka_mock_topic_create(m->cluster, argv[1], (int)partitions,
                                                  m->brokers < 3 ? m->brokers : 3),
                       why, what);
}

static int cmd_errors(struct mock *m, char **argv, struct why *why)
{
    rd_kafka_resp_err_t err, *errs;
    int16_t key;
    long count = 0; /* set unless parse_arg fails; -O3 cannot tell */
    int r;

    if (lookup_api(argv[1], &key) < 0) {
        char names[256];
        size_t len = 0;

        names[0] = '\0';
        for (size_t i = 0; i < sizeof(api_keys) / sizeof(api_keys[0]) && len < sizeof(names); i++)
            len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", i ? " " : "",
                                    api_keys[i].name);
        return fail_why(why, -ENOENT, "API '%.64s' is not one the mock serves (%s)", argv[1],
                        names);
    }
    r = parse_arg("error count", argv[2], 1, MAX_ERRORS, &count, why);
    if (r < 0)
        return r;
    if (lookup_error(argv[3], &err) < 0)
        return fail_why(why, -ENOENT,
                        "error '%s' is not a librdkafka error name (as rd_kafka_err2name "
                        "gives them, e.g. NOT_LEADER_FOR_PARTITION, _TRANSPORT)",
                        argv[3]);

    /* The array call rather than the variadic one: COUNT comes from the
     * line, and the variadic one takes its arguments on the stack. */
    errs = calloc((size_t)count, sizeof(*errs));
    if (!errs)
        return fail_why(why, -ENOMEM, "no memory for %ld errors", count);
    for (long i = 0; i < count; i++)
        errs[i] = err;
    rd_kafka_mock_push_request_errors_array(m->cluster, key, (size_t)count, errs);
    free(errs);
    return 0;
}

static int cmd_leader(struct mock *m, char **argv, struct why *why)
{
    char what[MAX_TOPIC_NAME + 64];
    long partition = 0; /* set unless parsing fails; -O3 cannot tell */
    int32_t id = 0;
    int r;

    r = check_topic_name(argv[1], why);
    if (r < 0)
        return r;
    r = parse_arg("partition", argv[2], 0, MAX_PARTITIONS - 1, &partition, why);
    if (r < 0)
        return r;
    r = parse_broker(m, argv[3], &id, why);
    if (r < 0)
        return r;
    snprintf(what, sizeof(what), "moving the leader of %s [%ld] to broker %d", argv[1],
             partition, (int)id);
    /* 2.0.2 makes a topic that does not exist yet, with PARTITION + 1
     * partitions rather than its default; a partition beyond those of a
     * topic that exists is refused. */
    return mock_result(rd_kafka_mock_partition_set_leader(m->cluster, argv[1], (int32_t)partition,
                                                          id),
                       why, what);
}

static int cmd_coordinator(struct mock *m, char **argv, struct why *why)
{
    char what[96];
    int32_t id = 0; /* set unless parse_broker fails; -O3 cannot tell */
    int r;

    if (strcmp(argv[1], "transaction") != 0 && strcmp(argv[1], "group") != 0)
        return fail_why(why, -EINVAL, "coordinator type '%.64s' is neither transaction nor group",
                        argv[1]);
    r = parse_broker(m, argv[3], &id, why);
    if (r < 0)
        return r;
    /* Not -1: a coordinator is one broker. */
    if (id < 1)
        return fail_why(why, -ERANGE, "coordinator %s: a coordinator is one broker, 1..%d",
                        argv[3], m->brokers);
    snprintf(what, sizeof(what), "moving the %s coordinator to broker %d", argv[1], (int)id);
    return mock_result(rd_kafka_mock_coordinator_set(m->cluster, argv[1], argv[2], id), why,
                       what);
}

static const struct command {
    const char *name;
    int argc; /* with the command's own name */
    const char *usage;
    int (*run)(struct mock *m, char **argv, struct why *why);
} commands[] = {
    { "down", 2, "down ID", cmd_updown },
    { "up", 2, "up ID", cmd_updown },
    { "rtt", 3, "rtt ID MS", cmd_rtt },
    { "topic", 3, "topic NAME PARTITIONS", cmd_topic },
    { "errors", 4, "errors API COUNT ERROR", cmd_errors },
    { "leader", 4, "leader TOPIC PARTITION ID", cmd_leader },
    { "coordinator", 4, "coordinator TYPE KEY ID", cmd_coordinator },
    { "quit", 1, "quit", NULL },
};

/* "down, up, ...": every command's name, for the messages that list them. */
static const char *command_names(char *buf, size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]) && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "", commands[i].name);
    return buf;
}

/* Runs one line. Returns 0 after "ok", -errno after "error:" (both are
 * answered in why or by the caller); *quit is set by "quit". */
static int run_line(struct mock *m, char *line, bool *quit, struct why *why)
{
    char *argv[5];
    char names[128];
    int argc = 0;
    char *save = NULL;

    for (char *tok = strtok_r(line, " \t\r", &save); tok; tok = strtok_r(NULL, " \t\r", &save)) {
        if (argc == (int)(sizeof(argv) / sizeof(argv[0])))
            return fail_why(why, -E2BIG, "too many words on the line");
        argv[argc++] = tok;
    }
    if (argc == 0)
        return fail_why(why, -EINVAL, "empty line (commands: %s)",
                        command_names(names, sizeof(names)));

    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        const struct command *c = &commands[i];

        if (strcmp(c->name, argv[0]) != 0)
            continue;
        if (argc != c->argc)
            return fail_why(why, -EINVAL, "%s: usage: %s", argv[0], c->usage);
        if (!c->run) {
            *quit = true;
            return 0;
        }
        return c->run(m, argv, why);
    }
    return fail_why(why, -EINVAL, "unknown command '%.64s' (commands: %s)", argv[0],
                    command_names(names, sizeof(names)));
}

/* Writes one answer line and flushes it, since the other end waits for it.
 * Returns 0 or -errno (EPIPE once the reader is gone). */
static int answer(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int answer(const char *fmt, ...)
{
    va_list ap;
    int r;

    errno = 0;
    va_start(ap, fmt);
    r = vprintf(fmt, ap);
    va_end(ap);
    if (r < 0 || putchar('\n') == EOF || fflush(stdout) == EOF) {
        r = errno ? -errno : -EIO;
        fprintf(stderr, "%s: writing an answer to stdout: %s\n", program, strerror(-r));
        return r;
    }
    return 0;
}

static int answer_line(struct mock *m, char *line, bool *quit)
{
    struct why why = { .text = "" };
    int r = run_line(m, line, quit, &why);

    return r < 0 ? answer("error: %s", why.text) : answer("ok");
}

/* Writes the bootstrap servers to path through a temporary file and a
 * rename, so a test waiting for path never reads half a line. */
static int write_ready_file(const char *path, const char *bootstraps)
{
    char tmp[PATH_MAX];
    int fd, n, r = 0;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp)) {
        fprintf(stderr, "%s: ready file %s: name too long\n", program, path);
        return -ENAMETOOLONG;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        r = -errno;
        fprintf(stderr, "%s: ready file %s: creating %s: %s\n", program, path, tmp, strerror(-r));
        return r;
    }
    /* A short write to a regular file means the disk is full or failing;
     * either way the line is not all there, which is all that counts. */
    errno = 0;
    n = dprintf(fd, "%s\n", bootstraps);
    if (n < 0 || (size_t)n != strlen(bootstraps) + 1)
        r = errno ? -errno : -EIO;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0) {
        fprintf(stderr, "%s: ready file %s: writing it through %s: %s\n", program, path, tmp,
                strerror(-r));
        unlink(tmp);
    }
    return r;
}

/* librdkafka's log lines, which it would otherwise print to stderr
 * unasked; they go there only with --verbose. */
static void log_quiet(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    (void)level;
    (void)fac;
    (void)buf;
}

static void log_stderr(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    fprintf(stderr, "%s: librdkafka %d %s %s: %s\n", program, level, fac, rd_kafka_name(rk),
            buf);
}

static int mock_start(struct mock *m, const struct options *o)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();

    if (!conf) {
        fprintf(stderr, "%s: librdkafka configuration: out of memory\n", program);
        return -ENOMEM;
    }
    rd_kafka_conf_set_log_cb(conf, o->verbose ? log_stderr : log_quiet);
    /* The mock's own account of what it does (topics it creates, brokers
     * going down) is debug output of the "mock" context. */
    if (o->verbose &&
        rd_kafka_conf_set(conf, "debug", "mock", errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "%s: librdkafka configuration debug=mock: %s\n", program, errstr);
        rd_kafka_conf_destroy(conf);
        return -EINVAL;
    }

    /* The cluster needs a handle for its bookkeeping and its thread; a
     * producer with no bootstrap.servers never connects anywhere. */
    m->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!m->rk) {
        fprintf(stderr, "%s: creating the librdkafka handle for the mock cluster: %s\n", program,
                errstr);
        rd_kafka_conf_destroy(conf);
        return -EIO;
    }
    m->cluster = rd_kafka_mock_cluster_new(m->rk, o->brokers);
    if (!m->cluster) {
        fprintf(stderr, "%s: creating a mock cluster of %d brokers failed (listening on "
                        "127.0.0.1; run with --verbose for librdkafka's reason)\n",
                program, o->brokers);
        rd_kafka_destroy(m->rk);
        m->rk = NULL;
        return -EIO;
    }
    m->brokers = o->brokers;
    return 0;
}

static void mock_stop(struct mock *m)
{
    if (m->cluster)
        rd_kafka_mock_cluster_destroy(m->cluster);
    if (m->rk)
        rd_kafka_destroy(m->rk);
    m->cluster = NULL;
    m->rk = NULL;
}

/* Reads lines from stdin and answers them until quit, end of file or a
 * signal in sigfd. Returns 0, or -errno when stdin or stdout fail. */
static int serve(struct mock *m, int sigfd)
{
    char buf[LINE_MAX_BYTES];
    size_t have = 0;
    bool skipping = false, quit = false, eof = false;
    int r = 0;

    while (!quit && !eof) {
        struct pollfd pfd[2] = {
            { .fd = STDIN_FILENO, .events = POLLIN },
            { .fd = sigfd, .events = POLLIN },
        };
        ssize_t n;
        size_t start = 0;

        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            fprintf(stderr, "%s: waiting for commands: %s\n", program, strerror(-r));
            return r;
        }
        if (pfd[1].revents & POLLIN) {
            struct signalfd_siginfo si;

            /* SIGTERM or SIGINT: the caller destroys the cluster, which is
             * all a clean end needs. */
            if (read(sigfd, &si, sizeof(si)) < 0 && errno != EAGAIN) {
                r = -errno;
                fprintf(stderr, "%s: reading the signal that ends it: %s\n", program,
                        strerror(-r));
            }
            return r;
        }
        if (!(pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;

        n = read(STDIN_FILENO, buf + have, sizeof(buf) - have);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            r = -errno;
            fprintf(stderr, "%s: reading commands from stdin: %s\n", program, strerror(-r));
            return r;
        }
        if (n == 0) {
            eof = true;
            /* A last command without its newline still counts. */
            if (have > 0 && !skipping)
                buf[have++] = '\n';
        }
        have += (size_t)n;

        for (size_t i = 0; i < have && !quit; i++) {
            if (buf[i] != '\n')
                continue;
            buf[i] = '\0';
            if (skipping)
                skipping = false;
            else if ((r = answer_line(m, buf + start, &quit)) < 0)
                return r;
            start = i + 1;
        }
        memmove(buf, buf + start, have - start);
        have -= start;
        if (have == sizeof(buf)) {
            /* No newline in a full buffer: answer once, drop the rest of
             * the line, and carry on with the next one. */
            if (!skipping && (r = answer("error: line longer than %d bytes", LINE_MAX_BYTES - 1)) < 0)
                return r;
            skipping = true;
            have = 0;
        }
    }
    return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        { "brokers", required_argument, NULL, 'b' },
        { "partitions", required_argument, NULL, 'p' },
        { "ready-file", required_argument, NULL, 'r' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    long v;

    *o = (struct options){ .brokers = 3 };
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (parse_long(optarg, 1, MAX_BROKERS, &v) < 0) {
                fprintf(stderr, "%s: --brokers %s: not a number in 1..%d\n", program, optarg,
                        MAX_BROKERS);
                return -EINVAL;
            }
            o->brokers = (int)v;
            break;
        case 'p':
            if (parse_long(optarg, 1, MAX_PARTITIONS, &v) < 0) {
                fprintf(stderr, "%s: --partitions %s: not a number in 1..%d\n", program, optarg,
                        MAX_PARTITIONS);
                return -EINVAL;
            }
            /* Refused rather than ignored: a test that asked for 8 and got
             * 4 would measure something else than it says. */
            if (v != MOCK_AUTO_CREATE_PARTITIONS) {
                fprintf(stderr,
                        "%s: --partitions %ld: librdkafka %s's mock cluster gives auto-created "
                        "topics %d partitions and has no call to change that; create the "
                        "topic first with the command 'topic NAME %ld'\n",
                        program, v, rd_kafka_version_str(), MOCK_AUTO_CREATE_PARTITIONS, v);
                return -ENOTSUP;
            }
            break;
        case 'r':
            if (*optarg == '\0') {
                fprintf(stderr, "%s: --ready-file: empty path\n", program);
                return -EINVAL;
            }
            o->ready_file = optarg;
            break;
        case 'v':
            o->verbose = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -EINVAL;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", program, argv[optind]);
        usage(stderr);
        return -EINVAL;
    }
    return 0;
}

/* Blocks SIGTERM and SIGINT in this thread and every thread librdkafka
 * starts after it (they inherit the mask), so the signals wait in the
 * signalfd for the command loop instead of killing the process with the
 * cluster's listeners half torn down. Returns the signalfd or -errno. */
static int block_signals(void)
{
    sigset_t set;
    int fd, r;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    r = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (r != 0) {
        fprintf(stderr, "%s: blocking SIGTERM and SIGINT: %s\n", program, strerror(r));
        return -r;
    }
    fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd < 0) {
        r = -errno;
        fprintf(stderr, "%s: signalfd for SIGTERM and SIGINT: %s\n", program, strerror(-r));
        return r;
    }
    /* An answer to a reader that has gone must fail with EPIPE, not kill
     * the process before it destroys the cluster. */
    signal(SIGPIPE, SIG_IGN);
    return fd;
}

int main(int argc, char **argv)
{
    struct options o;
    struct mock m = { 0 };
    const char *bootstraps;
    bool ready_written = false;
    int sigfd, r;

    if (parse_options(argc, argv, &o) < 0)
        return 2;
    sigfd = block_signals();
    if (sigfd < 0)
        return 1;
    if (mock_start(&m, &o) < 0) {
        close(sigfd);
        return 1;
    }

    /* The ready file first: whoever sees the line on stdout may then rely
     * on the file being there too, and a file that cannot be written ends
     * the program before anyone has been told about the cluster. */
    bootstraps = rd_kafka_mock_cluster_bootstraps(m.cluster);
    r = 0;
    if (o.ready_file) {
        r = write_ready_file(o.ready_file, bootstraps);
        ready_written = r == 0;
    }
    if (r == 0)
        r = answer("%s", bootstraps);
    if (r == 0)
        r = serve(&m, sigfd);

    mock_stop(&m);
    /* The ready file announces a cluster that is listening; once it is
     * gone, so is the file, and a later waiter does not take a stale one. */
    if (ready_written)
        unlink(o.ready_file);
    close(sigfd);
    return r < 0 ? 1 : 0;
}
