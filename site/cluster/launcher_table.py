#!/usr/bin/env python3
"""The launcher table, measured on the emulated cluster (it must be up: make cluster-up).

For every stack of the registry and every way srun can start MPI ranks (srun --mpi=pmi2, --mpi=
pmix), and the fallback for stacks that declare one (fallback_env: the stack's own launcher, in
a step on 2 nodes whose first task runs it, reaching the other through
site/cluster/agent; LAM's daemons booted over both first), start apps/startup on 2 ranks on 2
nodes, as the job account, REPEATS times (default 3):
the launch works when every repeat exits 0 and prints a STARTUP record of a 2-rank world (a
library that does not understand the PMI starts two 1-rank worlds, which is a failure). The
start-up time is seconds from just before srun (the fallback: just before the stack's launcher,
after any daemon boot, which is timed apart) to the last rank's first message (median).

    python3 site/cluster/launcher_table.py [--repeats N] [--json FILE] [--stacks A,B]

site/stacks.toml's `srun_mpi` for each stack is what this table found; docs/cluster.md has
the table of the last run.
"""
import argparse
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from testbed import registry
from testbed.launch import FALLBACK_HOSTS, fallback_plan
from testbed_site.cluster.cluster import RUN as CLUSTER_DIR

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


def wait_idle(timeout=TIMEOUT):
    """Until Slurm lists no job: a job still completing holds its nodes, and a launch made
    meanwhile was seen cut short ('Force Terminated', 'already completing')."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and subprocess.run(
            ['squeue', '-h', '-o', '%i'], stdout=subprocess.PIPE, text=True).stdout.strip():
        time.sleep(0.2)


def bounded(argv, timeout, run_as, **kw):
    """Run srun in a session of its own; on timeout kill the whole session (srun forks a
    helper that would outlive it), cancel the job and wait until the nodes are free. The
    CompletedProcess, or None when it hung."""
    wait_idle()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
        return subprocess.CompletedProcess(argv, p.returncode, out, err)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        subprocess.run(['scancel', '--quiet', f'--user={run_as}'])
        wait_idle()
        return None


def launch(stack, exe, pmi, run_as):
    env = dict(os.environ, **stack.environment)
    t0 = time.time_ns()
    argv = ['srun', '-N', '2', '-n', '2', '--ntasks-per-node=1', f'--mpi={pmi}',
            f'--uid={run_as}', f'--gid={run_as}', '--time=2', exe,
            '--launch-epoch-ns', str(t0)]
    r = bounded(argv, TIMEOUT, run_as, env=env, cwd=BUILD)
    rec, why = two_node_record(r, TIMEOUT)
    return (rec['first_message_s'] if rec else None), why


def two_node_record(r, timeout):
    """The STARTUP record of a launch that worked (exit 0, one world of 2 ranks on 2 nodes),
    or None and why not; `r` is bounded()'s result."""
    if r is None:
        return None, f'no answer within {timeout} s (hung)'
    recs = [json.loads(line.split(' ', 1)[1]) for line in r.stdout.splitlines()
            if line.startswith('STARTUP {')]
    if r.returncode:
        last = (r.stderr.strip().splitlines() or ['(no output)'])[-1]
        return None, f'exit {r.returncode}: {last[:120]}'
    if not recs or any(x['ranks'] != 2 for x in recs):
        return None, f"ranks saw worlds of {[x['ranks'] for x in recs]}, not one of 2"
    if recs[0]['nodes'] != 2:
        return None, f"the ranks ran on {recs[0]['nodes']} node(s), not 2"
    return recs[0], None


def fallback_script(stack, exe):
    """The job step of a fallback launch, as the job account on the first node: the host
    file, the daemons (timed: BOOT-S), the stack's own launcher, the daemons' halt."""
    agent = os.path.join(CLUSTER_DIR, 'agent')      # up's copy: the clone may be closed to the account
    fallback_env, hostfile_line, argv = fallback_plan(stack, agent, FALLBACK_HOSTS, 2)
    env = {**stack.environment, **stack.knob_settings()[0],     # the knobs' defaults
           **fallback_env}
    launch = shlex.join(argv + [exe])
    lines = [*(f'export {k}={registry.shell_word(v)}' for k, v in env.items()), hostfile_line]
    if stack.boot:
        halt = shlex.join(stack.halt) + (f' || {shlex.join(stack.wipe)}' if stack.wipe else '')
        lines += [f'trap "{{ {halt}; }} > halt.log 2>&1" EXIT',
                  'b0=$(date +%s%N)',
                  f'{shlex.join(stack.boot)} > boot.log 2>&1 || {{ tail -n 3 boot.log >&2; exit 1; }}',
                  'echo "BOOT-S $(( ($(date +%s%N) - b0) / 1000 ))e-6"']
    lines += [f'{launch} --launch-epoch-ns "$(date +%s%N)"']
    return '\n'.join(lines)


