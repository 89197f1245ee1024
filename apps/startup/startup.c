/*
 * startup: how long an MPI job takes to come up (seed 004, Table 9).
 *
 * The driver (launch_times.py) reads CLOCK_REALTIME just before it starts
 * the launcher and passes it as --launch-epoch-ns.  Every rank reads the same
 * clock right after MPI_Init returns; then every rank but 0 sends one int to
 * rank 0, which receives them with MPI_ANY_SOURCE (the thesis's experiment;
 * --recv ordered: from rank 1, 2, ... in turn) and reads the clock when the
 * last one has arrived: the same instant either way, the last arrival.  All times are seconds
 * since the launch.  MPI-1 calls only, so that it builds on LAM 7.1.4.
 * The hang watchdog (tb_watchdog.h) starts before MPI_Init, so that a launch
 * whose MPI_Init never returns names it (its cost: apps/startup/README.md).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mpi.h>
#include "tb_version.h"
#include "tb_watchdog.h"

#define TAG_HELLO 9

static const char usage[] =
    "usage: startup --launch-epoch-ns N\n"
    "  Measures MPI start-up time; run it under an MPI launcher.\n"
    "  --launch-epoch-ns N  CLOCK_REALTIME in nanoseconds since the epoch, read\n"
    "                       just before the launcher was started (required;\n"
    "                       by hand: --launch-epoch-ns $(date +%s%N))\n"
    "  --recv any|ordered   rank 0 takes the messages from MPI_ANY_SOURCE (the\n"
    "                       default, the thesis's) or from each rank in turn\n"
    "  --help               this text\n"
    "Rank 0 prints one line: STARTUP {\"ranks\":n,\"init_s_max\":..,\"init_s_min\":..,\n"
    "  \"first_message_s\":..,\"nodes\":..,\"library_version\":\"..\"} (seconds since\n"
    "  launch; nodes: how many distinct hosts the ranks ran on).\n";

/* Nanoseconds since the epoch, the clock the driver's time.time_ns() reads. */
static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Before MPI_Init we do not know our rank; the launchers export it, so only
 * the process that is (or may be) rank 0 prints help and errors. */
static int maybe_rank0(void)
{
    const char *vars[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "LAMRANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL)
            return atoi(v) == 0;
    }
    return 1; /* started by hand: a singleton */
}

int main(int argc, char **argv)
{
    /* Parse before MPI_Init so that a bad command line never starts MPI. */
    int64_t launch_ns = 0;
    int ordered = 0; /* --recv ordered */
    int status = -1; /* -1: run; otherwise exit with it */
    for (int i = 1; i < argc && status < 0; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            if (maybe_rank0())
                fputs(usage, stdout);
            status = 0;
        } else if (strcmp(argv[i], "--recv") == 0) {
            const char *val = i + 1 < argc ? argv[++i] : "";
            if (strcmp(val, "any") == 0 || strcmp(val, "ordered") == 0) {
                ordered = strcmp(val, "ordered") == 0;
            } else {
                if (maybe_rank0())
                    fprintf(stderr, "startup: invalid value for --recv: '%s' (expected any or"
                            " ordered)\n", val);
                status = 2;
            }
        } else if (strcmp(argv[i], "--launch-epoch-ns") == 0) {
            const char *val = i + 1 < argc ? argv[++i] : "";
            char *end = NULL;
            errno = 0;
            long long v = strtoll(val, &end, 10);
            if (*val == '\0' || *end != '\0' || errno != 0 || v <= 0) {
                if (maybe_rank0())
                    fprintf(stderr, "startup: invalid value for --launch-epoch-ns: "
                            "'%s' (expected a positive integer, nanoseconds since the epoch)\n", val);
                status = 2;
            }
            launch_ns = v;
        } else {
            if (maybe_rank0())
                fprintf(stderr, "startup: unknown option '%s' (try --help)\n", argv[i]);
            status = 2;
        }
    }
    if (status < 0 && launch_ns == 0) {
        if (maybe_rank0())
            fprintf(stderr, "startup: missing required option --launch-epoch-ns (try --help)\n");
        status = 2;
    }
    char err[160];
    if (status < 0 && tb_watchdog_start("startup", -1, err, sizeof err)) {
        if (maybe_rank0())
            fprintf(stderr, "startup: %s\n", err);
        status = 2;
    }
    if (status >= 0)
        return status;

    tb_watchdog_at("MPI_Init", "", NULL, -1);
    MPI_Init(&argc, &argv);
    int64_t init_ns = now_ns(); /* first thing after MPI_Init returns */

    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tb_watchdog_rank(rank);
    tb_watchdog_at("first message", "", NULL, (long)sizeof(int));

    int64_t first_ns = 0;
    int hello = rank;
    MPI_Status st; /* not MPI_STATUS_IGNORE: that is MPI-2 */
    if (rank != 0) {
        MPI_Send(&hello, 1, MPI_INT, 0, TAG_HELLO, MPI_COMM_WORLD);
    } else {
        for (int i = 1; i < size; i++)
            MPI_Recv(&hello, 1, MPI_INT, ordered ? i : MPI_ANY_SOURCE, TAG_HELLO,
                     MPI_COMM_WORLD, &st);
        first_ns = now_ns(); /* the last rank's message is in */
    }

    /* Differences in integer nanoseconds first: a double holding seconds
     * since 1970 would keep only about a quarter of a microsecond. */
    double init_s = (double)(init_ns - launch_ns) / 1e9;
    double *all = NULL;
    if (rank == 0 && (all = malloc((size_t)size * sizeof *all)) == NULL) {
        fprintf(stderr, "startup: out of memory for %d init times\n", size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    tb_watchdog_at("gather", "", NULL, -1);
    MPI_Gather(&init_s, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

    /* How many nodes the ranks ran on (after the timing): a launcher that was asked for two
     * nodes and put both ranks on one must not count as a two-node launch. */
    char host[MPI_MAX_PROCESSOR_NAME + 1];
    int len = 0;
    memset(host, 0, sizeof host);
    MPI_Get_processor_name(host, &len);
    char *hosts = NULL;
    if (rank == 0 && (hosts = calloc((size_t)size, sizeof host)) == NULL) {
        fprintf(stderr, "startup: out of memory for %d host names\n", size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(host, (int)sizeof host, MPI_CHAR, hosts, (int)sizeof host, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    int nodes = 0;
    for (int i = 0; rank == 0 && i < size; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = strcmp(hosts + (size_t)i * sizeof host, hosts + (size_t)j * sizeof host) == 0;
        nodes += !seen;
    }
    free(hosts);

    if (rank == 0) {
        double lo = all[0], hi = all[0];
        for (int i = 1; i < size; i++) {
            if (all[i] < lo) lo = all[i];
            if (all[i] > hi) hi = all[i];
        }
        char raw[512], version[1024];
        tb_library_version(raw, sizeof raw);
        tb_json_escape(raw, version, sizeof version);
        printf("STARTUP {\"ranks\":%d,\"init_s_max\":%.6f,\"init_s_min\":%.6f,"
               "\"first_message_s\":%.6f,\"nodes\":%d,\"library_version\":\"%s\"}\n",
               size, hi, lo, (double)(first_ns - launch_ns) / 1e9, nodes, version);
        fflush(stdout);
        free(all);
    }
    tb_watchdog_stop();
    MPI_Finalize();
    return 0;
}
