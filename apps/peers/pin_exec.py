#!/usr/bin/python3
"""Start one MPI rank of a benchmark: optionally pin it, record where it runs and which MPI
library it loads, then exec the benchmark (same process: the launcher and the MPI library
see the benchmark itself, and the CPU binding carries over the exec).

    pin_exec.py [--pin] [--preload LIB] --record PREFIX -- PROGRAM [ARGS...]

--pin binds rank r to the r-th CPU this process may use (r modulo their number): the rule
of `p2p --bind-self`, for launchers that cannot bind (LAM's mpirun). Without it the rank
keeps the binding its launcher gave it, and the record shows that binding.
--preload sets LD_PRELOAD for PROGRAM here, in the rank, since not every launcher passes the
environment on (LAM's mpirun does not): the stack's work-arounds for a binary built elsewhere.
The record is PREFIX.rank<r>.json: rank, CPUs allowed after any pinning, and the MPI
libraries PROGRAM resolves in this very environment (ldd, as the loader will resolve them).
"""
import json
import os
import shutil
import subprocess
import sys

# Where each launcher puts the rank in MPI_COMM_WORLD: Hydra (MPICH, Intel MPI), Open MPI, LAM;
# TESTBED_RANK for a program started with no launcher (NetPIPE's PVM module: apps/pvm/nppvm-pair).
RANK_VARS = ('PMI_RANK', 'OMPI_COMM_WORLD_RANK', 'LAMRANK', 'TESTBED_RANK')
MPI_LIBRARIES = ('libmpi.so', 'libmpich.so', 'liblam.so')


def rank():
    for var in RANK_VARS:
        if os.environ.get(var, '').isdigit():
            return int(os.environ[var]), var
    return None, None


def mpi_libraries(program):
    """{soname: real path} of the MPI libraries `program` resolves, and ldd's complaints
    (a missing library, a missing symbol version)."""
    out = subprocess.run(['ldd', program], capture_output=True, text=True)
    libs, problems = {}, []
    for line in (out.stdout + out.stderr).splitlines():
        line = line.strip()
        if 'not found' in line:
            problems.append(line)
        name, _, where = line.partition(' => ')
        if name.startswith(MPI_LIBRARIES) and where.startswith('/'):
            libs[name] = os.path.realpath(where.split(' (')[0])
    return libs, problems


def main(argv):
    pin = argv[:1] == ['--pin']
    argv = argv[1:] if pin else argv
    if argv[:1] == ['--preload'] and len(argv) > 1:
        os.environ['LD_PRELOAD'] = ' '.join(filter(None, [os.environ.get('LD_PRELOAD'), argv[1]]))
        argv = argv[2:]
    if len(argv) < 4 or argv[0] != '--record' or argv[2] != '--':
        sys.exit(__doc__)
    record, command = argv[1], argv[3:]
    r, var = rank()
    if pin:
        if r is None:
            sys.exit(f'pin_exec: --pin: no rank in the environment ({", ".join(RANK_VARS)})')
        allowed = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {allowed[r % len(allowed)]})
    program = shutil.which(command[0]) or command[0]
    libs, problems = mpi_libraries(program)
    with open(f'{record}.rank{r if r is not None else os.getpid()}.json', 'w') as fh:
        json.dump({'rank': r, 'rank_variable': var, 'pid': os.getpid(), 'pinned_here': pin,
                   'cpus': sorted(os.sched_getaffinity(0)), 'program': program,
                   'mpi_libraries': libs, 'ldd_problems': problems}, fh)
    os.execv(program, command)


if __name__ == '__main__':
    main(sys.argv[1:])
