/* Turns at reading (read-turns.h).
 *
 * libuv reads a readable connection again and again while each read fills
 * its buffer, and a syslog stream connection is read several times per
 * wakeup, so a thousand busy producers would each be read for megabytes in
 * one loop tick, and the daemon would hold all of it in batch buffers at
 * once. Instead a tick has a read budget (RX_TICK_BUDGET) that every
 * connection spends: once it is gone, a connection with more to read stops
 * and waits in d->rx_turns, and at the start of the next tick those are
 * read first, in the order they stopped. What the daemon holds then
 * depends on the budget, not on the number of producers, and every
 * producer, of either kind, gets its turn. */
#include "read-turns.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"

/* Bytes all connections together read in one loop tick, before the
 * tick's writes are queued: large enough that every write is big, small
 * enough that the batch buffers it fills stay a few MiB. */
#define RX_TICK_BUDGET (4 * 1024 * 1024)

/* Shards waiting for the disk (a write of records in flight, or the
 * create of their file, which their first records wait for) above which
 * no connection is read: records read now would only wait in batch
 * buffers, and a thousand producers' first frames read ahead, most of them
 * for shards whose files were still being created, filled the buffers'
 * arena (64 MiB) with memory touched for the first time. What is not read
 * waits in the senders' sockets, which hold it anyway. Every write and
 * create completes (each is one system call), and its completion wakes the
 * loop, whose next tick reads again. */
#define RX_MAX_WAITING_SHARDS 32u

#ifdef LOGSHARD_FAULT_INJECTION
/* Test builds: LOGSHARD_FAULTS=small_read_turns makes the tick's budget
 * 16 KiB, so that connections take turns all the time, with any load;
 * LOGSHARD_FAULTS=one_waiting_shard holds reading while any shard waits
 * for the disk, so that a few producers meet the hold all the time. */
static int64_t tick_budget(void)
{
    static int64_t budget = -1;

    if (budget < 0) {
        const char *env = getenv("LOGSHARD_FAULTS");
        budget = env && strstr(env, "small_read_turns") ? 16 * 1024 : RX_TICK_BUDGET;
    }
    return budget;
}

static unsigned max_waiting_shards(void)
{
    static unsigned max;

    if (max == 0) {
        const char *env = getenv("LOGSHARD_FAULTS");
        max = env && strstr(env, "one_waiting_shard") ? 1 : RX_MAX_WAITING_SHARDS;
    }
    return max;
}
#else
static int64_t tick_budget(void)
{
    return RX_TICK_BUDGET;
}

static unsigned max_waiting_shards(void)
{
    return RX_MAX_WAITING_SHARDS;
}
#endif

static void on_turn_idle(uv_idle_t *h)
{
    (void)h; /* the turns are taken before the tick's writes: read_turns_take() */
}

void read_turns_init(struct daemon *d)
{
    list_init(&d->rx_turns);
    (void)uv_idle_init(d->loop, &d->rx_turn_idle); /* cannot fail */
    d->rx_budget = tick_budget();
}

void read_turn_init(struct read_turn *t, void (*take)(struct read_turn *t))
{
    list_init(&t->node);
    t->take = take;
}

bool read_turns_spent(const struct daemon *d)
{
    return d->rx_budget <= 0;
}

void read_turns_spend(struct daemon *d, size_t bytes)
{
    d->rx_budget -= (int64_t)bytes;
}

void read_turns_wait(struct daemon *d, struct read_turn *t)
{
    d->stats.read_turns++;
    list_add_tail(&d->rx_turns, &t->node);
    /* An active idle handle makes the loop poll without blocking, so the
     * next tick comes at once. */
    (void)uv_idle_start(&d->rx_turn_idle, on_turn_idle); /* cannot fail */
}

void read_turns_leave(struct read_turn *t)
{
    if (list_linked(&t->node))
        list_del(&t->node);
}

bool read_turns_waiting(const struct read_turn *t)
{
    return list_linked(&t->node);
}

void read_turns_take(struct daemon *d)
{
    if (d->shard_writes_busy + d->shards_creating >= max_waiting_shards()) {
        /* Connections that become readable meanwhile read once and wait;
         * the loop blocks until a completion instead of spinning. */
        d->stats.read_holds++;
        d->rx_budget = 0;
        (void)uv_idle_stop(&d->rx_turn_idle); /* cannot fail */
        return;
    }
    d->rx_budget = tick_budget();
    while (d->rx_budget > 0 && !list_empty(&d->rx_turns)) {
        struct read_turn *t = list_entry(d->rx_turns.next, struct read_turn, node);

        list_del(&t->node);
        t->take(t);
    }
    if (list_empty(&d->rx_turns))
        (void)uv_idle_stop(&d->rx_turn_idle); /* cannot fail */
}
