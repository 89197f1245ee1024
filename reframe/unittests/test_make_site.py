"""make site (site/make_site.py) against a fake Slurm: small scripts on PATH that answer as
sinfo, scontrol, srun and salloc would, the probe's findings given as a file per partition.
Bad input and faults must be named in one line, the file still written for the rest; the
written file must load in ReFrame and build its environments from the registry."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from testbed import registry

REPO = registry.REPO
MAKE_SITE = REPO / 'site' / 'make_site.py'
from testbed_site import make_site

SINFO = '''compute|up|n1|idle|4
compute|up|n2|mixed|4
compute|up|n3|down*|4
broken|up|b1|down*|8
broken|up|b2|drained|8
'''
CONFIG = '''Configuration data as of 2026-11-28T05:00:00
AccountingStorageType   = accounting_storage/slurmdbd
ClusterName             = fakecluster
SLURM_CONF              = /etc/slurm/slurm.conf
'''
MPI_LIST_2205 = 'srun: MPI types are...\nsrun: cray_shasta\nsrun: none\nsrun: pmi2\n'
MPI_LIST_23 = ('MPI plugin types are...\n\tnone\n\tpmi2\n\tpmix\n'
               'specific pmix plugin versions available: pmix_v4\n')
TOPOLOGY = {'arch': 'zen3', 'vendor': 'AuthenticAMD', 'model': 'AMD EPYC', 'platform': 'x86_64',
            'num_cpus': 4, 'num_cpus_per_core': 1, 'num_cpus_per_socket': 4,
            'num_sockets': 1}


def worked(**detail):
    return {'ok': True, 'detail': detail, 'why': ''}


def failed(why):
    return {'ok': False, 'detail': {}, 'why': why}


def probe_found(**changes):
    """What the probe says of a node of 'compute': stacks by route as the routes said."""
    found = {
        'host': 'n1', 'topology': TOPOLOGY, 'topology_error': '', 'stage_visible': True,
        'tcp_network': '10.1.0.0/16', 'tcp_error': '', 'agents': {'ssh': ''},
        'stacks': {
            'mpich-4.0': {'installed': worked()},
            'mpich-5.0': {'installed': failed('mpicc: not on PATH'),
                          'spack': worked(setup='/sw/spack/share/spack/setup-env.sh',
                                          env_dir=f'{REPO}/spack-envs/mpich-5.0',
                                          cc='mpicc')},
            'lam-7.1': {'installed': worked()},
            'intel-mpi-2021': {'installed': worked()},
            'mpich-4.0-ch3sock': {'installed': failed('mpicc: No such file'),
                                  'module': failed('no module mpich/4.0.2*')},
            'openmpi-4.1': {'installed': worked()},
        }}
    found.update(changes)
    return found


FAKES = {
    'sinfo': '#!/bin/sh\ncat "$FAKE/sinfo.txt"\n',
    'scontrol': '''#!/bin/sh
if [ -f "$FAKE/scontrol-fails" ]; then cat "$FAKE/scontrol-fails" >&2; exit 1; fi
case "$*" in
  "show config") cat "$FAKE/config.txt" ;;
  *) echo "scontrol: unexpected $*" >&2; exit 2 ;;
esac
''',
    'srun': '#!/bin/sh\n[ "$1" = --mpi=list ] && exec cat "$FAKE/mpi_list.txt"\nexit 2\n',
    # the probe job: answers with the findings of the partition it was asked for
    'salloc': '''#!/bin/sh
for a in "$@"; do case "$a" in --partition=*) p=${a#--partition=} ;; esac; done
[ -f "$FAKE/probe-$p.json" ] || { echo "salloc: error: Job submit/allocate failed: $p" >&2; exit 1; }
echo "salloc: Granted job allocation 7" >&2
printf 'MAKE-SITE-PROBE %s\\n' "$(cat "$FAKE/probe-$p.json")"
''',
}


@pytest.fixture
def fake(tmp_path_factory):
    """A folder of fake Slurm commands and their answers, readable by the job account (the
    probe job is started as that account when root)."""
    path = Path(tempfile.mkdtemp(prefix='testbed-make-site-', dir='/var/tmp'))
    os.chmod(path, 0o755)
    (path / 'bin').mkdir()
    for name, text in FAKES.items():
        (path / 'bin' / name).write_text(text)
        (path / 'bin' / name).chmod(0o755)
    (path / 'sinfo.txt').write_text(SINFO)
    (path / 'config.txt').write_text(CONFIG)
    (path / 'mpi_list.txt').write_text(MPI_LIST_2205)
    (path / 'probe-compute.json').write_text(json.dumps(probe_found()))
    for f in path.iterdir():
        f.chmod(0o755 if f.is_dir() else 0o644)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def make_site_run(fake, *args, path_dirs=None):
    env = dict(os.environ, FAKE=str(fake),
               PATH=':'.join([str(fake / 'bin')] + (path_dirs if path_dirs is not None
                                                     else os.environ['PATH'].split(':'))))
    env.pop('SLURM_CONF', None)
    return subprocess.run([sys.executable, str(MAKE_SITE), '--stagedir',
                           str(fake / 'stage'), '--stacks',
                           'mpich-4.0,mpich-5.0,lam-7.1,intel-mpi-2021,mpich-4.0-ch3sock,'
                           'openmpi-4.1',
                           *args], env=env, capture_output=True, text=True, timeout=120)


def load(path, monkeypatch, **env):
    """The file as ReFrame loads it (its schema checked), as a dict."""
    from reframe.core import config
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    sys.modules.pop('make_site', None)
    site = config.load_config(str(path))
    return site.get('systems')[0], site.get('environments')


def test_parsers_read_slurm_as_it_prints():
    parts = make_site.parse_sinfo(SINFO)
    assert list(parts) == ['compute', 'broken']
    assert parts['compute']['nodes']['n3'] == ('down*', 4)
    assert [n for n, (s, _) in parts['compute']['nodes'].items()
            if make_site.node_up(s)] == ['n1', 'n2']
    assert make_site.parse_mpi_list(MPI_LIST_2205) == ['cray_shasta', 'none', 'pmi2']
    assert make_site.parse_mpi_list(MPI_LIST_23) == ['none', 'pmi2', 'pmix']
    assert make_site.parse_node_addr('NodeName=n1 Arch=x NodeAddr=10.1.0.1 Foo=1') == '10.1.0.1'
    assert make_site.parse_node_addr('NodeName=n1') == ''


def test_writes_the_file_for_the_rest_and_names_each_fault(fake, monkeypatch):
    out = fake / 'fake-site.py'
    proc = make_site_run(fake, '--out', str(out), '--partitions', 'compute,broken,nosuch',
                         '--account', 'proj1', '--qos', 'short')
    text = proc.stdout + proc.stderr
    # an unknown partition is an error (exit 1), the file is still written for the rest
    assert proc.returncode == 1, text
    assert "error: PARTITIONS: no partition 'nosuch' in sinfo (partitions: compute, broken)" \
        in proc.stderr
    assert 'skip partition broken: no node is up (b1 down*, b2 drained)' in proc.stdout
    # a stack no route provides, a PMI srun lacks, a knob value the stack lacks: named
    assert ('skip stack mpich-4.0-ch3sock on partition compute: installed: mpicc: No such '
            'file; module: no module mpich/4.0.2*') in proc.stdout
    assert 'skip stack mpich-4.0-ch3sock: no partition provides it' in proc.stdout
    assert 'skip stack openmpi-4.1 on partition compute: srun_mpi pmix: not among srun ' \
        '--mpi=list (cray_shasta, none, pmi2)' in proc.stdout
    assert "skip stack intel-mpi-2021 on partition compute: knob 'transport' has no value " \
        "'tcp'" in proc.stdout
    assert out.exists(), text
    head = out.read_text().split('\nimport os')[0]
    assert 'skip stack mpich-4.0-ch3sock: no partition provides it' in head
    assert "error: PARTITIONS: no partition 'nosuch'" in head

    system, environments = load(out, monkeypatch)
    assert system['name'] == 'fakecluster' and len(system['partitions']) == 1
    part = system['partitions'][0]
    assert part['name'] == 'compute' and part['scheduler'] == 'slurm'
    assert sorted(part['environs']) == ['lam-7_1', 'mpich-4_0', 'mpich-5_0']
    assert part['access'][:4] == ['--partition=compute', '--exclusive', '--account=proj1',
                                  '--qos=short']
    assert part['processor']['num_cpus'] == 4 and part['processor']['arch'] == 'zen3'
    extras = part['extras']
    assert extras['nodes'] == 2 and extras['fallback_agent'] == 'ssh'
    assert extras['tcp_networks'] == ['10.1.0.0/16']
    assert extras['p2p_baselines'] == 'memcpy,tcp,tcp_poll'
    assert extras['knobs'] == {'transport': 'tcp'}
    envs = {e['name']: e for e in environments}
    assert envs['mpich-5_0']['cc'] == 'mpicc'
    assert envs['mpich-5_0']['prepare_cmds'][-1] == \
        f'spack env activate -d {REPO}/spack-envs/mpich-5.0'
    assert envs['mpich-5_0']['extras']['provided_by'] == 'spack'
    # the registry's own build: its wrapper and variables, from the registry
    assert envs['lam-7_1']['cc'] == 'mpicc.lam'
    assert ['LAM_MPI_SESSION_SUFFIX', 'testbed$$'] in envs['lam-7_1']['env_vars']
    # account and the others are variables at run time too, never edits (a copy: ReFrame
    # keeps a configuration module it imported)
    again = fake / 'again-site.py'
    shutil.copy(out, again)
    system, _ = load(again, monkeypatch, TESTBED_ACCOUNT='proj2', TESTBED_RESERVATION='r1')
    assert '--account=proj2' in system['partitions'][0]['access']
    assert '--reservation=r1' in system['partitions'][0]['access']


def test_without_slurm_a_named_error_and_no_file(fake):
    out = fake / 'fake-site.py'
    for name in ('sinfo', 'scontrol', 'srun', 'salloc'):
        (fake / 'bin' / name).unlink()
    proc = make_site_run(fake, '--out', str(out), path_dirs=[])
    assert proc.returncode == 2 and not out.exists(), proc.stderr
    assert proc.stderr.strip() == ("make site: error: scontrol: not found: run make site on a "
                                   "login node of a Slurm cluster (Slurm's commands on PATH)")


def test_a_controller_that_does_not_answer_is_named(fake):
    (fake / 'scontrol-fails').write_text('scontrol: error: Unable to contact slurm '
                                         'controller (connect failure)\n')
    (fake / 'scontrol-fails').chmod(0o644)
    proc = make_site_run(fake, '--out', str(fake / 'fake-site.py'))
    assert proc.returncode == 2 and not (fake / 'fake-site.py').exists()
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert 'no Slurm controller answers (scontrol show config: exit 1: scontrol: error: ' \
        'Unable to contact slurm controller (connect failure))' in proc.stderr


def test_only_partitions_without_nodes_up_write_nothing(fake):
    proc = make_site_run(fake, '--out', str(fake / 'fake-site.py'), '--partitions', 'broken')
    assert proc.returncode == 1 and not (fake / 'fake-site.py').exists()
    assert 'skip partition broken: no node is up' in proc.stdout
    assert 'error: no partition to write: nothing written' in proc.stderr


def test_a_failed_probe_and_an_unshared_stage_are_named(fake):
    (fake / 'sinfo.txt').write_text(SINFO + 'other|up|o1|idle|2\nthird|up|t1|idle|2\n')
    (fake / 'probe-third.json').write_text(json.dumps(probe_found(stage_visible=False,
                                                                  host='t1')))
    (fake / 'probe-third.json').chmod(0o644)
    proc = make_site_run(fake, '--out', str(fake / 'fake-site.py'))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ('error: partition other: the probe job failed: salloc --partition=other '
            '--nodes=1: exit 1: salloc: error: Job submit/allocate failed: other') \
        in proc.stderr
    assert f'skip partition third: the stage directory {fake}/stage is not visible on t1' \
        in proc.stdout
    assert (fake / 'fake-site.py').exists()


def test_bad_variables_are_named(fake):
    proc = make_site_run(fake, '--provide', 'installed,conda')
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("make site: error: PROVIDE: 'conda' is not one of "
                                   "installed, spack, image, module (a comma list, tried in "
                                   "its order)")
    proc = make_site_run(fake, '--modules', 'mpich-9=mpich/9')
    assert "MODULES: 'mpich-9' is not a stack of" in proc.stderr
    proc = make_site_run(fake, '--stacks', 'mpich-9')
    assert "STACKS: unknown stack 'mpich-9'" in proc.stderr
    proc = make_site_run(fake, '--out', str(fake / 'testbed.py'))
    assert proc.returncode == 2 and proc.stderr.startswith(
        f'make site: error: OUT: {fake}/testbed.py: name it with a - (e.g. mycluster-site.py)')


def site_file(fake, monkeypatch):
    out = fake / 'fake-site.py'
    proc = make_site_run(fake, '--out', str(out), '--partitions', 'compute')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_a_site_file_naming_a_stack_not_in_the_registry_is_one_line(fake, monkeypatch):
    from reframe.core.exceptions import ConfigError
    out = site_file(fake, monkeypatch)
    out.write_text(out.read_text().replace("'mpich-4.0': {'route': 'installed'}",
                                           "'mpich-9.9': {'route': 'installed'}"))
    with pytest.raises(ConfigError) as err:
        load(out, monkeypatch)
    message = str(err.value)
    assert '\n' not in message
    assert message.startswith(f"{out}: partitions[compute].stacks: 'mpich-9.9' is not a "
                              f"stack of {registry.DEFAULT_FILE}")
    assert message.endswith('run make site again')


def test_a_processor_slurm_gives_fewer_cpus_keeps_slurms_count(fake, monkeypatch):
    (fake / 'sinfo.txt').write_text('compute|up|n1|idle|1\ncompute|up|n2|idle|1\n')
    out = site_file(fake, monkeypatch)
    assert 'compute: n1 has 4 CPUs, Slurm gives a job 1: num_cpus 1' in out.read_text()
    system, _ = load(out, monkeypatch)
    processor = system['partitions'][0]['processor']
    assert processor['num_cpus'] == 1 and processor['arch'] == 'zen3'
    assert 'num_sockets' not in processor or processor['num_sockets'] is None


def test_no_agent_leaves_the_fallback_stacks_out(fake, monkeypatch):
    (fake / 'probe-compute.json').write_text(json.dumps(probe_found(
        agents={'ssh': 'ssh: exit 255: Permission denied (publickey)'},
        tcp_network=None, tcp_error='ip route get 10.1.0.2: no source address')))
    out = site_file(fake, monkeypatch)
    text = out.read_text()
    assert ('skip stack lam-7.1 on partition compute: fallback launcher: no agent reached the '
            'other node: ssh: exit 255: Permission denied (publickey)') in text
    assert 'compute: raw TCP baseline left out: ip route get 10.1.0.2: no source address' \
        in text
    system, _ = load(out, monkeypatch)
    assert system['partitions'][0]['extras']['p2p_baselines'] == 'memcpy'
    assert 'lam-7_1' not in system['partitions'][0]['environs']


# -- the probe's routes, with fake tools on PATH -------------------------------------------

def tool(folder, name, text):
    (folder / name).write_text('#!/bin/sh\n' + text)
    (folder / name).chmod(0o755)


def test_module_route_loads_the_matched_module(tmp_path, monkeypatch):
    reg = registry.load()
    stack = reg.stacks['openmpi-4.1']
    assert make_site.module_for(stack, ['mpich/4.0.2', 'openmpi/4.1.2', 'openmpi/4.1.6',
                                        'openmpi/4.10.1'], {}) == \
        ('openmpi/4.1.6', '2 matched, the last taken')
    assert make_site.module_for(stack, ['openmpi/5.0.1'], {})[0] is None
    # flags the module cannot show: only MODULES names its module
    flagged = reg.stacks['mpich-4.0-ch3sock']
    assert make_site.module_for(flagged, ['mpich/4.0.2'], {})[0] is None
    assert make_site.module_for(flagged, [], {'mpich-4.0-ch3sock': 'mpich/4.0.2-sock'}) == \
        ('mpich/4.0.2-sock', 'MODULES')
    # `module` as sites define it, a shell function of the login shell: its load puts the
    # module's wrapper on PATH
    mpi_bin = tmp_path / 'openmpi-4.1.6' / 'bin'
    mpi_bin.mkdir(parents=True)
    tool(mpi_bin, 'mpicc', 'while [ "$1" != -o ]; do shift; done\ntouch "$2"\n')
    (tmp_path / '.bash_profile').write_text(
        'module() { case "$1" in\n'
        f'  load) case "$2" in openmpi/4.1.6) PATH="{mpi_bin}:$PATH" ;; openmpi/empty) ;;\n'
        '        *) echo "ERROR: Unable to locate a modulefile for \'$2\'" >&2; return 1 ;;\n'
        '        esac ;;\n'
        '  -t) printf "/sw/modules:\\nopenmpi/4.1.6(default)\\n" >&2 ;;\n'
        '  --version) echo "Modules Release 4.6.1" >&2 ;;\n'
        '  *) return 1 ;;\n'
        'esac; }\n')
    monkeypatch.setenv('HOME', str(tmp_path))
    assert make_site.available_modules() == ['openmpi/4.1.6']
    assert make_site.module_system() == 'tmod4'
    spec = {'available_modules': ['openmpi/4.1.6'], 'modules': {}}
    detail, why = make_site.route_module(stack, spec)
    assert why == '' and detail == {'module': 'openmpi/4.1.6', 'cc': 'mpicc',
                                    'how': '1 matched, the last taken'}
    detail, why = make_site.route_module(stack, {'available_modules': ['openmpi/4.1.6'],
                                                 'modules': {'openmpi-4.1': 'openmpi/9'}})
    assert detail is None and why == \
        "module load openmpi/9: ERROR: Unable to locate a modulefile for 'openmpi/9'"
    detail, why = make_site.route_module(stack, {'available_modules': ['openmpi/4.1.6'],
                                                 'modules': {'openmpi-4.1': 'openmpi/empty'}})
    assert detail is None and why == \
        'module load openmpi/empty: puts none of mpicc.openmpi, mpicc on PATH'
    detail, why = make_site.route_module(stack, {'available_modules': None})
    assert detail is None and why == 'no module command on the node'


def test_spack_route_needs_the_environment_s_view(tmp_path, monkeypatch):
    """spack env activate -d puts the view's bin on PATH; without a view no wrapper."""
    stack = registry.load().stacks['mpich-4.0']
    root = tmp_path / 'spack'
    (root / 'share' / 'spack').mkdir(parents=True)
    (root / 'share' / 'spack' / 'setup-env.sh').write_text(
        'spack() { [ "$1 $2 $3" = "env activate -d" ] && '
        '[ -d "$4/.spack-env/view/bin" ] && PATH="$4/.spack-env/view/bin:$PATH"; }\n')
    repo = tmp_path / 'repo'
    env_dir = repo / 'spack-envs' / 'mpich-4.0'
    env_dir.mkdir(parents=True)
    (env_dir / 'spack.yaml').write_text('spack:\n  view: true\n')
    monkeypatch.setenv('SPACK_ROOT', str(root))
    detail, why = make_site.route_spack(stack, {'repo': str(repo)})
    assert detail is None and why == f'spack env activate -d {env_dir}: puts none of ' \
        'mpicc.mpich, mpicc on PATH'
    view = env_dir / '.spack-env' / 'view' / 'bin'
    view.mkdir(parents=True)
    tool(view, 'mpicc', 'while [ "$1" != -o ]; do shift; done\ntouch "$2"\n')
    detail, why = make_site.route_spack(stack, {'repo': str(repo)})
    assert why == '' and detail == {'setup': str(root / 'share' / 'spack' / 'setup-env.sh'),
                                    'env_dir': str(env_dir), 'cc': 'mpicc'}
    detail, why = make_site.route_spack(registry.load().stacks['lam-7.1'], {'repo': str(repo)})
    assert detail is None and 'no ' in why and 'spack-envs/lam-7.1/spack.yaml' in why


