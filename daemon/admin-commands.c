/* Admin commands: what status, ls and rotate do, once admin.c has read and
 * checked the request (docs/PROTOCOL.md, "Admin protocol").
 *  - status: the figures of stats.c. The spool's usage is read on libuv's
 *    thread pool, so a large done/ never stalls the loop.
 *  - ls: the shards not yet sealed, from memory.
 *  - rotate: retires the current shard of matching sessions
 *    (session_rotate) and syslog producers and connections
 *    (syslog_producers_rotate, syslog_stream_rotate), and answers once every matching shard that is being
 *    sealed has reached done/ (or failed), as the shards report through
 *    their sealed event (shard-events.h): the reply waits for the event,
 *    never polls. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin-internal.h"
#include "daemon.h"
#include "fileutil.h"
#include "json.h"
#include "session.h"
#include "shard.h"
#include "stats.h"
#include "syslog-producers.h"
#include "syslog-stream.h"

struct status_job {
    uv_work_t w;
    struct client *c;
    struct stats_figures fig;
};

static void json_time_or_null(struct json_out *o, uint64_t ns)
{
    char buf[64];

    if (ns == 0 || rfc3339_format(ns, 9, buf, sizeof(buf)) < 0)
        json_null(o);
    else
        json_cstr(o, buf);
}

static void json_shard_id(struct json_out *o, uint64_t id)
{
    char hex[17];

    snprintf(hex, sizeof(hex), "%016" PRIx64, id);
    json_cstr(o, hex);
}

void admin_rotate_reset(struct client *c)
{
    for (size_t i = 0; i < c->n_results; i++)
        free(c->results[i].file);
    free(c->results);
    free(c->wait_ids);
    free(c->rotate_producer);
    c->results = NULL;
    c->wait_ids = NULL;
    c->rotate_producer = NULL;
    c->n_results = c->cap_results = c->n_wait = c->cap_wait = 0;
    c->rotate_lost = 0;
    if (c->work == CLIENT_WORK_ROTATE)
        admin_client_set_work(c, CLIENT_WORK_NONE);
}

/* ---- status ---- */

static void status_work(uv_work_t *w)
{
    struct status_job *job = w->data;

    (void)stats_measure_spool(&job->fig); /* a failure is part of the reply */
}

static void status_done(uv_work_t *w, int status)
{
    struct status_job *job = w->data;
    struct client *c = job->c;
    struct json_out o;

    (void)status;
    admin_client_set_work(c, CLIENT_WORK_NONE);
    switch (c->state) {
    case CLIENT_CLOSING:
        stats_figures_free(&job->fig);
        free(job);
        admin_client_maybe_free(c);
        return;
    case CLIENT_WORKING:
        admin_reply_begin(&o, "status");
        json_key(&o, "status");
        stats_write_json(&o, &job->fig);
        stats_figures_free(&job->fig);
        free(job);
        admin_reply_end(c, &o, false);
        return;
    case CLIENT_READING_REQUEST:
    case CLIENT_WRITING_REPLY:
    case CLIENT_WRITING_LAST_REPLY:
        break;
    }
    assert(!"a status job ended for a connection not waiting for it");
}

void admin_status(struct client *c)
{
    struct status_job *job = calloc(1, sizeof(*job));
    int r;

    if (!job || stats_collect(c->a->d, &job->fig) < 0) {
        free(job);
        admin_send_error(c, ENOMEM, true, "out of memory");
        return;
    }
    job->c = c;
    job->w.data = job;
    r = uv_queue_work(c->a->d->loop, &job->w, status_work, status_done);
    if (r < 0) {
        stats_figures_free(&job->fig);
        free(job);
        admin_send_error(c, EIO, true, "cannot queue the status work: %s", uv_strerror(r));
        return;
    }
    admin_client_set_work(c, CLIENT_WORK_STATUS);
}

/* ---- ls ---- */

void admin_ls(struct client *c, const char *producer)
{
    struct daemon *d = c->a->d;
    struct json_out o;

    admin_reply_begin(&o, "ls");
    json_member_str(&o, "spool", d->config.spool);
    json_key(&o, "shards");
    json_arr_begin(&o);
    for (const struct list_node *p = d->shards.next; p != &d->shards; p = p->next) {
        const struct shard *s = list_entry(p, struct shard, node);
        char file[512];

        if (producer && strcmp(producer, s->producer) != 0)
            continue;
        snprintf(file, sizeof(file), "active/%s", s->tmp_name);
        json_obj_begin(&o);
        json_member_str(&o, "producer", s->producer);
        json_key(&o, "shard");
        json_shard_id(&o, s->id);
        json_member_str(&o, "state", s->state != SHARD_OPEN ? "sealing" : "active");
        json_member_str(&o, "file", file);
        json_member_u64(&o, "size", s->size_written);
        json_member_u64(&o, "records", s->records_written);
        json_member_u64(&o, "records_received", s->records_queued);
        json_member_u64(&o, "records_acknowledged", shard_records_acked(s));
        json_key(&o, "created");
        json_time_or_null(&o, s->created_ns);
        json_key(&o, "first");
        json_time_or_null(&o, s->records_queued ? s->first_record_ns : 0);
        json_key(&o, "last");
        json_time_or_null(&o, s->records_queued ? s->last_record_ns : 0);
        json_member_u64(&o, "uid", s->uid);
        json_member_u64(&o, "gid", s->gid);
        json_member_u64(&o, "pid", s->pid);
        json_obj_end(&o);
    }
    json_arr_end(&o);
    admin_reply_end(c, &o, false);
}

/* ---- rotate ---- */

