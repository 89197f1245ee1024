/* See tb_bind.h. */
#define _GNU_SOURCE /* sched_setaffinity, sched_getcpu, CPU_* */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include "tb_bind.h"

int tb_bind_self(int rank)
{
#ifdef __linux__
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed))
        return -1;
    int n = CPU_COUNT(&allowed), want = rank % (n > 0 ? n : 1);
    for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed) || seen++ != want)
            continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        return sched_setaffinity(0, sizeof one, &one) ? -1 : cpu;
    }
#else
    (void)rank;
#endif
    return -1;
}

int tb_cpu(void)
{
#ifdef __linux__
    return sched_getcpu();
#else
    return -1;
#endif
}

int tb_allowed_cpus(void)
{
#ifdef __linux__
    cpu_set_t allowed;
    return sched_getaffinity(0, sizeof allowed, &allowed) ? -1 : CPU_COUNT(&allowed);
#else
    return -1;
#endif
}

#ifndef TB_PVM
void tb_gather_json(int value, MPI_Comm comm, char *out, size_t len)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *all = rank == 0 ? malloc(sizeof(int) * (size_t)size) : NULL;
    if (rank == 0 && !all) {
        fprintf(stderr, "tb_gather_json: out of memory for %d ranks\n", size);
        MPI_Abort(comm, 1);
    }
    MPI_Gather(&value, 1, MPI_INT, all, 1, MPI_INT, 0, comm);
    out[0] = '\0';
    if (rank != 0)
        return;
    size_t k = 0;
    for (int i = 0; i < size && k + 16 < len; i++)
        k += (size_t)snprintf(out + k, len - k, "%c%d", i ? ',' : '[', all[i]);
    snprintf(out + k, len - k, "%s", size ? "]" : "[]");
    free(all);
}
#endif
