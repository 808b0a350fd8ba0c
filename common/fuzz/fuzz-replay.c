/* A stand-in for libFuzzer's main(), so that every fuzz target's corpus is
 * replayed by `meson test` with gcc, in the plain and the sanitizer builds,
 * without clang. Each argument is a file or a directory; every regular file
 * in a directory (not recursive, dot files skipped, in name order so a run
 * is repeatable) is read and passed to LLVMFuzzerTestOneInput once, in a
 * heap block of exactly its size so a read past the input is an ASan
 * report. A broken contract aborts inside the target and fails the test;
 * finding no input at all fails it too, since a replay of nothing proves
 * nothing. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

/* Reads the whole file at path; returns 0 or a negative errno. */
static int read_file(const char *path, uint8_t **ret_data, size_t *ret_size)
{
    struct stat st;
    uint8_t *data;
    size_t done = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        (void)close(fd);
        return -e;
    }
    /* Exactly the file's size (malloc(0) gives a block too), so ASan
     * catches a target reading one byte past its input. */
    data = malloc((size_t)st.st_size);
    if (!data) {
        (void)close(fd);
        return -ENOMEM;
    }
    while (done < (size_t)st.st_size) {
        ssize_t n = read(fd, data + done, (size_t)st.st_size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO; /* a file that shrank under us */
            free(data);
            (void)close(fd);
            return -e;
        }
        done += (size_t)n;
    }
    (void)close(fd);
    *ret_data = data;
    *ret_size = done;
    return 0;
}

static int replay_file(const char *path)
{
    uint8_t *data = NULL; /* gcc cannot tell read_file sets both on success */
    size_t size = 0;
    int r = read_file(path, &data, &size);

    if (r < 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(-r));
        return r;
    }
    fprintf(stderr, "replaying %s (%zu bytes)\n", path, size);
    (void)LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

static int skip_dot(const struct dirent *d)
{
    return d->d_name[0] != '.';
}

/* Replays path, a file or a directory; adds the inputs run to *count. */
static int replay(const char *path, size_t *count)
{
    struct stat st;
    struct dirent **names;
    int n, r = 0;

    if (stat(path, &st) < 0) {
        r = -errno;
        fprintf(stderr, "%s: %s\n", path, strerror(-r));
        return r;
    }
    if (!S_ISDIR(st.st_mode)) {
        r = replay_file(path);
        if (r == 0)
            (*count)++;
        return r;
    }
    n = scandir(path, &names, skip_dot, alphasort);
    if (n < 0) {
        r = -errno;
        fprintf(stderr, "%s: %s\n", path, strerror(-r));
        return r;
    }
    for (int i = 0; i < n; i++) {
        size_t len = strlen(path) + 1 + strlen(names[i]->d_name) + 1;
        char *file = malloc(len);

        if (!file) {
            r = -ENOMEM;
        } else {
            snprintf(file, len, "%s/%s", path, names[i]->d_name);
            if (stat(file, &st) == 0 && S_ISREG(st.st_mode)) {
                int k = replay_file(file);
                if (k == 0)
                    (*count)++;
                else
                    r = k;
            }
            free(file);
        }
        free(names[i]);
    }
    free(names);
    return r;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    bool failed = false;

    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIRECTORY...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++)
        if (replay(argv[i], &count) < 0)
            failed = true;
    if (count == 0) {
        fprintf(stderr, "no input found: the corpus is missing\n");
        return 1;
    }
    fprintf(stderr, "%zu inputs replayed%s\n", count, failed ? ", some unreadable" : "");
    return failed ? 1 : 0;
}
