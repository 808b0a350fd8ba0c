/* logctl ship: the command line of the shipper (ship/, whose ship_run does
 * the work and never prints): the options over [ship] of the config file,
 * the hooks (log lines on stderr, with journald priorities under systemd;
 * the daemon's active shards through the admin socket; SIGTERM; sd_notify),
 * and --status, which prints what the running shipper last wrote to
 * <spool>/ship/status.json.
 *
 * Exit status: 0 shipped (or stopped by SIGTERM/SIGINT), 1 failed, 2 usage
 * error, or another shipper holds the spool or fenced this one twice within
 * 10 minutes. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "config.h"
#include "fileutil.h"
#include "json.h"
#include "logctl.h"
#include "logshard-build.h"
#include "ship.h"
#include "ship_progress.h"

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

struct ship_cli {
    const char *admin_socket;
    bool journal;          /* stderr goes to the journal: priority prefixes */
    uint64_t ls_retry_ns;  /* the daemon did not answer: ask again after this */
    bool ls_failed;
};

static void cli_log(void *arg, enum ship_log_level level, const char *message)
{
    struct ship_cli *cli = arg;

    if (cli->journal)
        fprintf(stderr, "<%d>%s\n", (int)level, message);
    else
        fprintf(stderr, "logctl: ship: %s\n", message);
}

static bool cli_should_stop(void *arg)
{
    (void)arg;
    return stop_requested != 0;
}

static void cli_notify(void *arg, const char *state)
{
    (void)arg;
    (void)sd_notify(0, state);
}

/* The daemon's active shards, from its admin socket's ls. When the daemon
 * is away (stopped, restarting) only sealed shards are shipped, and it is
 * asked again five seconds later rather than every poll. */
static int cli_list_active(void *arg, struct ship_active_shard **ret_v, size_t *ret_n)
{
    struct ship_cli *cli = arg;
    struct json_value *reply = NULL;
    const struct json_value *shards;
    struct ship_active_shard *v;
    size_t n = 0;
    int r;

    if (cli->ls_failed && now_monotonic_ns() < cli->ls_retry_ns)
        return -EAGAIN;
    r = logctl_admin_request("ship", cli->admin_socket, "ls", NULL, 2000, &reply);
    if (r != 0) {
        if (!cli->ls_failed)
            cli_log(cli, SHIP_LOG_NOTICE,
                    "the daemon's active shards are not known; only sealed shards are shipped "
                    "until it answers");
        cli->ls_failed = true;
        cli->ls_retry_ns = now_monotonic_ns() + 5000000000ull;
        return -EAGAIN;
    }
    if (cli->ls_failed)
        cli_log(cli, SHIP_LOG_NOTICE, "the daemon answers again; its active shards are shipped");
    cli->ls_failed = false;
    shards = json_get(reply, "shards");
    if (shards && shards->type == JSON_ARRAY)
        n = shards->n;
    v = calloc(n ? n : 1, sizeof(*v));
    if (!v) {
        json_value_free(reply);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const struct json_value *s = &shards->items[i];
        const char *file = json_get_str(s, "file", "");
        const char *slash = strrchr(file, '/');

        snprintf(v[i].file, sizeof(v[i].file), "%s", slash ? slash + 1 : file);
        v[i].records_acked = json_get_u64(s, "records_acknowledged", 0);
    }
    json_value_free(reply);
    *ret_v = v;
    *ret_n = n;
    return 0;
}

static void ship_help(void)
{
    printf("Usage: logctl ship [--spool DIR] [--brokers HOST:PORT[,...]] [--topic TEMPLATE]\n"
           "                   [--follow] [--set KEY=VALUE]... [--config FILE]\n"
           "                   [--admin-socket PATH]\n"
           "       logctl ship --status [--json] [--spool DIR] [--config FILE]\n"
           "\n"
           "Produce every record of the spool to Kafka exactly once. Records go in\n"
           "transactions that also store, in the progress topic, how far each\n"
           "producer stream is shipped; a shipper killed at any moment and started\n"
           "again reads that back and goes on after it, so a consumer reading with\n"
           "isolation.level=read_committed sees each record once, in order per\n"
           "producer. Without --follow every sealed record not yet shipped is\n"
           "shipped and committed, then logctl ship exits 0. With --follow it goes\n"
           "on, shipping also the acknowledged records of the daemon's active\n"
           "shards, until SIGTERM or SIGINT. One shipper per spool (DIR/ship/lock).\n"
           "\n"
           "Each record becomes one message: the payload as it is, the producer\n"
           "name as key, the receive time as timestamp, and the headers\n"
           "logshard.stream, logshard.position, logshard.producer, logshard.uid,\n"
           "logshard.pid, logshard.shard and logshard.shipper; a record of a syslog\n"
           "input also logshard.source, and a syslog datagram's uid and pid are its\n"
           "own sender's.\n"
           "\n"
           "Options (each overrides the [ship] key of the config file):\n"
           "  -s, --spool DIR          the spool (default: [daemon] spool)\n"
           "  -b, --brokers LIST       bootstrap servers ([ship] brokers)\n"
           "  -t, --topic TEMPLATE     topic; {producer} and {host} are replaced\n"
           "                           ([ship] topic, default logshard)\n"
           "  -f, --follow             keep shipping what arrives\n"
           "  -X, --set KEY=VALUE      a librdkafka property, as kcat -X; also any\n"
           "                           [ship] key: --set transaction_records=5000\n"
           "      --check              check the settings (brokers set, librdkafka\n"
           "                           takes them) and exit 0, or 1 saying why\n"
           "      --status             print the running shipper's figures\n"
           "      --json               with --status: as one JSON object\n"
           "  -c, --config FILE        the config file (default " LOGSHARD_DEFAULT_CONFIG ")\n"
           "  -a, --admin-socket PATH  the daemon's admin socket, for --follow\n"
           "  -h, --help               this text\n"
           "\n"
           "docs/SHIP.md and logctl(1) say what exactly-once means here and its limits.\n");
}

