/* The seal index's bytes, and a table of its entries by name (see the
 * header). */
#include "seal_index.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "fileutil.h"
#include "keyed_hash.h"
#include "wire.h"

/* Offsets within an entry. */
enum {
    AT_MAGIC = 0,
    AT_LEN = 4,
    AT_NAME_LEN = 6,
    AT_INODE = 8,
    AT_CREATED = 16,
    AT_NEWEST = 24,
    AT_NAME = 32,
};

static bool is_shard_name(const char *name)
{
    struct spool_name parsed;

    return spool_name_parse(name, SPOOL_SHARD, &parsed) == 0;
}

int seal_index_encode(const struct seal_index_entry *e, unsigned char *out)
{
    size_t name_len = strnlen(e->name, sizeof(e->name));
    size_t len = SEAL_INDEX_FIXED + name_len;

    if (name_len == sizeof(e->name) || !is_shard_name(e->name))
        return -EINVAL;
    wire_put_u32(out + AT_MAGIC, SEAL_INDEX_MAGIC);
    wire_put_u16(out + AT_LEN, (uint16_t)len);
    wire_put_u16(out + AT_NAME_LEN, (uint16_t)name_len);
    wire_put_u64(out + AT_INODE, e->inode);
    wire_put_u64(out + AT_CREATED, e->created_ns);
    wire_put_u64(out + AT_NEWEST, e->newest_ns);
    memcpy(out + AT_NAME, e->name, name_len);
    wire_put_u32(out + len - 4, crc32c(out, len - 4));
    return (int)len;
}

int seal_index_bytes_add(struct seal_index_bytes *b, const struct seal_index_entry *e)
{
    int n;

    if (b->cap - b->len < SEAL_INDEX_ENTRY_MAX) {
        size_t cap = b->cap ? b->cap * 2 : 64 * 1024;
        unsigned char *buf = realloc(b->buf, cap);

        if (!buf)
            return -ENOMEM;
        b->buf = buf;
        b->cap = cap;
    }
    n = seal_index_encode(e, b->buf + b->len);
    if (n < 0)
        return n;
    b->len += (size_t)n;
    return 0;
}

int seal_index_decode(const unsigned char *buf, size_t len, struct seal_index_entry *ret,
                      size_t *ret_len)
{
    struct seal_index_entry e;
    size_t entry_len, name_len;

    if (len < AT_INODE)
        return len >= 4 && wire_get_u32(buf + AT_MAGIC) != SEAL_INDEX_MAGIC ? -EBADMSG
                                                                              : -EAGAIN;
    if (wire_get_u32(buf + AT_MAGIC) != SEAL_INDEX_MAGIC)
        return -EBADMSG;
    entry_len = wire_get_u16(buf + AT_LEN);
    name_len = wire_get_u16(buf + AT_NAME_LEN);
    if (name_len == 0 || name_len >= SPOOL_NAME_SIZE || entry_len != SEAL_INDEX_FIXED + name_len)
        return -EBADMSG;
    if (len < entry_len)
        return -EAGAIN;
    if (wire_get_u32(buf + entry_len - 4) != crc32c(buf, entry_len - 4))
        return -EBADMSG;
    memcpy(e.name, buf + AT_NAME, name_len);
    e.name[name_len] = '\0';
    if (strlen(e.name) != name_len || !is_shard_name(e.name))
        return -EBADMSG;
    e.inode = wire_get_u64(buf + AT_INODE);
    e.created_ns = wire_get_u64(buf + AT_CREATED);
    e.newest_ns = wire_get_u64(buf + AT_NEWEST);
    *ret = e;
    *ret_len = entry_len;
    return 0;
}

struct seal_index {
    struct seal_index_entry *v;
    size_t n, cap;
    /* Open addressing over v: slot holds index + 1, 0 when empty. */
    size_t *slots;
    size_t n_slots; /* a power of two, at least twice n */
    struct keyed_hash key;
};

static size_t slot_of(const struct seal_index *ix, const char *name)
{
    return (size_t)keyed_hash_bytes(&ix->key, name, strlen(name)) & (ix->n_slots - 1);
}