def test_image_route_for_srun_stacks_only(tmp_path, monkeypatch):
    reg = registry.load()
    (tmp_path / 'mpich-4.0.sif').write_text('')
    tool(tmp_path, 'apptainer', '[ "$1" = exec ] && exit 0\nexit 1\n')
    monkeypatch.setenv('PATH', f'{tmp_path}:{os.environ["PATH"]}')
    spec = {'sif_dir': str(tmp_path)}
    assert make_site.route_image(reg.stacks['mpich-4.0'], spec) == \
        ({'sif': str(tmp_path / 'mpich-4.0.sif')}, '')
    assert make_site.route_image(reg.stacks['openmpi-4.1'], spec) == \
        (None, f'no image {tmp_path}/openmpi-4.1.sif')
    assert make_site.route_image(reg.stacks['lam-7.1'], spec)[1] == \
        'the fallback launcher and its daemons run on the node, not in the image ' \
        '(only the ranks do): another route must provide the stack there'


def test_tcp_network_is_the_interface_on_the_route(tmp_path, monkeypatch):
    tool(tmp_path, 'ip', '''case "$*" in
  "-o -4 addr show") echo "1: lo    inet 127.0.0.1/8 scope host lo"
                     echo "2: eth0    inet 172.16.5.9/20 brd 172.16.15.255 scope global eth0"
                     echo "3: ib0    inet 10.1.0.7/16 brd 10.1.255.255 scope global ib0" ;;
  "-o route get 10.1.0.8") echo "10.1.0.8 dev ib0 src 10.1.0.7 uid 0" ;;
  "-o route get 127.0.0.1") echo "local 127.0.0.1 dev lo src 127.0.0.1 uid 0" ;;
  *) exit 2 ;;
esac
''')
    monkeypatch.setenv('PATH', f'{tmp_path}:{os.environ["PATH"]}')
    assert make_site.tcp_network('10.1.0.8') == ('10.1.0.0/16', '')
    assert make_site.tcp_network('127.0.0.1') == (None, '127.0.0.1 is reached over loopback')
    assert make_site.tcp_network('192.0.2.200')[1].startswith('ip route get 192.0.2.200: ')
