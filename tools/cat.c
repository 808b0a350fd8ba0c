/* logctl cat: prints the records of shard and merged files, one per line.
 *
 * It reads through the same shard reader as merge and recovery, so what cat
 * prints is exactly what the rest of the project considers valid. On a bad
 * file it prints the valid prefix first, then names the file, the offset and
 * the reason, and goes on with the next file: a damaged file should not hide
 * the good ones. Payloads are written as they are (binary-safe); a payload
 * that itself contains '\n' therefore spans lines, which is the documented
 * price of the plain line format. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fileutil.h"
#include "logctl.h"
#include "shard_format.h"

static void cat_help(void)
{
    printf("Usage: logctl cat [--meta] FILE...\n"
           "\n"
           "Print every record of each shard or merged FILE to standard output: the\n"
           "payload exactly as stored, then '\\n'.\n"
           "\n"
           "With --meta, each line starts with\n"
           "  <producer> <time> <shard id> \n"
           "where <time> is the daemon's receive time in UTC, RFC 3339 with\n"
           "microseconds (2024-05-01T12:34:56.123456Z), and <shard id> the 16 hex\n"
           "digits of the file name; the three are separated by single spaces and a\n"
           "space separates them from the payload.\n"
           "\n"
           "Options:\n"
           "  -m, --meta   prefix each record with its producer, time and shard id\n"
           "  -h, --help   show this help\n"
           "\n"
           "A damaged file is printed up to its last valid record, then the file,\n"
           "offset and reason are reported on standard error and cat goes on with\n"
           "the next file.\n"
           "Exit status: 0 all files valid, 1 a file was missing or damaged or output\n"
           "failed, 2 usage error.\n");
}

/* RFC 3339, UTC, microseconds: "YYYY-mm-ddTHH:MM:SS.uuuuuuZ". */
static int format_time(uint64_t ns, char *out, size_t size)
{
    time_t secs = (time_t)(ns / 1000000000u);
    unsigned usec = (unsigned)(ns % 1000000000u / 1000u);
    struct tm tm;
    size_t n;

    if (!gmtime_r(&secs, &tm))
        return -EOVERFLOW;
    n = strftime(out, size, "%Y-%m-%dT%H:%M:%S", &tm);
    if (n == 0 || snprintf(out + n, size - n, ".%06uZ", usec) >= (int)(size - n))
        return -EOVERFLOW;
    return 0;
}

static int print_record(const struct shard_item *item, bool meta)
{
    if (meta) {
        char when[64];

        if (format_time(item->timestamp_ns, when, sizeof(when)) < 0)
            snprintf(when, sizeof(when), "@%" PRIu64 "ns", item->timestamp_ns);
        printf("%s %s %016" PRIx64 " ", item->header->producer, when, item->header->shard_id);
    }
    if (fwrite(item->payload, 1, item->len, stdout) != item->len || putchar('\n') == EOF)
        return errno ? -errno : -EIO;
    return 0;
}

/* Returns 0 when the whole file was valid, or a negative errno when it was
 * missing or damaged, which is reported here. When standard output fails,
 * *ret_out_err gets the errno and the caller reports it once. */
static int cat_file(const char *path, bool meta, int *ret_out_err)
{
    _cleanup_close_ int fd = -1;
    struct shard_reader *reader = NULL;
    struct shard_item item;
    int r;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        r = -errno;
        fflush(stdout);
        fprintf(stderr, "logctl: cat: %s: %s\n", path, strerror(-r));
        return r;
    }
    r = shard_reader_new(&reader, fd);
    if (r < 0) {
        fprintf(stderr, "logctl: cat: %s: %s\n", path, strerror(-r));
        return r;
    }
    while ((r = shard_reader_next(reader, &item)) > 0) {
        if (item.kind != SHARD_ITEM_RECORD)
            continue;
        errno = 0;
        r = print_record(&item, meta);
        if (r < 0) {
            *ret_out_err = -r;
            shard_reader_free(reader);
            return r;
        }
    }
    if (r < 0) {
        uint64_t off;
        const char *why;

        shard_reader_error(reader, &off, &why);
        /* What was valid goes out before the complaint about what was not. */
        fflush(stdout);
        if (r == -EBADMSG || r == -ENODATA)
            fprintf(stderr, "logctl: cat: %s: %s at offset %" PRIu64 "\n", path,
                    why ? why : strerror(-r), off);
        else
            fprintf(stderr, "logctl: cat: %s: %s at offset %" PRIu64 ": %s\n", path,
                    why ? why : "error", off, strerror(-r));
    }
    shard_reader_free(reader);
    return r;
}

int logctl_cat(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "meta", no_argument, NULL, 'm' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    bool meta = false, failed = false;
    int out_err = 0;
    int opt;

    while ((opt = getopt_long(argc, argv, ":mh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'm':
            meta = true;
            break;
        case 'h':
            cat_help();
            return LOGCTL_EXIT_OK;
        default:
            return logctl_option_error("cat", opt, argv);
        }
    }
    if (optind >= argc)
        return logctl_usage_error("cat", "no file given");

    for (int i = optind; i < argc; i++) {
        if (cat_file(argv[i], meta, &out_err) < 0)
            failed = true;
        if (out_err != 0)
            break; /* nobody can read what we would print */
    }
    errno = 0;
    if (out_err == 0 && fflush(stdout) != 0)
        out_err = errno ? errno : EIO;
    if (out_err != 0) {
        fprintf(stderr, "logctl: cat: write error on standard output: %s\n", strerror(out_err));
        return LOGCTL_EXIT_FAILURE;
    }
    return failed ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
}
