"""The embedded default installer: Debian packages, a pinned ReFrame venv, one venv per PyPI
stack, the source builds and the checks of site prefixes (testbed/origins.py), and the
unprivileged account that runs MPI jobs. Run as root (ci/setup.sh does).

A stack that fails to install is recorded in <home>/status/<stack>.json with the reason and a
log; the other stacks go on, and that stack's tests fail with the recorded reason.
"""
import argparse
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from testbed import origins, registry

REFRAME_PIN = 'reframe-hpc==4.10.4'
# polars: ReFrame's results storage needs it (sessions kept for testbed.compare and
# --performance-compare); reframe-hpc's own requirement on it is skipped by pip (an extra marker).
# ruptures: make history's change points (testbed/changepoints.py), with the numpy and scipy pip
# resolved for it here (scipy also serves testbed.ab).
# pytest-xdist: the test command's unit tests on two workers, a file each (ci/test.sh)
TOOL_PACKAGES = [REFRAME_PIN, 'polars==1.44.2', 'polars-runtime-32==1.44.2', 'pytest==8.3.5',
                 'pytest-xdist==3.8.0', 'execnet==2.1.2',
                 'ruptures==1.1.10', 'numpy==2.4.6', 'scipy==1.17.1']
# What every build and job needs besides the stacks: compilers, make, venv support, setpriv
# (util-linux), ps (procps); for HPL single-threaded OpenBLAS, patch, and curl to fetch the
# hpcc source from Debian's archive.
BASE_DEBS = ['build-essential', 'python3-venv', 'util-linux', 'procps', 'libopenblas-dev',
             'libopenblas0-serial', 'patch', 'curl', 'acl']
# The peer benchmarks reframe/tests/peers.py compares apps/p2p with (IMB-MPI1 comes with the
# Intel MPI wheel): NetPIPE 3.7.2 built against Debian's MPICH, Open MPI, LAM and PVM.
PEER_DEBS = ['netpipe-mpich2', 'netpipe-openmpi', 'netpipe-lam',
             'netpipe-pvm']     # NPpvm: the peer of the pvm-3.4 stack (tests/pvm_matrix.py)
# The emulated cluster (site/cluster/cluster.py): Slurm 22.05 with munge, iproute2's ip and tc
# for the namespaces and shaped links. The package's daemons are not started (no systemd here);
# the cluster starts its own, with its own key and configuration. sudo: the fallback launcher's
# agent (site/cluster/agent) enters another node's namespaces, which only root may.
# docker-registry: the cluster's OCI registry (site/cluster/oci_registry.py), where `make images`
# pushes and the nodes pull; the machine-wide service its package enables is turned off.
CLUSTER_DEBS = ['slurm-wlm', 'slurm-wlm-basic-plugins', 'munge', 'iproute2', 'sudo',
                'docker-registry']
# make report's check (reframe/unittests/test_report.py) renders the page in headless Chromium.
REPORT_DEBS = ['chromium']
HPL_SOURCE = 'src/hpcc'      # under the testbed home; apps/hpl/build.sh --src-dir


def log(msg):
    print(f'[setup] {msg}', flush=True)


def run(cmd, logfile, env=None):
    """Run `cmd`, appending its output to `logfile`; return (ok, last lines of output)."""
    with open(logfile, 'a') as fh:
        fh.write(f'$ {" ".join(cmd)}\n')
        fh.flush()
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                              stdin=subprocess.DEVNULL)
    if proc.returncode == 0:
        return True, ''
    tail = Path(logfile).read_text().strip().splitlines()[-3:]
    return False, f'`{" ".join(cmd)}` exited {proc.returncode}: ' + ' / '.join(tail)


def apt_env():
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    return env


def deb_installed(pkg):
    out = subprocess.run(['dpkg-query', '-W', '-f=${Status}', pkg], capture_output=True,
                         text=True)
    return out.returncode == 0 and 'install ok installed' in out.stdout


