/* The stream positions file (docs/FORMAT.md, "Stream positions file"):
 * where each producer stream continues, kept in <spool>/streams/ so that it
 * outlives the shards it was learnt from.
 *
 * The daemon rebuilds the position a stream continues at from the version 3
 * shards in done/, but logctl merge --delete removes those shards. Before it
 * removes the first one it writes, with positions_write(), one entry per
 * stream it is about to remove: the position after the stream's last record
 * in them. The daemon reads every such file at start (positions_load()),
 * takes for each stream the highest next position of all it read and of
 * done/, writes what it keeps into a file of its own, and only then removes
 * the files it absorbed (positions_remove()). Because the reader takes the
 * maximum, a file written twice, or an older file read again, is harmless.
 *
 * A file is text: a header line naming the format and its version, one line
 * per stream, and an end line with the count of stream lines and the
 * CRC32C of every byte before it. It is written under a temp name, synced,
 * and renamed without replacing anything, so a file under a final name is
 * whole; the end line also catches damage and hand edits. A file that does
 * not check out is refused whole, never half read: positions_load() reports
 * it by name with the line and the reason and goes on with the others, and
 * the daemon moves it to quarantine/ (positions_quarantine()).
 *
 * Bounds: a file is at most POSITIONS_FILE_MAX bytes; positions_format()
 * refuses to write more, and positions_load() refuses a larger file without
 * reading it. The parser allocates only after it has counted the lines of a
 * buffer of that size, so a file never costs more than one struct
 * positions_entry per 48 bytes of it (the shortest stream line).
 *
 * No state, no logging. Every function returns 0 or a negative errno;
 * ret_* out-parameters are written only on success, except where a
 * function says that it fills one on a particular failure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shard_format.h"
#include "wire.h"

/* The first line of every positions file: its format and version. */
#define POSITIONS_MAGIC "logshard-stream-positions"
#define POSITIONS_VERSION 1u

/* The largest positions file written or read: 16 MiB, some 100,000 streams
 * at their longest lines (158 bytes). */
#define POSITIONS_FILE_MAX (16u * 1024u * 1024u)

/* One stream. */
struct positions_entry {
    uint8_t stream_id[SHARD_STREAM_ID_SIZE]; /* never all zero */
    uint64_t next_position; /* every position below it is stored (or was, in a
                               removed shard); below SHARD_POSITION_LIMIT */
    uint64_t newest_ns;     /* receive time (CLOCK_REALTIME ns) of the newest
                               record, for the daemon's resume window */
    uint32_t uid;           /* the producer's uid from the shard header */
    char producer[WIRE_PRODUCER_NAME_MAX + 1]; /* NUL-terminated; passes
                                                  wire_check_producer_name */
};

/* Whether e could be written: a stream id not all zero, next_position below
 * SHARD_POSITION_LIMIT, a producer name (terminated within its array) that
 * passes wire_check_producer_name. */
bool positions_entry_valid(const struct positions_entry *e);

/* Formats n entries (in the order given; v may be NULL when n is 0) as the
 * text of a positions file. Returns 0 with a new buffer in *ret_buf (free()
 * it; not NUL-terminated) and its length in *ret_len; -EINVAL when an entry
 * is not positions_entry_valid; -EFBIG when the text would be larger than
 * POSITIONS_FILE_MAX; or -ENOMEM. */
int positions_format(const struct positions_entry *v, size_t n, char **ret_buf, size_t *ret_len);

/* Parses and checks the len bytes at buf (no NUL needed) as a whole
 * positions file: the header line, then only stream lines, then the end
 * line whose count and CRC32C must match, and nothing after it. Every
 * field is checked: the stream id is exactly 32 lowercase hex digits and
 * not all zero, the numbers are plain decimal (no sign, no leading zero)
 * within their type, next_position below SHARD_POSITION_LIMIT, the
 * producer passes wire_check_producer_name; fields are separated by one
 * space and lines end with "\n".
 *
 * A stream on several lines is one stream: the result has one entry per
 * stream id, with the highest next_position of its lines, the highest
 * newest_ns, and the uid and producer of the line with the highest
 * next_position (on a tie, of the line that sorts last by newest_ns, uid,
 * producer, so the result never depends on the order of the lines).
 * Entries come sorted by stream id (memcmp order), so the daemon can
 * bsearch them, and positions_format() of them writes a file that parses
 * back to the same entries.
 *
 * Returns 0 with a new array in *ret_v (free() it; NULL when there is no
 * stream) and its length in *ret_n; -EBADMSG when the text is not a whole,
 * valid positions file, with *ret_line (1-based; the line after the last
 * one when the file ends too early) and *ret_why (a static string)
 * written, when not NULL, on that failure only; -EFBIG when len is over
 * POSITIONS_FILE_MAX; or -ENOMEM. */
int positions_parse(const char *buf, size_t len, struct positions_entry **ret_v, size_t *ret_n,
                    size_t *ret_line, const char **ret_why);

