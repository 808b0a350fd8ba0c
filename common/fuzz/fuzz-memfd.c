/* The one memfd the file-reading targets write each input into. Reading the
 * input through a real descriptor drives the same read(2)/fopen paths that
 * logctl cat, recovery and the daemon's config loading take. */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

int fuzz_memfd_with(const uint8_t *data, size_t size)
{
    /* A process-wide descriptor: a fuzzer runs one input at a time, and
     * opening a new memfd per input would only add noise to the profile. */
    static int fd = -1;
    size_t done = 0;

    if (fd < 0) {
        fd = memfd_create("fuzz-input", MFD_CLOEXEC);
        FUZZ_CHECK(fd >= 0);
    }
    FUZZ_CHECK(ftruncate(fd, 0) == 0);
    while (done < size) {
        ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        FUZZ_CHECK(n > 0);
        done += (size_t)n;
    }
    FUZZ_CHECK(lseek(fd, 0, SEEK_SET) == 0);
    return fd;
}
