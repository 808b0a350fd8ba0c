/* Unix socket helpers shared by the daemon, logctl and the tests. Every
 * function returns 0 or a negative errno. */
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

/* Fills *ret with the address of the socket at path and *ret_len with its
 * length. Returns 0, or -ENAMETOOLONG when path does not fit sun_path. */
int unix_address(const char *path, struct sockaddr_un *ret, socklen_t *ret_len);

/* Connects a new blocking, close-on-exec stream socket to path. Returns 0
 * with the descriptor in *ret_fd, or the negative errno of the address,
 * socket(2) or connect(2) (-ECONNREFUSED: nobody listens there). */
int unix_connect(const char *path, int *ret_fd);