static int grow_slots(struct seal_index *ix)
{
    size_t n_slots = ix->n_slots ? ix->n_slots * 2 : 64;
    size_t *slots = calloc(n_slots, sizeof(*slots));

    if (!slots)
        return -ENOMEM;
    free(ix->slots);
    ix->slots = slots;
    ix->n_slots = n_slots;
    for (size_t i = 0; i < ix->n; i++) {
        size_t s = slot_of(ix, ix->v[i].name);

        while (ix->slots[s])
            s = (s + 1) & (ix->n_slots - 1);
        ix->slots[s] = i + 1;
    }
    return 0;
}

/* The slot holding name, or the empty slot where it would go. */
static size_t find_slot(const struct seal_index *ix, const char *name)
{
    size_t s = slot_of(ix, name);

    while (ix->slots[s] && strcmp(ix->v[ix->slots[s] - 1].name, name) != 0)
        s = (s + 1) & (ix->n_slots - 1);
    return s;
}

static int add(struct seal_index *ix, const struct seal_index_entry *e)
{
    size_t s;

    if ((ix->n + 1) * 2 > ix->n_slots && grow_slots(ix) < 0)
        return -ENOMEM;
    s = find_slot(ix, e->name);
    if (ix->slots[s]) {
        ix->v[ix->slots[s] - 1] = *e; /* the later entry wins */
        return 0;
    }
    if (ix->n == ix->cap) {
        size_t cap = ix->cap ? ix->cap * 2 : 64;
        struct seal_index_entry *v = reallocarray(ix->v, cap, sizeof(*v));

        if (!v)
            return -ENOMEM;
        ix->v = v;
        ix->cap = cap;
    }
    ix->v[ix->n] = *e;
    ix->slots[s] = ++ix->n;
    return 0;
}

int seal_index_parse(const unsigned char *buf, size_t len, struct seal_index **ret)
{
    struct seal_index *ix = calloc(1, sizeof(*ix));
    size_t at = 0;

    if (!ix)
        return -ENOMEM;
    keyed_hash_init(&ix->key);
    if (grow_slots(ix) < 0) {
        seal_index_free(ix);
        return -ENOMEM;
    }
    while (at < len) {
        struct seal_index_entry e;
        size_t n;
        int r = seal_index_decode(buf + at, len - at, &e, &n);

        if (r < 0) {
            /* Not an entry here (damage, or an append torn at the end or
             * followed by others): the next magic, if any, may start one. */
            const unsigned char *next = NULL;

            for (size_t i = at + 1; i + 4 <= len && !next; i++)
                if (wire_get_u32(buf + i) == SEAL_INDEX_MAGIC)
                    next = buf + i;
            if (!next)
                break;
            at = (size_t)(next - buf);
            continue;
        }
        if (add(ix, &e) < 0) {
            seal_index_free(ix);
            return -ENOMEM;
        }
        at += n;
    }
    *ret = ix;
    return 0;
}

int seal_index_load(int spool_fd, struct seal_index **ret)
{
    struct stat st;
    unsigned char *buf;
    ssize_t got;
    int fd, r;

    r = open_regular_stat_at(spool_fd, SEAL_INDEX_FILE, O_NOFOLLOW | O_NONBLOCK, &fd, &st);
    if (r < 0)
        return r == -ELOOP ? -EBADFD : r;
    if ((uint64_t)st.st_size > SEAL_INDEX_FILE_MAX) {
        (void)close(fd); /* read-only */
        return -EFBIG;
    }
    buf = malloc(st.st_size ? (size_t)st.st_size : 1);
    if (!buf) {
        (void)close(fd);
        return -ENOMEM;
    }
    /* Non-blocking, which a regular file ignores; fewer bytes when it was
     * cut shorter since the fstat. */
    got = read_full(fd, buf, (size_t)st.st_size);
    (void)close(fd);
    r = got < 0 ? (int)got : seal_index_parse(buf, (size_t)got, ret);
    free(buf);
    return r;
}

const struct seal_index_entry *seal_index_find(const struct seal_index *ix, const char *name,
                                               uint64_t inode)
{
    size_t s = find_slot(ix, name);
    const struct seal_index_entry *e;

    if (!ix->slots[s])
        return NULL;
    e = &ix->v[ix->slots[s] - 1];
    return e->inode == inode ? e : NULL;
}

size_t seal_index_count(const struct seal_index *ix)
{
    return ix->n;
}

const struct seal_index_entry *seal_index_at(const struct seal_index *ix, size_t i)
{
    return &ix->v[i];
}

void seal_index_free(struct seal_index *ix)
{
    if (!ix)
        return;
    free(ix->v);
    free(ix->slots);
    free(ix);
}
