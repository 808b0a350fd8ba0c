/* A scripted daemon for the unit tests of client/logshard.c
 * (tests/test-client*.c): it speaks the wire protocol the way a real daemon
 * would, and the ways a real daemon rarely does, so that the tests can watch
 * the library react.
 *
 * Each test that needs a daemon binds a Unix socket in a fresh temporary
 * directory; a peer thread accepts one connection and follows a script,
 * speaking the protocol through common/wire.h, while the main thread drives
 * the public API. cmocka's asserts longjmp, so they belong to the main thread
 * only: a script returns the line where it failed and the main thread asserts
 * on that after joining. Every wait on either side has a deadline, and a
 * script that fails closes its end of the connection, which ends any call the
 * client is blocked in; a broken client fails a test, it does not hang it.
 *
 * The peer speaks protocol version 2 by default, as the daemon does: it
 * keeps what it received as a daemon keeps a stream (records by position;
 * a WELCOME with next_position n forgets whatever it had from n on, as a
 * restarted daemon has only what was stored), and checks that every APPEND
 * starts exactly at the stream's next position. A script can accept a
 * second connection (peer_accept), or go away altogether and come back
 * (peer_go_away, peer_come_back), to play a daemon that restarts.
 *
 * Main and peer also talk over two pipes ("go" and "done") when a test needs
 * them in step. Closing a pipe's write end wakes the other side at once, so
 * a side that gives up never leaves the other waiting for its deadline. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "logshard.h"
#include "wire.h"

/* How long either side waits for the other before calling it a failure. */
#define PEER_TIMEOUT_MS 10000

#define DEFAULT_MAX_RECORD (1024u * 1024u)
#define DEFAULT_MAX_FRAME (8u * 1024u * 1024u)

/* Record shapes that tests in more than one program share. */
#define BATCH_MAX_LEN 200
#define PARTIAL_RECORDS 10
#define PRESSURE_MAX_RECORD 1024u
#define PRESSURE_MAX_LEN 1000
#define PRESSURE_RECORDS 20000

/* A script's checks live in the test programs and in scripted-peer.c alike,
 * so a failing check also notes its file for the report in peer_join(). */
extern _Thread_local const char *peer_check_file;

#define PCHECK(cond)                                                                     \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            peer_check_file = __FILE__;                                                  \
            return __LINE__;                                                             \
        }                                                                                \
    } while (0)

struct peer;
typedef int (*peer_script)(struct peer *p);

struct peer {
    char dir[64];
    char path[128];
    int listen_fd;
    int fd;       /* the accepted connection; the peer thread owns it */
    int go[2];    /* main -> peer */
    int done[2];  /* peer -> main */
    pthread_t thread;
    bool running;
    peer_script script;
    int failed_line;
    const char *failed_file;

    struct wire_welcome welcome; /* what the peer answers a HELLO with; its
                                    version is the one spoken afterwards */

    /* What the peer saw. */
    char hello_name[WIRE_PRODUCER_NAME_MAX + 1];
    uint16_t hello_version;
    uint16_t hello_flags;
    uint8_t hello_stream_id[WIRE_STREAM_ID_SIZE]; /* version 2: of the last HELLO */
    uint64_t hello_first_position;
    uint64_t nhellos;
    uint64_t stream_next; /* version 2: the position the next APPEND must start at */
    unsigned char *got; /* records as on the wire: u32 len, bytes */
    size_t got_len;
    size_t got_cap;
    uint64_t nrecords;
    uint64_t nframes;
    atomic_bool welcome_sent;

    /* For the scripts that watch the main thread block. */
    uint64_t total;
    atomic_uint_fast64_t progress;
    uint64_t stalled_at;
};

/* The program's own short name, kept by main() before any test changes it,
 * and put back by teardown_peer(). */
extern char *saved_program_name;

uint64_t now_ms(void);
int remaining_ms(uint64_t deadline);
int wait_fd(int fd, short events, int timeout_ms);
int peer_write_all(int fd, const void *buf, size_t n, int timeout_ms);
int signal_pipe(int fd);

/* The peer's side of the protocol, for scripts. Each returns 0 or the line
 * where it failed. */
int peer_read_hello(struct peer *p);
int peer_send_welcome(struct peer *p);
int peer_handshake(struct peer *p);
int peer_send_ack(struct peer *p, uint64_t acked);
int peer_send_error(struct peer *p, uint32_t code, const char *msg);
int peer_read_append(struct peer *p);
int peer_read_records(struct peer *p, uint64_t n);
int peer_expect_eof(struct peer *p);
int peer_wait_for_stall(struct peer *p);
int peer_accept(struct peer *p, int timeout_ms);
int peer_go_away(struct peer *p);
int peer_come_back(struct peer *p);
int peer_wait_pipe(int fd, int timeout_ms);

/* The main thread's side. The peer's WELCOME announces fsync_policy
 * (peer_start_policy) or LOGSHARD_FSYNC_BATCH, a daemon's default. */
void peer_start_policy(struct peer *p, peer_script script, uint32_t max_record,
                       uint32_t max_frame, uint64_t total, uint8_t fsync_policy);
void peer_start_total(struct peer *p, peer_script script, uint32_t max_record,
                      uint32_t max_frame, uint64_t total);
void peer_start(struct peer *p, peer_script script, uint32_t max_record, uint32_t max_frame);
void peer_join(struct peer *p);
void wait_for_peer(struct peer *p);
int setup_peer(void **state);
int teardown_peer(void **state);

#define PEER_TEST(f) cmocka_unit_test_setup_teardown(f, setup_peer, teardown_peer)

size_t make_record(uint64_t i, size_t max_len, unsigned char *buf);
void fill_record(uint64_t i, size_t len, unsigned char *buf);
void check_records(const struct peer *p, uint64_t n, size_t max_len, size_t fixed_len);
logshard *connect_ok(const struct peer *p, const char *producer, size_t buffer_bytes);
logshard *connect_flags(const struct peer *p, const char *producer, size_t buffer_bytes,
                        unsigned flags, int reconnect_timeout_ms);

/* Scripts that tests in more than one program use. */
int script_partial_ack(struct peer *p);
int script_stall_until_go(struct peer *p);
