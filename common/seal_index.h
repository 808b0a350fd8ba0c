/* The seal index (docs/FORMAT.md, "Seal index"): <spool>/done.index, where
 * the daemon notes, for each shard it seals into done/, the receive times
 * its records can have, so that logctl cat --since/--until passes over a
 * shard outside its window without opening the file.
 *
 * A hint, never the truth. An entry names a file of done/ by its name and
 * its inode number, and counts only while the file of that name has that
 * inode (readdir tells both without opening anything); a shard without an
 * entry, or whose entry does not match, is read as before. The times are
 * outer bounds: the header's creation time and the seal trailer's newest
 * time, so a shard that is later cut shorter still falls within them.
 *
 * The file is a sequence of entries, each appended with one write and
 * never synced, each whole in itself (little-endian):
 *
 *   u32 magic "LSIX", u16 entry length, u16 name length, u64 inode,
 *   u64 created_ns, u64 newest_ns, the name, u32 CRC32C of all before it
 *
 * A reader takes every entry whose magic, lengths, name and CRC check out,
 * and past anything else (a torn append, damage) looks for the next magic,
 * so that bad bytes cost only the entries they hit.
 *
 * No state, no logging. Every function returns 0 or a negative errno;
 * ret_* out-parameters are written only on success. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spool_names.h"

/* The index and the temp name it is rewritten under, in the spool. */
#define SEAL_INDEX_FILE "done.index"
#define SEAL_INDEX_TMP "done.index.tmp"

#define SEAL_INDEX_MAGIC 0x5849534cu /* "LSIX" as it is stored */
/* An entry's bytes besides its name. */
#define SEAL_INDEX_FIXED 36u
/* The longest entry. */
#define SEAL_INDEX_ENTRY_MAX (SEAL_INDEX_FIXED + SPOOL_NAME_SIZE)
/* The largest index read: some 600,000 entries at their longest. */
#define SEAL_INDEX_FILE_MAX (128u * 1024u * 1024u)

struct seal_index_entry {
    uint64_t inode;
    uint64_t created_ns; /* the shard header's creation time */
    uint64_t newest_ns;  /* no record of it was received later */
    char name[SPOOL_NAME_SIZE]; /* a sealed shard's name in done/, NUL-ended */
};

/* Writes e's bytes to out, which has room for SEAL_INDEX_ENTRY_MAX.
 * Returns their count (> 0), or -EINVAL when e->name is not a sealed
 * shard's name (spool_name_parse, SPOOL_SHARD). */
int seal_index_encode(const struct seal_index_entry *e, unsigned char *out);

/* Entries encoded one after the other, as the file holds them: what a
 * writer gathers before it writes. Zeroed is empty; free(buf) frees it. */
struct seal_index_bytes {
    unsigned char *buf;
    size_t len, cap;
};

/* Encodes e at the end of b, growing b as needed. Returns 0, -EINVAL as
 * seal_index_encode, or -ENOMEM (b is then as it was). */
int seal_index_bytes_add(struct seal_index_bytes *b, const struct seal_index_entry *e);

/* Reads the entry at the start of the len bytes at buf. Returns 0 with
 * the entry in *ret and its length in *ret_len; -EAGAIN when buf ends
 * before the entry its first bytes announce would; -EBADMSG when these
 * bytes are not an entry. */
int seal_index_decode(const unsigned char *buf, size_t len, struct seal_index_entry *ret,
                      size_t *ret_len);

/* The good entries of an index, for lookups by name. */
struct seal_index;

/* Takes every good entry of the len bytes at buf (see above); of several
 * for one name, the last. Returns 0 with a new index (empty when nothing
 * was good), or -ENOMEM. */
int seal_index_parse(const unsigned char *buf, size_t len, struct seal_index **ret);

/* Reads spool_fd's SEAL_INDEX_FILE, not through a symlink, and parses it.
 * -ENOENT when there is none, -EFBIG when it is larger than
 * SEAL_INDEX_FILE_MAX, -EBADFD when it is not a regular file, or the
 * error of opening or reading it. */
int seal_index_load(int spool_fd, struct seal_index **ret);

/* The entry for the file name whose inode number is inode, or NULL. */
const struct seal_index_entry *seal_index_find(const struct seal_index *ix, const char *name,
                                               uint64_t inode);

/* The number of entries, and the i-th of them (i below that number), in
 * the order of the file. */
size_t seal_index_count(const struct seal_index *ix);
const struct seal_index_entry *seal_index_at(const struct seal_index *ix, size_t i);

/* Frees ix; NULL is fine. */
void seal_index_free(struct seal_index *ix);
