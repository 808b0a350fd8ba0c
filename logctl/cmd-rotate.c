/* logctl rotate: asks the daemon to seal the shards being written now, and
 * returns once they are in done/ (the daemon answers on the seal, not
 * before), so that a merge or a copy right after it sees every record
 * received up to the rotate. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "json.h"
#include "logctl.h"
#include "wire.h"

#define ROTATE_DEFAULT_TIMEOUT_MS 60000u

static void rotate_help(void)
{
    printf("Usage: logctl rotate [--producer NAME] [--timeout DURATION] [--json]\n"
           "                     [--admin-socket PATH] [--config FILE]\n"
           "\n"
           "Seal the shards being written now, of every producer or of producer NAME,\n"
           "and wait until they are in the spool's done/ directory. Each connection's\n"
           "next record starts a new shard. Shards already being sealed (full or old)\n"
           "are waited for too, so when rotate returns, every record the daemon had\n"
           "received from those producers is in a sealed shard.\n"
           "\n"
           "Options:\n"
           "  -p, --producer NAME      only the shards of producer NAME\n"
           "  -t, --timeout DURATION   how long to wait for the seals (default 60s;\n"
           "                           a number with ms, s, m or h)\n"
           "  -j, --json               print the daemon's answer as one JSON object:\n"
           "                           sealed and failed shards, with their files,\n"
           "                           records and bytes\n"
           "  -a, --admin-socket PATH  the daemon's admin socket (see logctl status)\n"
           "  -c, --config FILE        the daemon's config file\n"
           "  -h, --help               show this help\n"
           "\n"
           "Prints one line per sealed shard, or that there was nothing to seal.\n"
           "Exit status: 0 every shard sealed (or none to seal), 1 a seal failed, the\n"
           "daemon is not running or did not answer in time, 2 usage error or access\n"
           "refused.\n");
}

int logctl_rotate(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "producer", required_argument, NULL, 'p' },
        { "timeout", required_argument, NULL, 't' },
        { "json", no_argument, NULL, 'j' },
        { "admin-socket", required_argument, NULL, 'a' },
        { "config", required_argument, NULL, 'c' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *producer = NULL, *socket_opt = NULL, *config = NULL;
    uint64_t timeout_ms = ROTATE_DEFAULT_TIMEOUT_MS;
    struct json_value *reply = NULL;
    const struct json_value *sealed, *failed;
    char *socket_path = NULL;
    bool json = false;
    int opt, r;

    while ((opt = getopt_long(argc, argv, ":p:t:ja:c:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'p': producer = optarg; break;
        case 't':
            if (parse_duration_ms(optarg, &timeout_ms) < 0 || timeout_ms == 0 ||
                timeout_ms > 24ull * 3600 * 1000)
                return logctl_usage_error("rotate",
                                          "--timeout '%s': a duration such as 30s or 5m, "
                                          "at most 24h",
                                          optarg);
            break;
        case 'j': json = true; break;
        case 'a': socket_opt = optarg; break;
        case 'c': config = optarg; break;
        case 'h': rotate_help(); return LOGCTL_EXIT_OK;
        default: return logctl_option_error("rotate", opt, argv);
        }
    }
    if (optind < argc)
        return logctl_usage_error("rotate", "unexpected argument '%s'", argv[optind]);
    if (producer && wire_check_producer_name(producer, strlen(producer)) < 0)
        return logctl_usage_error("rotate", "--producer '%s': names are %s", producer,
                                  wire_producer_name_rule);
    r = logctl_admin_socket("rotate", socket_opt, config, &socket_path);
    if (r != 0)
        return r;
    r = logctl_admin_request("rotate", socket_path, "rotate", producer, (int)timeout_ms,
                             &reply);
    free(socket_path);
    if (r != 0)
        return r;
    sealed = json_get(reply, "sealed");
    failed = json_get(reply, "failed");
    if (!sealed || sealed->type != JSON_ARRAY || !failed || failed->type != JSON_ARRAY) {
        fprintf(stderr, "logctl: rotate: the daemon's reply does not list the shards\n");
        json_value_free(reply);
        return LOGCTL_EXIT_FAILURE;
    }
    if (json) {
        struct json_out o;

        json_out_init(&o);
        json_obj_begin(&o);
        for (size_t i = 0; i < reply->n; i++) {
            if (strcmp(reply->keys[i], "version") == 0 || strcmp(reply->keys[i], "ok") == 0 ||
                strcmp(reply->keys[i], "command") == 0)
                continue;
            json_key(&o, reply->keys[i]);
            json_write_value(&o, &reply->items[i]);
        }
        json_obj_end(&o);
        (void)logctl_print_json_line("rotate", &o); /* says why itself; the rotate is done */
    } else {
        for (size_t i = 0; i < sealed->n; i++) {
            const struct json_value *s = &sealed->items[i];
            char size[32];

            logctl_format_size(json_get_u64(s, "bytes", 0), false, size, sizeof(size));
            printf("sealed %s: %" PRIu64 " records, %s\n", json_get_str(s, "file", "?"),
                   json_get_u64(s, "records", 0), size);
        }
        if (sealed->n == 0 && failed->n == 0)
            printf("nothing to rotate: no shard %s%s%s is being written\n",
                   producer ? "of producer " : "", producer ? producer : "",
                   producer ? "" : "of any producer");
        if (json_get_u64(reply, "busy", 0) > 0)
            printf("%" PRIu64 " connection%s could not start a new shard now (too many of "
                   "their shards are still being written); run rotate again\n",
                   json_get_u64(reply, "busy", 0), json_get_u64(reply, "busy", 0) == 1 ? "" : "s");
    }
    fflush(stdout);
    for (size_t i = 0; i < failed->n; i++) {
        const struct json_value *s = &failed->items[i];

        fprintf(stderr, "logctl: rotate: %s: %s\n", json_get_str(s, "file", "?"),
                json_get_str(s, "error", "the seal failed"));
    }
    r = failed->n > 0 ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
    json_value_free(reply);
    return r;
}
