/* What a fence means (docs/SHIP.md). Kafka fences a transactional
 * producer in two cases: the cluster ended its transaction itself, having
 * waited transaction.timeout.ms for it (after an outage, or a shipper
 * stopped that long), or another shipper took the transactional.id over.
 * The first is answered with a new producer; the second must stop this
 * shipper, or the two would fence each other in turns. A fence after a
 * transaction open that long is the first; any other is taken for the
 * first once, and for the second when it comes again within
 * SHIP_FENCE_WINDOW_NS. */
#include "ship-run.h"

#include "fileutil.h"

bool ship_go_on_after_fence(struct shipper *s)
{
    uint64_t now = now_monotonic_ns();

    /* A transaction open past transaction.timeout.ms explains the fence
     * by itself: the cluster ended it (after an outage, or a shipper
     * stopped that long). Such a fence is not counted, so that two long
     * outages within the window do not stop shipping for good. */
    if (s->txn_begun_ns != 0 && s->txn_timeout_ns != 0 &&
        now - s->txn_begun_ns >= s->txn_timeout_ns) {
        ship_say(s, SHIP_LOG_WARNING,
                 "fenced after a transaction open for %llu s, past transaction.timeout.ms "
                 "(%llu ms): the cluster ended it; a new producer reads the progress back and "
                 "goes on",
                 (unsigned long long)((now - s->txn_begun_ns) / 1000000000u),
                 (unsigned long long)(s->txn_timeout_ns / 1000000u));
        return true;
    }
    if (s->fenced_ns != 0 && now - s->fenced_ns < SHIP_FENCE_WINDOW_NS) {
        ship_say(s, SHIP_LOG_ERROR,
                 "fenced again within %llu minutes: another shipper uses the transactional.id "
                 "%s; this one stops, having committed nothing more",
                 SHIP_FENCE_WINDOW_NS / 60000000000ull, s->txid);
        return false;
    }
    s->fenced_ns = now;
    ship_say(s, SHIP_LOG_WARNING,
             "fenced: the cluster ended this producer's transactions (open past "
             "transaction.timeout.ms), or another shipper took the transactional.id %s; a new "
             "producer reads the progress back and goes on, and stops if fenced again within "
             "%llu minutes",
             s->txid, SHIP_FENCE_WINDOW_NS / 60000000000ull);
    return true;
}
