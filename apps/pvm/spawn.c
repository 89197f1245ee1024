/* pvm-spawn: PVM's start-up time, the PVM counterpart of apps/startup. In a
 * running pvmd (apps/pvm/pvmd-job boot, timed apart), the parent spawns N-1
 * copies of itself for N tasks in all and reports, per trial:
 *   spawn_s  the time pvm_spawn takes to return with every task id;
 *   first_s  the time to a first message from every spawned task;
 *   exit_s   the time until every one has exited (pvm_notify).
 * Usage: pvm-spawn NTASKS [TRIALS]; the first trial is the cold one.
 * Record per trial: PVM-SPAWN {...}, times in s. */
#define _GNU_SOURCE
#include <stdio.h>     /* before pvm3.h */
#include <pvm3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/tb_clock.h"

#define TAG_HELLO 1
#define TAG_EXIT 2

int main(int argc, char **argv)
{
    int me = pvm_mytid();
    if (me < 0) {
        fprintf(stderr, "pvm-spawn: no pvmd for this user: boot one first (pvmd-job boot)\n");
        return 2;
    }
    if (pvm_parent() != PvmNoParent) {          /* a spawned task: say hello, leave */
        pvm_initsend(PvmDataDefault);
        pvm_pkint(&me, 1, 1);
        pvm_send(pvm_parent(), TAG_HELLO);
        pvm_exit();
        return 0;
    }
    char *end = NULL;
    long n = argc > 1 ? strtol(argv[1], &end, 10) : 0;
    long trials = argc > 2 ? strtol(argv[2], NULL, 10) : 1;
    if (argc < 2 || *end || n < 2 || n > 256 || trials < 1 || trials > 100) {
        fprintf(stderr, "pvm-spawn: usage: pvm-spawn NTASKS (2..256) [TRIALS (1..100)]\n");
        pvm_exit();
        return 2;
    }
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    self[len > 0 ? len : 0] = '\0';
    int *tids = calloc((size_t)n, sizeof *tids);
    for (long t = 0; t < trials; t++) {
        double t0 = tb_now_s();
        int got = pvm_spawn(self, NULL, PvmTaskDefault, "", (int)n - 1, tids);
        double t1 = tb_now_s();
        if (got != n - 1) {
            fprintf(stderr, "pvm-spawn: pvm_spawn started %d of %ld tasks (first error %d)\n",
                    got, n - 1, got >= 0 && got < n - 1 ? tids[got] : got);
            for (int i = 0; i < got; i++)
                pvm_kill(tids[i]);
            pvm_exit();
            return 3;
        }
        pvm_notify(PvmTaskExit, TAG_EXIT, (int)n - 1, tids);
        struct timeval limit = { 60, 0 };
        for (long i = 0; i < n - 1; i++)
            if (pvm_trecv(-1, TAG_HELLO, &limit) <= 0) {
                fprintf(stderr, "pvm-spawn: a spawned task sent nothing within 60 s\n");
                pvm_exit();
                return 3;
            }
        double t2 = tb_now_s();
        for (long i = 0; i < n - 1; i++)
            if (pvm_trecv(-1, TAG_EXIT, &limit) <= 0) {
                fprintf(stderr, "pvm-spawn: a spawned task did not exit within 60 s\n");
                pvm_exit();
                return 3;
            }
        double t3 = tb_now_s();
        printf("PVM-SPAWN {\"ntasks\":%ld,\"trial\":%ld,\"cold\":%s,\"spawn_s\":%.6f,"
               "\"first_s\":%.6f,\"exit_s\":%.6f,\"library_version\":\"PVM %s\"}\n",
               n, t, t ? "false" : "true", t1 - t0, t2 - t0, t3 - t0, pvm_version());
        fflush(stdout);
    }
    free(tids);
    pvm_exit();
    return 0;
}