def apt_install(pkgs, logfile, updated):
    missing = [p for p in pkgs if not deb_installed(p)]
    if not missing:
        return True, ''
    if not updated[0]:
        ok, why = run(['apt-get', 'update'], logfile, apt_env())
        if not ok:
            return False, why
        updated[0] = True
    return run(['apt-get', 'install', '-y', '--no-install-recommends', *missing], logfile,
               apt_env())


def install_cluster_debs(logfile, updated, more=()):
    """CLUSTER_DEBS and `more` in one apt call; where this call installs docker-registry, the
    service its package enables for the whole machine (port 5000) is stopped and disabled: the
    cluster starts its own."""
    fresh_registry = not deb_installed('docker-registry')
    ok, why = apt_install(list(dict.fromkeys([*CLUSTER_DEBS, *more])), logfile, updated)
    if ok and fresh_registry:
        if os.path.isdir('/run/systemd/system') and shutil.which('systemctl'):
            run(['systemctl', 'disable', '--now', 'docker-registry.service'], logfile)
        else:       # no systemd: policy-rc.d may have kept it from starting at all
            run(['service', 'docker-registry', 'stop'], logfile)
            run(['update-rc.d', 'docker-registry', 'disable'], logfile)
    return ok, why


def system_python():
    # Debian's python, so that the venvs do not point into root's home (pyenv) where the
    # unprivileged account cannot read.
    return '/usr/bin/python3' if os.path.exists('/usr/bin/python3') else sys.executable


def make_venv(prefix, pkgs, logfile, no_deps=False):
    py = os.path.join(prefix, 'bin', 'python')
    if not os.path.exists(py):
        ok, why = run([system_python(), '-m', 'venv', prefix], logfile)
        if not ok:
            return False, why
    extra = ['--no-deps'] if no_deps else []
    return run([py, '-m', 'pip', 'install', '--disable-pip-version-check', '-q', *extra, *pkgs],
               logfile)


def install_testbed_package(venv, repo, logfile):
    """The testbed package (pyproject.toml: testbed and testbed_site) into the ReFrame venv,
    editable, so that this clone's code is what ReFrame and the tools import; done again only
    when the venv serves it from another clone (the venv is shared by every clone of a host)."""
    py = os.path.join(venv, 'bin', 'python')
    where = subprocess.run([py, '-c', 'import importlib.util as u; '
                            'print(u.find_spec("testbed").origin, u.find_spec("testbed_site").origin)'],
                           capture_output=True, text=True)
    want = f'{repo / "reframe" / "testbed" / "__init__.py"} {repo / "site" / "__init__.py"}'
    if where.returncode == 0 and where.stdout.strip() == want:
        return True, ''
    return run([py, '-m', 'pip', 'install', '--disable-pip-version-check', '-q', '--no-deps',
                '-e', str(repo)], logfile)


def ensure_account(name, logfile):
    try:
        pwd.getpwnam(name)
        return True, ''
    except KeyError:
        return run(['useradd', '--create-home', '--shell', '/bin/bash', name], logfile)


def ensure_hostname_resolves(logfile, hosts='/etc/hosts'):
    """pvmd and lamboot look up this machine's own name and stop when it does not resolve
    ("master_config() NAME: can't gethostbyname"), as on a machine or container whose name
    was never written to its hosts file. Debian's installer writes `127.0.1.1 NAME`: do the
    same when the name does not resolve, and say so."""
    name = socket.gethostname()
    try:
        socket.gethostbyname(name)
        return True, ''
    except OSError:
        pass
    try:
        with open(hosts, 'a') as fh:
            fh.write(f'127.0.1.1\t{name}\t# added by the mpi-testbed set-up: pvmd and lamboot '
                     f'resolve their own host name\n')
    except OSError as err:
        return False, f'{hosts}: host name {name!r} does not resolve and cannot be added: {err}'
    with open(logfile, 'a') as fh:
        fh.write(f'{hosts}: host name {name!r} did not resolve; added as 127.0.1.1\n')
    log(f'host name {name!r} did not resolve: added to {hosts} as 127.0.1.1')
    return True, ''


