/* logctl cat's view of the records of the syslog inputs (shards of a
 * syslog source, format version 4): the message fields parsed from the
 * payload for --meta and --json, and the --priority and --identifier
 * filters, which work as journalctl's -p and -t do (cat-syslog.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "json.h"
#include "syslog_msg.h"

/* What --priority and --identifier ask for. */
struct cat_syslog_filter {
    bool by_severity;
    uint8_t severities; /* bit s for severity s (0 emerg .. 7 debug) */
    const char *const *identifiers; /* none: any */
    size_t n_identifiers;
};

/* Whether the filter asks for anything. */
static inline bool cat_syslog_filtering(const struct cat_syslog_filter *f)
{
    return f->by_severity || f->n_identifiers > 0;
}

/* Parses a --priority argument as journalctl's -p takes it: one level, by
 * number (0 to 7) or name (emerg, alert, crit, err, warning, notice, info,
 * debug; also panic, error, warn), meaning that level and every more
 * important one; or a range FROM..TO of two levels, both included (in
 * either order). Returns 0 with the wanted severities in *ret_mask, or
 * -EINVAL. */
int cat_syslog_parse_priority(const char *arg, uint8_t *ret_mask);

/* The name of severity 0 to 7 ("emerg" .. "debug"), NULL otherwise. */
const char *cat_syslog_severity_name(int severity);

/* The name of facility 0 to 23 as syslog.conf spells it ("kern", "user",
 * ..., "local7"); the four that have no name in syslog.conf (12 to 15) are
 * written as their numbers. Returns buf or a constant string. */
const char *cat_syslog_facility_name(int facility, char buf[4]);

/* Whether a message passes the filter: a severity it asks for, an
 * identifier it names. A record that is not a syslog message (m NULL: a
 * client's) passes only a filter that asks for nothing, and a message
 * without a priority no severity filter, as journalctl shows no entry
 * without PRIORITY to -p. */
bool cat_syslog_wanted(const struct syslog_msg *m, const struct cat_syslog_filter *f);

/* The fields for --meta: "facility=F severity=S identifier=I procid=P
 * hostname=H time=T " ('-' for what the message does not have; T is the
 * message's own timestamp, RFC 3339 in UTC). */
void cat_syslog_print_meta(FILE *f, const struct syslog_msg *m);

/* The member "syslog" for --json: an object with format ("rfc5424",
 * "rfc3164" or "none"), facility, severity, identifier, procid, hostname,
 * msgid, time (RFC 3339 in UTC with nanoseconds) and structured_data (the
 * RFC 5424 text as received), each null when the message does not have
 * it. */
void cat_syslog_json(struct json_out *o, const struct syslog_msg *m);