def launch_fallback(stack, exe, run_as):
    """One fallback launch: (start-up s, boot s or None) or None, and why not."""
    folder = os.path.join(BUILD, stack.name, 'fallback')
    os.makedirs(folder, exist_ok=True)
    subprocess.run(['chown', f'{run_as}:{run_as}', folder])
    # Two nodes allocated, one task on each (srun -N 2 -n 1 would shrink to one node); only
    # the first node's task launches, the other's returns at once.
    script = f'[ "$SLURM_PROCID" = 0 ] || exit 0\n{fallback_script(stack, exe)}'
    argv = ['srun', '-N', '2', '-n', '2', '--ntasks-per-node=1', '--mpi=none',
            f'--uid={run_as}', f'--gid={run_as}', '--time=2', f'--chdir={folder}',
            'sh', '-c', script]
    r = bounded(argv, TIMEOUT * 2, run_as, cwd=BUILD)
    rec, why = two_node_record(r, TIMEOUT * 2)
    if rec is None:
        return None, why
    boot = [float(line.split()[1]) for line in r.stdout.splitlines()
            if line.startswith('BOOT-S ')]
    return (rec['first_message_s'], boot[0] if boot else None), None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--repeats', type=int, default=3)
    ap.add_argument('--json', help='write the table here too')
    ap.add_argument('--stacks', type=lambda t: t.split(','), default=[],
                    help='only these stacks (comma list; default every MPI stack)')
    a = ap.parse_args(argv)
    if not os.environ.get('SLURM_CONF'):
        os.environ['SLURM_CONF'] = os.path.join(CLUSTER_DIR, 'slurm.conf')
    if not os.path.exists(os.environ['SLURM_CONF']):
        print(f"error: {os.environ['SLURM_CONF']}: no cluster is up (make cluster-up)",
              file=sys.stderr)
        return 2
    reg = registry.load()
    rows = []
    print('| stack | launch | works | start-up, median of '
          f'{a.repeats} (s) | daemon boot, median (s) | why not |\n|---|---|---|---:|---:|---|')
    for stack in reg.stacks.values():
        if 'mpi' not in stack.features or (a.stacks and stack.name not in a.stacks):
            continue        # PVM starts no MPI ranks: its start-up is PvmStartup's
        exe, why = build(stack)
        ways = [f'srun --mpi={pmi}' for pmi in PMIS] + (['fallback'] if stack.fallback_env else [])
        for way in ways:
            times, boots, fails = [], [], ([f'build failed: {why}'] if why else [])
            for _ in range(a.repeats if exe else 0):
                if way == 'fallback':
                    got, fail = launch_fallback(stack, exe, reg.run_as)
                    t, boot = got if got else (None, None)
                else:
                    t, fail = launch(stack, exe, way.split('=')[1], reg.run_as)
                    boot = None
                if fail:
                    fails.append(fail)
                else:
                    times.append(t)
                    if boot is not None:
                        boots.append(boot)
            ok = exe is not None and not fails
            med = statistics.median(times) if times else None
            boot_med = statistics.median(boots) if boots else None
            why_not = f'{len(fails)} of {a.repeats} failed: {fails[0]}' if fails else ''
            rows.append({'stack': stack.name, 'launch': way, 'works': ok,
                         'startup_s_median': med, 'startup_s': times,
                         'daemon_boot_s_median': boot_med, 'failures': fails})
            print(f"| {stack.name} | {way} | {'yes' if ok else 'no'} | "
                  f"{f'{med:.3f}' if med is not None else ''} | "
                  f"{f'{boot_med:.3f}' if boot_med is not None else ''} | {why_not} |",
                  flush=True)
    if a.json:
        with open(a.json, 'w') as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