def ensure_account_reaches(repo, account, logfile):
    """Jobs run as `account` and read the clone (the agent, apps/startup/launch_times.py on
    the cluster's nodes). A clone in root's home (0700) is closed to it: let the account
    alone pass through each folder above the clone that shuts it out (an ACL entry u:ACCOUNT:x,
    enter only, not list), say so, then check as the account that the clone can be read.
    A clone the account already reads is left alone (no ACL, nothing said)."""
    top = Path(repo).resolve()
    readable = origins.as_account(account) + ['test', '-r', str(top / 'site' / 'stacks.toml')]
    if run(readable, logfile)[0]:
        return True, ''
    pw = pwd.getpwnam(account)
    closed = []
    for folder in [top, *top.parents]:
        st = folder.stat()
        if st.st_mode & 0o001 or (st.st_uid == pw.pw_uid and st.st_mode & 0o100) or \
                (st.st_gid == pw.pw_gid and st.st_mode & 0o010):
            continue
        closed.append(folder)
    for folder in closed:
        ok, why = run(['setfacl', '-m', f'u:{account}:x', str(folder)], logfile)
        if not ok:
            return False, f'{folder} is closed to the job account {account} and setfacl failed: {why}'
        log(f'{folder}: the job account {account} may now pass through (ACL u:{account}:x)')
    if not run(readable, logfile)[0]:
        return False, (f'the job account {account} cannot read the clone {top} '
                       f'(site/stacks.toml): clone it with a umask that lets others read')
    return True, ''


def write_status(home, stack, ok, reason, logfile, seconds):
    status = Path(home) / 'status'
    status.mkdir(parents=True, exist_ok=True)
    (status / f'{stack}.json').write_text(json.dumps(
        {'stack': stack, 'ok': ok, 'reason': reason, 'log': str(logfile),
         'seconds': round(seconds, 1)}, indent=1) + '\n')


# Source builds run side by side, two at a time: a configure script is one core's work (LAM
# 7.1.4's took 100 s, MPICH 4.0.2's 47 s), and make -j2 leaves cores idle between
# directories. Measured here (2 cores), the two default builds: 375 s one after the other,
# 299 s side by side (LAM's configure took 140 s, MPICH's make 224 s then).
BUILDS_AT_ONCE = 2


def install_stack(stack, reg, home, updated):
    """Install one stack by its origin and record the outcome in <home>/status/<stack>.json
    (with the log's path). Returns (ok, why, seconds); a failure stops only this stack."""
    return install_stacks([stack], reg, home, updated)[stack.name]


def install_stacks(stacks, reg, home, updated, builds_at_once=BUILDS_AT_ONCE, build=True):
    """Install `stacks` in turn, each as install_stack says, except that the source builds
    run side by side (builds_at_once), after every apt step of every stack: a package that
    lands while a configure script looks would make the build depend on timing (pip's venvs
    may come later: they land in their own prefixes, which no configure looks at). The
    two-rank hellos run one at a time (two LAM universes of one process would share a session
    name). With build=False a source stack is fetched and left for a later call (absent from
    the result). Returns {stack name: (ok, why, seconds)}."""
    results, fetched = {}, []
    logs = Path(home) / 'logs'
    logs.mkdir(parents=True, exist_ok=True)
    for stack in stacks:
        t0 = time.monotonic()
        logfile = logs / f'{stack.name}.log'
        logfile.write_text('')
        proven = False      # a 2-rank hello ran (source and prefix origins)
        if stack.origin == 'debian':
            ok, why = apt_install(list(stack.packages), logfile, updated)
        elif stack.origin == 'pypi':
            # The registry lists every wheel of a stack, pinned; nothing unlisted comes in.
            ok, why = make_venv(stack.prefix, list(stack.packages), logfile, no_deps=True)
        elif stack.origin == 'source':
            ok, why = apt_install(list(stack.packages), logfile, updated)
            if ok:
                why, tarball = origins.fetch_source(stack, home, logfile)
                if not why:
                    if build:
                        fetched.append((stack, logfile, t0, tarball))
                    else:
                        log(f'{stack.name}: source fetched; built by a later call '
                            '(--builds only)')
                    continue
                ok = False
            log(f'{stack.name}: source build failed')
        elif stack.origin == 'prefix':
            # packages: what the site's library needs from Debian (say libhwloc15); the check
            ok, why = apt_install(list(stack.packages), logfile, updated)
            why = why or origins.check_prefix(stack)
            ok, proven = not why, not why
        else:
            ok, why = False, (f'origin {stack.origin!r} is installed by Spack or run from an '
                              'image on clusters, not by the embedded default')
        results[stack.name] = _finish(stack, reg, home, ok, why, proven, logfile, t0)

    def build_one(stack, logfile, tarball):
        try:
            return origins.build_fetched(stack, home, tarball, logfile)
        except Exception as err:        # one stack's failure never stops the others
            return False, f'build stopped: {type(err).__name__}: {err}', False

    with ThreadPoolExecutor(max_workers=max(1, builds_at_once)) as pool:
        running = [(stack, logfile, t0, pool.submit(build_one, stack, logfile, tarball))
                   for stack, logfile, t0, tarball in fetched]
        for stack, logfile, t0, future in running:      # in registry order
            ok, why, cached = future.result()
            log(f'{stack.name}: source build ' + ('cached (same tarball, flags, patches and '
                'build script): nothing built' if cached else 'done' if ok else 'failed'))
            results[stack.name] = _finish(stack, reg, home, ok, why, ok, logfile, t0)
    return results


