/* What shard.c (the writer) and shard-create.c (creating the file) share.
 * shard.h is the interface the rest of the daemon uses; this header is for
 * those two files only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct daemon;
struct io_req;
struct shard;
struct shard_batch;

/* What a shard tells its subscribers and its owner (shard-events.h). */
enum shard_report {
    SHARD_REPORT_WRITTEN,
    SHARD_REPORT_FAILED,
    SHARD_REPORT_RELEASED,
    SHARD_REPORT_SEALED,
};

/* ---- shard-batch.c ---- */

/* Grows a batch buffer for more bytes, within memory_limit_bytes. Returns
 * 0 or -ENOMEM. */
int shard__batch_reserve(struct daemon *d, struct shard_batch *b, size_t more);

/* Gives a batch buffer back. */
void shard__batch_release(struct daemon *d, struct shard_batch *b);

/* A whole record was encoded at offset (from b->buf + b->head) without its
 * CRC (shard_encode_record*_unsummed): it is summed with the next two, or
 * by shard__batch_sum(). */
void shard__batch_unsummed(struct shard_batch *b, size_t offset);

/* Fills the CRC fields of the records still without one; before the batch
 * is written. */
void shard__batch_sum(struct shard_batch *b);

/* ---- shard.c ---- */

/* The one way up: every subscriber of the daemon, then the owner. */
void shard__report(struct shard *s, enum shard_report what, int err);

/* Puts the shard on the list the before-submit hook writes from. */
void shard__mark_dirty(struct shard *s);

/* An id above every id used so far, by this daemon and by earlier runs. */
uint64_t shard__next_id(struct daemon *d);

/* Starts the seal of a retired shard once it has settled. */
void shard__maybe_start_seal(struct shard *s);

/* A sync of the shard's file failed (what names it, for the log): nothing
 * after what earlier syncs proved is trusted, the shard takes no more
 * records, its owner hears it. */
void shard__sync_failed(struct shard *s, const char *what, int res);

/* ---- shard-create.c ---- */

/* Picks the shard's id and its two names. Returns 0 or a negative errno. */
int shard__name(struct shard *s);

/* Encodes the header at the start of the filling batch (again in place,
 * the same length, after a new id). Returns 0 or -ENOMEM. */
int shard__encode_header(struct shard *s);

/* Asks for the shard's file; it is created with the next chain. */
void shard__queue_create(struct shard *s);

/* Queues the next chain of creates (the before-submit hook, once the chain
 * before it has ended). */
void shard__submit_creates(struct daemon *d);

/* ---- shard-prepare.c ---- */

/* Under one-flush, after a write of wrote bytes completed (0: after a
 * fill): queues zeros after the records written, for the next shared
 * fdatasync to make durable, when the space prepared ahead runs short,
 * unless a fill is in flight, fills failed or the shard is no longer open. */
void shard__prepare_ahead(struct shard *s, uint64_t wrote);

/* ---- shard-direct.c ---- */

/* Once the shard's space ahead is durable: opens its file again with
 * O_DIRECT, unless the file system refuses. */
void shard__open_direct(struct shard *s);

/* Whether the next write can go with O_DIRECT: the file opened so, the
 * last block's written bytes known, and every block it touches prepared. */
bool shard__can_write_direct(const struct shard *s);

/* An empty filling batch starts where the file will then end: under
 * one-flush its records begin as far into the buffer as into their file
 * block, and it keeps room for whole blocks. Returns the bytes to reserve
 * beyond the records (0 unless one-flush). */
size_t shard__batch_begin(struct shard *s);

/* Sets req up as the O_DIRECT write of the in-flight batch: whole blocks,
 * from the one its records begin in (that block's earlier bytes put in
 * front of them again) to the one they end in (zeros after them, as the
 * prepared space holds). */
void shard__stage_direct(struct shard *s, struct io_req *req);

/* The O_DIRECT write req of the in-flight batch completed with res: its
 * result in bytes of records (all of them), a negative errno that fails
 * the shard, or 0 when the rest is to be written through the page cache
 * from inflight_done on (a short write, or O_DIRECT refused). */
int shard__direct_written(struct shard *s, const struct io_req *req, int res);

/* The copy of the file's last block, under one-flush: it counts towards
 * memory_limit_bytes, as the producer's batches do. Without it (no
 * memory), every write goes through the page cache. */
void shard__alloc_tail(struct shard *s);
void shard__free_tail(struct shard *s);

/* After a write of batch b completed (size_written already counts it):
 * keeps the written bytes of the file's last block for the next O_DIRECT
 * write. */
void shard__keep_tail(struct shard *s, const struct shard_batch *b);

/* The O_DIRECT write req came back with res, EINVAL or EOPNOTSUPP: says
 * so, and the shard's writes go through the page cache from now on. */
void shard__direct_refused(struct shard *s, const struct io_req *req, int res);

/* Closes the O_DIRECT descriptor, if any. */
void shard__close_direct(struct shard *s);
