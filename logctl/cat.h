/* Between logctl cat (cat.c: files and the spool) and its --follow mode
 * (follow.c): which records to print and how, and how damage that was
 * skipped is told (verify.c and ls.c too). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cat-syslog.h"
#include "shard_format.h"

struct cat_opts {
    bool meta;
    bool json;
    const char *const *producers; /* only these (none: every producer) */
    size_t n_producers;
    uint64_t since_ns; /* records received at or after; 0: no bound */
    uint64_t until_ns; /* at or before; UINT64_MAX: no bound */
    struct cat_syslog_filter syslog; /* --priority, --identifier */
};

/* Whether records of this producer are wanted. */
bool cat_wants_producer(const struct cat_opts *o, const char *producer);

/* Whether a sealed shard created at created_ns (its header's time), none
 * of whose records was received after newest_ns (its trailer's), holds no
 * record --since and --until want (cat-order.c). */
bool cat_outside_window(const struct cat_opts *o, uint64_t created_ns, uint64_t newest_ns);

/* Prints the record if its producer, time, and for syslog records their
 * severity and identifier, are wanted. Returns 0, or a negative errno when
 * standard output failed. */
int cat_print_record(const struct cat_opts *o, const struct shard_item *item);

/* The source of a shard as cat shows it: its name, or its number (in buf,
 * of size bytes) when this logctl does not know it. */
const char *cat_source_text(unsigned source, char *buf, size_t size);

/* Prints the record as one JSON object on a line of its own (cat-json.c);
 * sm: its syslog message, read, for a record of a syslog input, else NULL.
 * Returns 0, or a negative errno when out of memory or standard output
 * failed. */
int cat_print_json(const struct shard_item *item, const struct syslog_msg *sm);

/* Prints the wanted records (all of them read, none printed unless print)
 * that reader returns until it can read no further, skipping damage
 * (skip_flags as for shard_reader_skip_damage) and reporting each skip on
 * standard error as "logctl: cat: PATH: ...", after flushing what was
 * printed before it. Sets *ret_damaged when it reported a skip. Returns 0
 * at the end of the file, 1 when damage ran to the end of the file (a
 * growing file gives no footing after it), -ENODATA at a torn tail with
 * SHARD_SKIP_GROWING (a write in progress; not reported), -EAGAIN when
 * SHARD_SKIP_GROWING and what follows the damage is not written yet (not
 * reported; call again when the file grew), or another negative errno:
 * when standard output failed, *ret_out_err is set, else it was reported
 * (a read error). */
int cat_read(struct shard_reader *reader, const char *path, const struct cat_opts *o,
             unsigned skip_flags, bool print, bool *ret_damaged, int *ret_out_err);

/* Describes a skip for people: what was wrong where, and what was skipped
 * ("record CRC mismatch at offset 112: skipped that record (22 bytes) of
 * shard app.000000000000002a"). at_end: the skip ran to the end of the file. */
void logctl_describe_skip(const struct shard_skip *s, bool at_end, char *out, size_t size);

/* The stream of a shard as logctl shows it: its 32 lowercase hex digits,
 * or "-" for a shard without one (versions 1 and 2, or none given). */
#define LOGCTL_STREAM_TEXT_MAX (2 * SHARD_STREAM_ID_SIZE + 1)
void logctl_format_stream(const uint8_t id[SHARD_STREAM_ID_SIZE], char *out, size_t size);
void logctl_format_shard_stream(const struct shard_header *h, char *out, size_t size);

/* Prints the wanted records of the len bytes of fd from offset (one shard
 * of a merged file), or of the whole file when len is UINT64_MAX (offset
 * must then be 0), going on past damage and reporting it as path. A file
 * being written (active) may end in a torn record, which is no damage.
 * Returns 0 when what was read was valid, 1 when damage was found
 * (reported), or a negative errno (reported unless standard output failed:
 * then *ret_out_err is set). */
int cat_shard_range(int fd, const char *path, const struct cat_opts *o, bool active,
                    uint64_t offset, uint64_t len, int *ret_out_err);

/* Opens the file-th file of a cat_files_in_order() list. Returns 0 with
 * *ret_fd, its size when opened in *ret_size, a new *ret_shown (its name
 * for messages; NULL when quiet) and *ret_active (a shard being written).
 * A quiet open says nothing and is for pread(2) only: its descriptor may
 * be non-blocking. It may be called from several threads at once, for
 * different files. Returns 1 when the file is to be passed over in silence
 * (gone from the spool since it was listed); or a negative errno, which it
 * reported on standard error unless quiet. */
typedef int (*cat_open_fn)(void *ctx, size_t file, bool quiet, int *ret_fd, uint64_t *ret_size,
                           char **ret_shown, bool *ret_active);

/* Prints the records of n_files files (cat-order.c) in the order of the
 * list, except that each producer stream's shards, across all of them, are
 * printed in the order of their positions (common/shard_order.h). Sets
 * *failed when a file could not be read or had damage; *ret_out_err as
 * cat_shard_range. Returns 0, or -ENOMEM (not reported). */
int cat_files_in_order(size_t n_files, cat_open_fn open_file, void *ctx,
                       const struct cat_opts *o, bool *failed, int *ret_out_err);

/* The longest logctl_describe_skip() text. */
#define LOGCTL_SKIP_TEXT_MAX 512

/* logctl cat --follow: prints the records appended to the active shards of
 * the wanted producers in spool/active from now on, following each
 * producer into its next shard, until SIGINT or SIGTERM. Returns the exit
 * status. */
int cat_follow(const struct cat_opts *o, const char *spool);