def _finish(stack, reg, home, ok, why, proven, logfile, t0):
    """The compiler check, the hello where the installer made or checked the library, the
    status record and the log line of one stack; (ok, why, seconds)."""
    if ok and not shutil.which(stack.compiler):
        ok, why = False, f'compiler wrapper {stack.compiler} not found after install'
    if ok and proven:
        why = origins.hello(stack, reg.run_as, logfile)
        ok = not why
    seconds = time.monotonic() - t0
    write_status(home, stack.name, ok, why, logfile, seconds)
    log(f'{stack.name}: {"installed" if ok else "FAILED: " + why} ({seconds:.0f} s)')
    return ok, why, seconds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--stacks', default=os.environ.get('TESTBED_STACKS', ''),
                    help='comma-separated stack names (default: every stack in the registry)')
    ap.add_argument('--registry', default=None, help='registry file (default site/stacks.toml)')
    ap.add_argument('--image', action='store_true',
                    help='inside a container image (containers/, ci/images.sh): the stacks and '
                         'what they need to build and run, not the host-side tools (peers, '
                         'cluster, report browser, ReFrame, HPL source)')
    # ci/test.sh builds the source stacks beside pytest: 'later' first, then 'only' at a low
    # priority (a source build is minutes of idle cores while pytest runs one at a time)
    # ci/test.sh starts the builds after 'system' (they need only Debian's packages and the
    # tarballs), then makes the venvs beside them with a second call
    ap.add_argument('--phase', choices=('all', 'system'), default='all',
                    help="system: only the Debian packages (every list's and every stack's), "
                         "the job account and the source stacks' tarballs; all (default): "
                         "everything")
    ap.add_argument('--builds', choices=('now', 'later', 'only'), default='now',
                    help="the source stacks' builds: now (default); later: every other step, "
                         "the sources fetched; only: the source stacks' builds and hellos")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print('error: the set-up installs packages and creates an account: run it as root',
              file=sys.stderr)
        return 2
    try:
        reg = registry.load(args.registry)
        stacks = reg.select(args.stacks, source='--stacks')
        if args.builds == 'only':
            stacks = [s for s in stacks if s.origin == 'source']
    except registry.RegistryError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    home = Path(reg.prefix_root).parent
    logs = home / 'logs'
    logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    updated = [False]
    timings = {}

    t0 = time.monotonic()
    # Every Debian package in one apt call (one transaction, one round of triggers); the
    # stacks' own come in here too, so that nothing lands while a source build configures.
    stack_debs = [p for s in stacks if s.origin in ('debian', 'source', 'prefix')
                  for p in s.packages]
    # an image runs ranks; the host keeps the tools that drive and judge them
    debs = BASE_DEBS + stack_debs if args.image else \
        BASE_DEBS + PEER_DEBS + REPORT_DEBS + stack_debs
    steps = [
        ('Debian packages', lambda f: apt_install(debs, f, updated) if args.image
         else install_cluster_debs(f, updated, debs)),
        (f'account {reg.run_as}', lambda f: ensure_account(reg.run_as, f)),
        ('host name', ensure_hostname_resolves),
        ('the clone open to the job account',
         lambda f: ensure_account_reaches(registry.REPO, reg.run_as, f)),
        ('ReFrame venv', lambda f: make_venv(str(home / 'reframe'), TOOL_PACKAGES, f)),
        ('testbed package', lambda f: install_testbed_package(str(home / 'reframe'),
                                                              registry.REPO, f)),
    ]
    if args.image:
        steps = [s for s in steps if s[0] in ('Debian packages', f'account {reg.run_as}')]
    elif args.phase == 'system':
        steps = [s for s in steps if s[0] not in ('ReFrame venv', 'testbed package')]
    if args.builds == 'only':
        steps = []      # the call with --builds later made them
    for step, action in steps:
        ok, why = action(logs / 'base.log')
        if not ok:
            print(f'error: set-up step "{step}" failed: {why} (log: {logs / "base.log"})',
                  file=sys.stderr)
            return 1
    if args.phase == 'system':
        # the tarballs, one at a time (fetch_source may run apt); a failure is the next
        # call's to record, in the stack's status
        for stack in stacks:
            if stack.origin == 'source':
                why, _ = origins.fetch_source(stack, home, logs / f'{stack.name}.log')
                log(f'{stack.name}: source ' + (f'not fetched: {why}' if why else 'fetched'))
        log(f'Debian packages, account {reg.run_as} and sources: '
            f'{time.monotonic() - t0:.0f} s (the venvs and PyPI stacks: a call without '
            '--phase system)')
        return 0
    if steps:
        timings['base'] = time.monotonic() - t0
        log(f'Debian packages, ReFrame ({REFRAME_PIN}) and account {reg.run_as}: '
            f'{timings["base"]:.0f} s')

    failed = []
    done = install_stacks(stacks, reg, home, updated, build=args.builds != 'later')
    for name, (ok, _, seconds) in done.items():
        timings[name] = seconds     # the source builds' overlap: each counts its own wait
        if not ok:
            failed.append(name)

    # HPL 2.0 comes from Debian's hpcc source package, checked against its .dsc checksum.
    # (An image needs none: HPL is built on the host against the same stack.)
    if not args.image and args.builds != 'only':
        t0 = time.monotonic()
        logfile = logs / 'hpl-source.log'
        logfile.write_text('')
        ok, why = run(['bash', str(registry.REPO / 'apps' / 'hpl' / 'fetch-source.sh'),
                       str(home / HPL_SOURCE), '--setup-apt'], logfile)
        write_status(home, 'hpl-source', ok, why, logfile, time.monotonic() - t0)
        log(f'HPL source (Debian hpcc): {"verified" if ok else "FAILED: " + why}')

    total = time.monotonic() - started
    # Another registry (site/versions.toml: ci/sweep.sh) keeps its own record, so a sweep
    # never overwrites the timings of the default set-up.
    times = home / ('setup-times.json' if Path(reg.path).resolve() == registry.DEFAULT_FILE
                    else f'setup-times-{Path(reg.path).stem}.json')
    if args.builds == 'only':       # the builds' own times join those of the call before
        try:
            timings = {**json.loads(times.read_text()), **timings,
                       'builds': total}
        except (OSError, ValueError):
            timings['builds'] = total
    else:
        timings['total'] = total
    times.write_text(json.dumps({k: round(v, 1) for k, v in timings.items()}, indent=1) + '\n')
    later = len(stacks) - len(done)
    log(f'{"builds" if args.builds == "only" else "set-up"} done in {total:.0f} s; '
        f'{len(done) - len(failed)} of {len(stacks)} stacks installed'
        + (f'; {later} to build (--builds only)' if later else '')
        + (f'; failed: {", ".join(failed)}' if failed else ''))
    return 0


if __name__ == '__main__':
    sys.exit(main())
