#!/usr/bin/env python3
"""The launcher table, measured on the emulated cluster (it must be up: make cluster-up).

For every stack of the registry and every way srun can start MPI ranks (srun --mpi=pmi2, --mpi=
pmix), start apps/startup on 2 ranks on 2 nodes, as the job account, REPEATS times (default 3):
the launch works when every repeat exits 0 and prints a STARTUP record of a 2-rank world (a
library that does not understand the PMI starts two 1-rank worlds, which is a failure). The
start-up time is seconds from just before srun to the last rank's first message (median).

    python3 site/cluster/launcher_table.py [--repeats N] [--json FILE]

site/stacks.toml's `srun_mpi` for each stack is what this table found; docs/cluster.md has
the table of the last run.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, 'reframe'))
from testbed import registry  # noqa: E402

BUILD = '/var/tmp/mpi-testbed-cluster-build'
PMIS = ('pmi2', 'pmix')
TIMEOUT = 30          # s; a start-up takes under 2 s here


def build(stack):
    """apps/startup built with the stack's compiler wrapper into BUILD/<stack>."""
    dest = os.path.join(BUILD, stack.name)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(os.path.join(REPO, 'apps'), dest,
                    ignore=lambda d, names: [n for n in names if n.endswith('.o') or (
                        n in ('p2p', 'su3_rmd', 'startup')
                        and os.path.isfile(os.path.join(d, n)))])
    extra = ' '.join(f'../{s}' for s in stack.extra_sources)
    env = dict(os.environ, **stack.environment)
    r = subprocess.run(['make', '-C', os.path.join(dest, 'startup'), f'CC={stack.compiler}',
                        f'EXTRA_SRCS={extra}'], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env=env)
    if r.returncode:
        return None, r.stdout.strip().splitlines()[-1:]
    subprocess.run(['chmod', '-R', 'a+rX', BUILD])
    return os.path.join(dest, 'startup', 'startup'), None


def launch(stack, exe, pmi, run_as):
    env = dict(os.environ, **stack.environment)
    t0 = time.time_ns()
    argv = ['srun', '-N', '2', '-n', '2', '--ntasks-per-node=1', f'--mpi={pmi}',
            f'--uid={run_as}', f'--gid={run_as}', '--time=2', exe,
            '--launch-epoch-ns', str(t0)]
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env, timeout=TIMEOUT, cwd=BUILD)
    except subprocess.TimeoutExpired:
        # srun was killed; cancel the step so that the next launch finds the nodes free
        subprocess.run(['scancel', '--quiet', f'--user={run_as}'], env=env)
        end = time.monotonic() + TIMEOUT
        while time.monotonic() < end and subprocess.run(
                ['squeue', '-h', '-o', '%i'], env=env, stdout=subprocess.PIPE,
                text=True).stdout.strip():
            time.sleep(0.2)
        return None, f'no answer within {TIMEOUT} s (hung)'
    recs = [json.loads(line.split(' ', 1)[1]) for line in r.stdout.splitlines()
            if line.startswith('STARTUP {')]
    if r.returncode:
        last = (r.stderr.strip().splitlines() or ['(no output)'])[-1]
        return None, f'exit {r.returncode}: {last[:120]}'
    if not recs or any(x['ranks'] != 2 for x in recs):
        return None, f"ranks saw worlds of {[x['ranks'] for x in recs]}, not one of 2"
    return recs[0]['first_message_s'], None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--repeats', type=int, default=3)
    ap.add_argument('--json', help='write the table here too')
    a = ap.parse_args(argv)
    if not os.environ.get('SLURM_CONF'):
        os.environ['SLURM_CONF'] = '/run/mpi-testbed-cluster/slurm.conf'
    if not os.path.exists(os.environ['SLURM_CONF']):
        print(f"error: {os.environ['SLURM_CONF']}: no cluster is up (make cluster-up)",
              file=sys.stderr)
        return 2
    reg = registry.load()
    rows = []
    print('| stack | launch | works | start-up, median of '
          f'{a.repeats} (s) | why not |\n|---|---|---|---:|---|')
    for stack in reg.stacks.values():
        exe, why = build(stack)
        for pmi in PMIS:
            times, fails = [], ([f'build failed: {why}'] if why else [])
            for _ in range(a.repeats if exe else 0):
                t, fail = launch(stack, exe, pmi, reg.run_as)
                if fail:
                    fails.append(fail)
                else:
                    times.append(t)
            ok = exe is not None and not fails
            med = statistics.median(times) if times else None
            why_not = f'{len(fails)} of {a.repeats} failed: {fails[0]}' if fails else ''
            rows.append({'stack': stack.name, 'launch': f'srun --mpi={pmi}', 'works': ok,
                         'startup_s_median': med, 'startup_s': times, 'failures': fails})
            print(f"| {stack.name} | srun --mpi={pmi} | {'yes' if ok else 'no'} | "
                  f"{f'{med:.3f}' if med is not None else ''} | {why_not} |", flush=True)
    if a.json:
        with open(a.json, 'w') as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
