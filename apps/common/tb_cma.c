#define _GNU_SOURCE            /* process_vm_readv */
#include <errno.h>
#include <sys/types.h>
#include <sys/uio.h>
#include "tb_cma.h"

int tb_cma_read(long pid, void *dst, const void *remote, long bytes)
{
    for (long done = 0; done < bytes;) {
        struct iovec local = { (char *)dst + done, (size_t)(bytes - done) };
        struct iovec from = { (char *)remote + done, (size_t)(bytes - done) };
        errno = 0;
        ssize_t n = process_vm_readv((pid_t)pid, &local, 1, &from, 1, 0);
        if (n <= 0)
            return errno ? errno : EIO;
        done += n;
    }
    return 0;
}
