/*
 * Work-around for LAM/MPI 7.1.4 on current Linux kernels; linked only into
 * LAM builds (the stack registry names it for the lam-7.1 stack).
 *
 * Why: LAM's messages to its daemon (lamd) go out with writev() and a second
 * iovec whose length is 0 but whose base pointer is left uninitialised.
 * Kernels since about 5.x check even zero-length iovecs with access_ok(), so
 * when the stale pointer happens to lie outside user space the call fails with
 * EFAULT and MPI_Init aborts ("Unix errno: 14, Bad address"). Seen here in
 * roughly two of three 2-rank launches on every RPI. Clearing the base of
 * zero-length entries is exactly what the kernel used to ignore, so the
 * library's behaviour is otherwise unchanged.
 *
 * The executable's definitions take precedence over libc's for liblam's calls
 * (ordinary ELF symbol interposition), so no LD_PRELOAD is needed.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static void clear_empty_bases(const struct iovec *iov, int count)
{
    struct iovec *v = (struct iovec *)iov; /* LAM passes writable arrays */
    for (int i = 0; i < count; i++)
        if (v[i].iov_len == 0)
            v[i].iov_base = NULL;
}

ssize_t writev(int fd, const struct iovec *iov, int count)
{
    clear_empty_bases(iov, count);
    return syscall(SYS_writev, fd, iov, count);
}

ssize_t readv(int fd, const struct iovec *iov, int count)
{
    clear_empty_bases(iov, count);
    return syscall(SYS_readv, fd, iov, count);
}