static int print_status(const char *spool, bool json)
{
    _cleanup_close_ int fd = -1;
    char path[4096], buf[65536];
    struct json_value *v = NULL;
    const char *why = NULL;
    ssize_t got;
    char when[64], age[64];
    uint64_t updated;

    snprintf(path, sizeof(path), "%s/%s/%s", spool, SHIP_DIR, SHIP_STATUS_FILE);
    if (open_regular_at(AT_FDCWD, path, O_NOFOLLOW, &fd, NULL) < 0) {
        fprintf(stderr, "logctl: ship: %s: %s (has logctl ship run on this spool?)\n", path,
                strerror(errno ? errno : ENOENT));
        return LOGCTL_EXIT_FAILURE;
    }
    got = read_full(fd, buf, sizeof(buf) - 1);
    if (got < 0 || json_parse(buf, (size_t)got, &v, &why, NULL) < 0) {
        fprintf(stderr, "logctl: ship: %s: %s\n", path,
                got < 0 ? strerror((int)-got) : why ? why : "not JSON");
        return LOGCTL_EXIT_FAILURE;
    }
    if (json) {
        fwrite(buf, 1, (size_t)got, stdout);
        putchar('\n');
        json_value_free(v);
        return LOGCTL_EXIT_OK;
    }
    updated = json_get_u64(v, "updated_ns", 0);
    logctl_format_local_time(updated, when, sizeof(when));
    logctl_format_duration((double)(now_realtime_ns() - updated) / 1e9, age, sizeof(age));
    printf("shipper:        %s (pid %" PRIu64 ", transactional.id %s)\n",
           json_get_str(v, "state", "?"), json_get_u64(v, "pid", 0),
           json_get_str(v, "transactional_id", "?"));
    printf("  updated:      %s (%s ago)\n", when, age);
    printf("  shipped:      %" PRIu64 " records, %" PRIu64 " bytes; %.0f records/s\n",
           json_get_u64(v, "records_shipped", 0), json_get_u64(v, "bytes_shipped", 0),
           json_get_double(v, "records_per_s", 0));
    printf("  lag:          %" PRIu64 " records, %.1f s\n", json_get_u64(v, "lag_records", 0),
           json_get_double(v, "lag_seconds", 0));
    printf("  transactions: %" PRIu64 " committed, %" PRIu64 " aborted\n",
           json_get_u64(v, "transactions_committed", 0),
           json_get_u64(v, "transactions_aborted", 0));
    printf("  broker errors: %" PRIu64 "\n", json_get_u64(v, "broker_errors", 0));
    if (json_get_u64(v, "records_missing", 0))
        printf("  missing:      %" PRIu64 " positions were not in the spool\n",
               json_get_u64(v, "records_missing", 0));
    if (json_get_str(v, "last_error", NULL))
        printf("  last error:   %s\n", json_get_str(v, "last_error", ""));
    json_value_free(v);
    return LOGCTL_EXIT_OK;
}

/* --set: a [ship] key when there is one, else a librdkafka property. */
static int apply_set(struct config *c, const char *arg)
{
    const char *eq = strchr(arg, '=');
    char key[256], why[512];
    int r;

    if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof(key))
        return logctl_usage_error("ship", "--set '%s': expected KEY=VALUE", arg);
    memcpy(key, arg, (size_t)(eq - arg));
    key[eq - arg] = '\0';
    r = config_set(c, "ship", key, eq + 1, why, sizeof(why));
    if (r == -ENOENT) {
        r = config_set_kafka(c, key, eq + 1, CONFIG_ORIGIN_COMMAND_LINE);
        if (r == -EINVAL)
            return logctl_usage_error("ship",
                                      "--set %s: no such [ship] key, and librdkafka "
                                      "properties have a dot in their name",
                                      key);
        if (r < 0) {
            fprintf(stderr, "logctl: ship: out of memory\n");
            return LOGCTL_EXIT_FAILURE;
        }
        return 0;
    }
    if (r < 0)
        return logctl_usage_error("ship", "--set %s: %s", key, why);
    return 0;
}

