/*
 * main() for a stand-alone xhpl built from the HPL 2.0 copy inside HPCC.
 *
 * Why: HPCC turned HPL's driver into a function, HPL_main(), that its own
 * main() calls between MPI_Init and MPI_Finalize; the original main() is gone
 * (and HPCC's Make.ptest no longer links xhpl). This file gives it back, with
 * nothing else added: HPL_main reads HPL.dat from the working directory
 * (standalone.patch) and prints its usual report. The exit status is 0 after
 * any completed run, as with HPL: whether the residual checks passed is read
 * from the report (apps/hpl/hpl_input.py parse_hpl_output).
 */
#include <stdio.h>
#include <string.h>
#include "hpl.h"

int HPL_main(int argc, char **argv, HPL_RuntimeData *rdata, int *failure);

static void usage(FILE *out)
{
    fprintf(out,
            "usage: mpiexec -n P*Q xhpl\n"
            "HPL 2.0 (from Debian's hpcc source): reads HPL.dat in the current\n"
            "directory and writes the report where HPL.dat's device line says\n"
            "(6 = stdout). Write HPL.dat with apps/hpl/hpl_input.py.\n");
}

int main(int argc, char **argv)
{
    /* Options are checked before MPI_Init so a bad one never starts MPI. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        fprintf(stderr, "xhpl: unknown argument '%s' (xhpl takes no arguments; see --help)\n",
                argv[i]);
        return 2;
    }

    HPL_RuntimeData best;
    int failure = 0;
    memset(&best, 0, sizeof best); /* HPL_main keeps the best Gflops in it */

    MPI_Init(&argc, &argv);
    HPL_main(argc, argv, &best, &failure);
    MPI_Finalize();
    return 0;
}