static void reply_rotate(struct client *c)
{
    struct json_out o;
    bool incomplete = c->rotate_lost > 0;

    admin_reply_begin(&o, "rotate");
    json_member_str(&o, "producer", c->rotate_producer);
    json_member_u64(&o, "retired", c->rotate_retired);
    json_member_u64(&o, "busy", c->rotate_busy);
    for (int failed = 0; failed < 2; failed++) {
        json_key(&o, failed ? "failed" : "sealed");
        json_arr_begin(&o);
        for (size_t i = 0; i < c->n_results; i++) {
            const struct rotate_result *r = &c->results[i];

            if ((r->err != 0 || r->quarantined) != (failed != 0))
                continue;
            json_obj_begin(&o);
            json_member_str(&o, "producer", r->producer);
            json_key(&o, "shard");
            json_shard_id(&o, r->id);
            json_member_str(&o, "file", r->file);
            json_member_u64(&o, "records", r->records);
            json_member_u64(&o, "bytes", r->bytes);
            if (failed) {
                json_member_bool(&o, "quarantined", r->quarantined);
                json_key(&o, "error");
                json_cstr(&o, r->err ? strerror(-r->err)
                                     : "an fdatasync failed; moved to quarantine/");
            }
            json_obj_end(&o);
        }
        json_arr_end(&o);
    }
    admin_rotate_reset(c);
    admin_reply_end(c, &o, incomplete);
}

static int add_result(struct client *c, const struct shard *s, int err)
{
    enum seal_outcome where = shard_seal_outcome(s);
    struct rotate_result *r;

    if (c->n_results == c->cap_results) {
        size_t cap = c->cap_results ? c->cap_results * 2 : 8;
        struct rotate_result *n = reallocarray(c->results, cap, sizeof(*n));
        if (!n)
            return -ENOMEM;
        c->results = n;
        c->cap_results = cap;
    }
    r = &c->results[c->n_results];
    memset(r, 0, sizeof(*r));
    memcpy(r->producer, s->producer, sizeof(r->producer));
    r->id = s->id;
    r->err = err;
    r->quarantined = err == 0 && where == SEAL_IN_QUARANTINE;
    r->records = shard_records_kept(s);
    r->bytes = shard_bytes_kept(s);
    if (asprintf(&r->file, "%s/%s", err ? "active" : r->quarantined ? "quarantine" : "done",
                 err || r->quarantined ? s->tmp_name : s->done_name) < 0)
        return -ENOMEM;
    c->n_results++;
    return 0;
}

static bool matches(const struct client *c, const struct shard *s)
{
    return !c->rotate_producer || strcmp(c->rotate_producer, s->producer) == 0;
}

/* The sealed event (admin_start subscribes to it): a shard's seal ended;
 * complete the rotate requests that waited for it. */
void admin_on_shard_sealed(void *data, const struct shard *s, int err)
{
    struct admin *a = data;
    struct list_node *n, *tmp;
    /* Sealed before the request could even list it (a seal that failed at
     * once): it belongs to the request being set up. */
    if (a->collecting && matches(a->collecting, s)) {
        if (add_result(a->collecting, s, err) < 0)
            a->collecting->rotate_lost++;
        return;
    }
    list_for_each_safe(n, tmp, &a->clients) {
        struct client *c = list_entry(n, struct client, node);

        if (c->work != CLIENT_WORK_ROTATE)
            continue;
        for (size_t i = 0; i < c->n_wait; i++) {
            if (c->wait_ids[i] != s->id)
                continue;
            c->wait_ids[i] = c->wait_ids[--c->n_wait];
            if (add_result(c, s, err) < 0) {
                admin_rotate_reset(c);
                admin_send_error(c, ENOMEM, true, "out of memory");
                break;
            }
            if (c->n_wait == 0)
                reply_rotate(c);
            break;
        }
    }
}

void admin_rotate(struct client *c, const char *producer)
{
    struct admin *a = c->a;
    struct daemon *d = a->d;

    if (producer && wire_check_producer_name(producer, strlen(producer)) < 0) {
        admin_send_error(c, EINVAL, false, "producer name '%.80s' is not valid: names are %s",
                   producer, wire_producer_name_rule);
        return;
    }
    if (producer) {
        c->rotate_producer = strdup(producer);
        if (!c->rotate_producer) {
            admin_send_error(c, ENOMEM, true, "out of memory");
            return;
        }
    }
    a->collecting = c;
    /* The syslog inputs' shards too: their producers have no session. */
    c->rotate_retired = session_rotate(d, producer, &c->rotate_busy) +
                        syslog_producers_rotate(d, producer) +
                        syslog_stream_rotate(d->syslog_stream, producer);
    a->collecting = NULL;
    if (c->state == CLIENT_CLOSING)
        return;
    /* Wait for every matching shard that is being sealed, including those
     * retired earlier (full or old) whose seal is still running: once the
     * reply comes, everything of the producer up to now is in done/. */
    for (const struct list_node *p = d->shards.next; p != &d->shards; p = p->next) {
        const struct shard *s = list_entry(p, struct shard, node);

        if (s->state == SHARD_OPEN || !matches(c, s))
            continue;
        if (c->n_wait == c->cap_wait) {
            size_t cap = c->cap_wait ? c->cap_wait * 2 : 8;
            uint64_t *nw = reallocarray(c->wait_ids, cap, sizeof(*nw));
            if (!nw) {
                admin_rotate_reset(c);
                admin_send_error(c, ENOMEM, true, "out of memory");
                return;
            }
            c->wait_ids = nw;
            c->cap_wait = cap;
        }
        c->wait_ids[c->n_wait++] = s->id;
    }
    if (c->n_wait == 0) {
        reply_rotate(c);
        return;
    }
    admin_client_set_work(c, CLIENT_WORK_ROTATE);
}