/* Writes the n entries as a new file in <spool>/streams/ (spool_fd: the
 * spool directory), durably: streams/ is created (mode 0750) when missing
 * and the spool directory synced, always, so that its entry is durable
 * even when a writer that made it was killed before its sync; a temp file
 * ".<name>.tmp" is created there with O_CREAT|O_EXCL|O_CLOEXEC|O_NOFOLLOW
 * (mode 0640), written and fdatasynced, renamed without replacing anything
 * (spool_rename_noreplace) to "<kind>-<CLOCK_REALTIME ns>-<16 random hex>.pos"
 * (spool_positions_name_format; a name taken is tried again with another
 * random part), and streams/ is fsynced. A streams that is no directory or
 * a symbolic link fails the call (-ENOTDIR, -ELOOP) rather than being
 * followed or replaced.
 *
 * kind says who wrote it: "merge" (logctl merge --delete) or "daemon" (the
 * daemon's compacted file); any 1 to SPOOL_POSITIONS_KIND_MAX bytes of
 * [a-z] are accepted. n may be 0 (a file with no stream).
 *
 * Returns 0 with the new file's name in streams/ in *ret_name (free() it;
 * ret_name may be NULL), or a negative errno: -EINVAL for a bad kind or
 * entry, -EFBIG, or the error of the system call that failed. When the
 * failure comes before the rename, the temp file is removed and nothing is
 * left; when it comes after it (the fsync of streams/), the file is in
 * place but may not survive a crash, which loses nothing: the caller must
 * not act on it as if it were durable. */
int positions_write(int spool_fd, const char *kind, const struct positions_entry *v, size_t n,
                    char **ret_name);

/* A file of streams/ that positions_load() could not use. */
struct positions_bad_file {
    char *name;      /* its name in streams/ */
    int error;       /* -EBADMSG: damaged (a bad line, cut short, larger than
                        POSITIONS_FILE_MAX, or not a regular file: a FIFO,
                        directory, symlink, socket or device; never opened in
                        a way that blocks) and to be moved to quarantine/;
                        anything else: it could not be read (permissions, an
                        I/O error) and may be fine, so it is left in place */
    size_t line;     /* the line of a parse error (1-based); 0: none */
    const char *why; /* static: the parse error, or what else is wrong */
};

/* What positions_load() found in streams/. Names are in name order. */
struct positions_load_report {
    char **read;  /* the positions files read whole and given to each() */
    size_t n_read;
    struct positions_bad_file *bad; /* those refused, each() never saw them */
    size_t n_bad;
    char **temps; /* temp names left by a writer that was killed (or is
                     writing now); never read */
    size_t n_temps;
};

/* Frees what r holds and zeroes it; NULL and a zeroed report are fine. */
void positions_load_report_free(struct positions_load_report *r);

/* Reads every positions file in <spool>/streams/: each entry named
 * <kind>-<ns>-<hex>.pos (spool_positions_name_parse) that is a regular file
 * (opened with O_NOFOLLOW and without blocking: open_regular_at) of at most
 * POSITIONS_FILE_MAX bytes, in name order. A file that parses whole has
 * each() called once for every entry of positions_parse's result before
 * the next file is read; one that does not is reported in the report's
 * bad list and skipped. Temp names are listed, never read; every other
 * name is ignored. No streams/ at all is an empty report.
 *
 * The daemon's order, so that a crash at any point loses nothing: read
 * with this, write what it keeps with positions_write(spool_fd, "daemon",
 * ...), and only then remove the files of report.read with
 * positions_remove() (and quarantine those of report.bad with error
 * -EBADMSG). A file read twice after a crash between those steps is
 * harmless, since the reader keeps the highest position of each stream.
 * A temp name may be removed too: a writer whose temp vanishes fails at
 * its rename, and logctl merge then deletes nothing.
 *
 * Returns 0 with *ret_report filled (free it with
 * positions_load_report_free), whatever the bad list holds; the negative
 * value each() returned, which stops the load; or a negative errno when
 * streams/ cannot be opened or listed (-ENOTDIR when it is no directory)
 * or memory runs out. */
int positions_load(int spool_fd, int (*each)(const struct positions_entry *e, void *arg),
                   void *arg, struct positions_load_report *ret_report);

/* Removes the n files of streams/ named in names (positions names or their
 * temp names only; anything else is -EINVAL before anything is removed),
 * then fsyncs streams/ once. A name already gone is fine. Returns 0, or
 * the first error of unlinkat (the names after it stay) or of the fsync. */
int positions_remove(int spool_fd, const char *const *names, size_t n);

/* Moves streams/<name> (a positions or temp name) to <spool>/quarantine/
 * under its own name, or with .1 to .999 added when that is taken, never
 * replacing a file and never opening it (spool_quarantine_move);
 * quarantine/ is created (0750) when missing and the spool synced, and
 * quarantine/, then streams/, are fsynced after the move. Returns 0 with
 * the name in quarantine/ in *ret_qname (free() it; ret_qname may be
 * NULL), -EINVAL for another name, or the negative errno of the step that
 * failed (the file then stays in streams/, unless the failure was a sync
 * after the move). */
int positions_quarantine(int spool_fd, const char *name, char **ret_qname);