int logctl_ship(int argc, char **argv)
{
    static const struct option options[] = {
        { "spool", required_argument, NULL, 's' },
        { "brokers", required_argument, NULL, 'b' },
        { "topic", required_argument, NULL, 't' },
        { "follow", no_argument, NULL, 'f' },
        { "set", required_argument, NULL, 'X' },
        { "status", no_argument, NULL, 'S' },
        { "check", no_argument, NULL, 'C' },
        { "json", no_argument, NULL, 'J' },
        { "config", required_argument, NULL, 'c' },
        { "admin-socket", required_argument, NULL, 'a' },
        { "help", no_argument, NULL, 'h' },
        {},
    };
    const char *spool_opt = NULL, *config_path = NULL, *socket_opt = NULL;
    const char *brokers = NULL, *topic = NULL;
    char **sets = calloc((size_t)argc + 1, sizeof(char *));
    size_t n_sets = 0;
    bool follow = false, status = false, json = false, check = false;
    _cleanup_free_ char *spool = NULL;
    _cleanup_free_ char *socket_path = NULL;
    struct ship_cli cli = { 0 };
    struct ship_hooks hooks = { cli_log, cli_list_active, cli_should_stop, cli_notify, &cli };
    struct ship_opts opts = { 0 };
    struct config c;
    struct sigaction sa = { .sa_handler = on_stop_signal };
    int opt, r;
    char why[512];

    if (!sets) {
        fprintf(stderr, "logctl: ship: out of memory\n");
        return LOGCTL_EXIT_FAILURE;
    }
    while ((opt = getopt_long(argc, argv, ":s:b:t:fX:c:a:h", options, NULL)) != -1) {
        switch (opt) {
        case 's': spool_opt = optarg; break;
        case 'b': brokers = optarg; break;
        case 't': topic = optarg; break;
        case 'f': follow = true; break;
        case 'X': sets[n_sets++] = optarg; break;
        case 'S': status = true; break;
        case 'C': check = true; break;
        case 'J': json = true; break;
        case 'c': config_path = optarg; break;
        case 'a': socket_opt = optarg; break;
        case 'h': ship_help(); free(sets); return LOGCTL_EXIT_OK;
        default: free(sets); return logctl_option_error("ship", opt, argv);
        }
    }
    if (optind < argc) {
        free(sets);
        return logctl_usage_error("ship", "unexpected argument '%s'", argv[optind]);
    }
    if (json && !status) {
        free(sets);
        return logctl_usage_error("ship", "--json goes with --status");
    }
    r = logctl_spool("ship", spool_opt, config_path, &spool);
    if (r != 0) {
        free(sets);
        return r;
    }
    if (status) {
        free(sets);
        return print_status(spool, json);
    }
    r = logctl_load_config("ship", config_path, &c);
    if (r != 0) {
        free(sets);
        return r;
    }
    r = 0;
    if (brokers && config_set(&c, "ship", "brokers", brokers, why, sizeof(why)) < 0)
        r = logctl_usage_error("ship", "--brokers: %s", why);
    if (r == 0 && topic && config_set(&c, "ship", "topic", topic, why, sizeof(why)) < 0)
        r = logctl_usage_error("ship", "--topic: %s", why);
    for (size_t i = 0; r == 0 && i < n_sets; i++)
        r = apply_set(&c, sets[i]);
    free(sets);
    if (r == 0 && check) {
        r = ship_check_settings(&c, why, sizeof(why));
        if (r < 0)
            fprintf(stderr, "logctl: ship: %s\n", why);
        else
            printf("ship settings: brokers %s, topic %s, progress topic %s\n", c.ship_brokers,
                   c.ship_topic, c.ship_progress_topic);
        config_free(&c);
        return r < 0 ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
    }
    if (r == 0 && !c.ship_brokers)
        r = logctl_usage_error("ship", "no brokers: give --brokers HOST:PORT[,...] or set "
                                       "[ship] brokers in the config file");
    if (r == 0 && follow)
        r = logctl_admin_socket("ship", socket_opt, config_path, &socket_path);
    if (r != 0) {
        config_free(&c);
        return r;
    }
    cli.admin_socket = socket_path;
    cli.journal = getenv("JOURNAL_STREAM") != NULL;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGTERM, &sa, NULL);
    (void)sigaction(SIGINT, &sa, NULL);
    /* Every record's headers are allocated and freed in small pieces;
     * glibc's fastbins then cost a consolidation at each larger malloc,
     * which a profile of shipping 2 million records put at a fifth of the
     * time (docs/BENCHMARKS.md, "Ship mode"). Without fastbins it ran 10%
     * faster. Where logctl is linked with mimalloc (meson's mimalloc
     * option) glibc's malloc is not used and this changes nothing. */
    (void)mallopt(M_MXFAST, 0);
    opts.config = &c;
    opts.spool = spool;
    opts.follow = follow;
    r = ship_run(&opts, &hooks);
    config_free(&c);
    /* Another shipper has the spool or the transactional id: starting
     * again would only fence it in turn (logshard-ship.service does not
     * restart on 2). */
    if (r == -EBUSY || r == -EPERM)
        return LOGCTL_EXIT_USAGE;
    return r < 0 ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
}
