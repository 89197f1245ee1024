"""ReFrame configuration of the embedded default: this one machine, ReFrame's local scheduler,
one programming environment per stack of the registry (site/stacks.toml); and, when it is up
(make cluster-up), the emulated Slurm cluster of site/cluster/ as the system 'testbed-cluster'
(select it with --system testbed-cluster). Its partition is named after the link profile and
MTU in force (e.g. mtu1500_native, mtu9000_10gige: ReFrame names start with a letter), so that
every result and reference is keyed by them.

TESTBED_STACKS=a,b limits the run to some stacks (an unknown name is an error naming it).
Stage directories live under /var/tmp so that the unprivileged account that runs the MPI jobs
can read the binaries whatever the permissions of the checkout; outputs, perflogs and run
reports stay in reframe/ of the checkout.
"""
import getpass
import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from reframe.core.exceptions import ConfigError
from testbed import registry      # the testbed package, installed in the venv by the set-up

try:
    REGISTRY = registry.load()
    STACKS = REGISTRY.select(os.environ.get('TESTBED_STACKS'))
except registry.RegistryError as err:
    # ReFrame prints a ConfigError as one line, any other error as a traceback
    raise ConfigError(str(err)) from None
RUNS = os.path.join(REPO, 'reframe')
# One stage and output tree for both systems; /var/tmp is also what the emulated nodes share.
STAGEDIR = os.environ.get('TESTBED_STAGEDIR', f'/var/tmp/mpi-testbed-{getpass.getuser()}/stage')
OUTPUTDIR = os.path.join(RUNS, 'output')
# written by ci/images.sh (make images): the stacks whose image is built, and the image names
IMAGES_STATE = os.path.join(os.environ.get('TESTBED_OCI_DIR', '/var/tmp/mpi-testbed-oci'),
                            'images.json')
CLUSTER_STATE = os.path.join(os.environ.get('TESTBED_CLUSTER_DIR', '/run/mpi-testbed-cluster'),
                             'state.json')
# written by ci/cluster_pull.sh (make cluster-pull): the images every node of the cluster has
NODE_IMAGES_STATE = os.path.join(os.path.dirname(CLUSTER_STATE), 'node-images.json')


#: knob values of the cluster partition: between nodes, MPI over TCP
KNOBS = {'transport': 'tcp'}


def has_values(stack, knobs):
    try:
        stack.knob_settings({k: v for k, v in knobs.items() if k in stack.knobs})
        return True
    except KeyError:
        return False


def cluster_system():
    """The emulated cluster as a ReFrame system, or None when it is not up."""
    try:
        with open(CLUSTER_STATE) as fh:
            state = json.load(fh)
    except FileNotFoundError:
        return None
    # sbatch, squeue and srun, run by ReFrame itself, find the cluster through SLURM_CONF.
    os.environ['SLURM_CONF'] = state['slurm_conf']
    link = state['link']
    return {
        'name': 'testbed-cluster',
        'descr': f"Emulated cluster: {len(state['nodes'])} Slurm nodes in network namespaces "
                 f"of this machine, link profile {state['profile']}, MTU {state['mtu']}",
        'hostnames': ['^testbed-cluster-never-matches-a-host$'],
        'stagedir': STAGEDIR,
        'outputdir': OUTPUTDIR,
        'partitions': [{
            'name': f"mtu{state['mtu']}_{state['profile']}",
            'descr': f"Slurm partition 'cluster', srun with each stack's PMI (or the "
                     f"stack's own launcher through site/cluster/agent); "
                     f"{link.get('descr', '')}",
            # squeue, not slurm: the emulated cluster keeps no accounting (sacct)
            'scheduler': 'squeue',
            'launcher': 'srun',
            # As root, jobs are submitted as the job account (MPI jobs never run as root);
            # StackLaunch hands it the stage directory.
            'access': ['--partition=cluster'] + (
                [f'--uid={REGISTRY.run_as}', f'--gid={REGISTRY.run_as}']
                if os.geteuid() == 0 else []),
            'max_jobs': 1,
            # stacks srun or the fallback (their own launcher through the agent) can start,
            # and that have the partition's knob values (Intel MPI's wheel has no TCP path
            # here: site/stacks.toml)
            'environs': [s.environ for s in STACKS
                         if (s.srun_mpi or s.fallback_env) and has_values(s, KNOBS)],
            'processor': {'num_cpus': 1},
            'extras': {'nodes': len(state['nodes']), 'link_profile': state['profile'],
                       'mtu': state['mtu'], 'rate_mbit': link.get('rate_mbit'),
                       'bucket_bytes': state.get('bucket_bytes'),
                       # between nodes: MPI over TCP, measured against raw TCP
                       'knobs': KNOBS,
                       # the fallback launcher's rsh-style agent: enters a node's namespaces
                       # (`up` copies it out of the clone, which the job account may not read)
                       'fallback_agent': os.path.join(os.path.dirname(CLUSTER_STATE), 'agent'),
                       'p2p_baselines': 'memcpy,tcp,tcp_poll'},
        }],
    }

def cluster_images_system():
    """The emulated cluster with every rank inside its stack's image, as the system
    'testbed-cluster-images' (select it with --system testbed-cluster-images): srun starts
    each rank with ch-run in the node's own copy of the image, pulled from the cluster's
    registry by `make cluster-pull` (its list: NODE_IMAGES_STATE); the fallback launcher's
    stacks (LAM, PVM) keep their launcher and daemons on the node and start each rank through
    the same wrapper. None until then."""
    base = cluster_system()
    try:
        with open(NODE_IMAGES_STATE) as fh:
            state = json.load(fh)
    except FileNotFoundError:
        return None
    images, failed = state['images'], state.get('failed', {})
    if base is None:
        return None
    part = dict(base['partitions'][0])
    part['descr'] = ('each rank in its stack\'s image (ch-run, the node\'s copy pulled from '
                     'the cluster\'s registry); ' + part['descr'])
    # a stack whose pull failed stays, so that its cases fail naming the cause (image_of)
    part['environs'] = [e for e in part['environs']
                        if any(s.environ == e and (s.name in images or s.name in failed)
                               for s in STACKS)]
    part['extras'] = {**part['extras'], 'container_engine': 'charliecloud',
                      'container_images': images, 'image_failures': failed}
    return {**base, 'name': 'testbed-cluster-images',
            'descr': base['descr'] + '; ranks inside the stacks\' images',
            'hostnames': ['^testbed-cluster-images-never-matches-a-host$'],
            'partitions': [part]}


def container_system():
    """The stacks' OCI images (make images wrote their list) as the system
    'testbed-containers': the same local partition, every rank inside the stack's image
    (podman, runc, no network); select it with --system testbed-containers."""
    try:
        with open(IMAGES_STATE) as fh:
            images = json.load(fh)['images']
    except FileNotFoundError:
        return None
    # StackLaunch runs the job's launcher inside the image named here
    return local_images('testbed-containers', 'each job inside its stack\'s OCI image',
                        'podman', 'local processes in podman (runc, --network=none), the '
                        'image\'s launcher', {'container_images': images})


def local_images(name, descr, partition, partition_descr, extras):
    """A system of this machine's one local partition whose stacks are those with an image in
    extras['container_images'] (make images wrote the list)."""
    return {
        'name': name,
        'descr': f'This machine, {descr} (make images)',
        'hostnames': [f'^{name}-never-matches-a-host$'],
        'stagedir': STAGEDIR,
        'outputdir': OUTPUTDIR,
        'partitions': [{
            'name': partition,
            'descr': partition_descr,
            'scheduler': 'local',
            'launcher': 'local',
            'max_jobs': 1,
            'environs': [s.environ for s in STACKS if s.name in extras['container_images']],
            'processor': {'num_cpus': os.cpu_count()},
            'extras': extras,
        }],
    }


def local_images_system():
    """This machine with each rank inside its stack's image (make images unpacked a copy of
    each for ch-run: the list's 'rootfs'), as the system 'testbed-local-images': the stack's
    own launcher on the host starts every rank as `ch-run ... IMAGE -- program`, the hybrid
    model of a cluster on one host (ContainerTax's one-host figures)."""
    try:
        with open(IMAGES_STATE) as fh:
            rootfs = json.load(fh).get('rootfs', {})
    except FileNotFoundError:
        return None
    if not rootfs:
        return None
    return local_images('testbed-local-images', 'each rank in its stack\'s image (ch-run)',
                        'default', 'local processes, the stack\'s launcher on the host, each '
                        'rank in ch-run', {'container_engine': 'charliecloud',
                                           'container_images': rootfs})


site_configuration = {
    'systems': [{
        'name': 'testbed-local',
        'descr': 'Embedded default: one machine, stacks from Debian and PyPI',
        'hostnames': ['.*'],
        'stagedir': STAGEDIR,
        'outputdir': OUTPUTDIR,
        'partitions': [{
            'name': 'default',
            'descr': 'local processes; one job at a time (two ranks own a 2-core machine)',
            'scheduler': 'local',
            'launcher': 'local',
            'max_jobs': 1,
            'environs': [s.environ for s in STACKS],
            'processor': {'num_cpus': os.cpu_count()},
        }],
    }] + [system for system in [cluster_system(), cluster_images_system(), container_system(),
                                local_images_system()] if system],
    'environments': [{
        'name': s.environ,
        'cc': s.compiler,
        'features': list(s.features),
        # ReFrame writes these as 'export K=V' verbatim: quoted, {job}'s $$ left live
        'env_vars': [[k, registry.shell_word(v)] for k, v in s.environment.items()],
        'extras': {'stack': s.name, 'family': s.family, 'origin': s.origin},
    } for s in STACKS],
    'logging': [{
        'handlers': [{
            'type': 'file', 'name': os.path.join(RUNS, 'reframe.log'),
            'level': 'debug', 'format': '[%(asctime)s] %(levelname)s: %(message)s',
            'append': False,
        }, {
            'type': 'stream', 'name': 'stdout', 'level': 'info', 'format': '%(message)s',
        }],
        'handlers_perflog': [{
            'type': 'filelog', 'prefix': '%(check_system)s/%(check_partition)s',
            'basedir': os.path.join(RUNS, 'perflogs'), 'level': 'info',
            # One line per test: the stack as the library reported it, the knobs, its origin
            # and configure flags (the registry's), then per
            # perf variable: value|unit|reference|lower|upper|
            'format': ('%(check_job_completion_time)s|%(check_stack_name)s|'
                       '%(check_library_version)s|knobs=%(check_knobs)s|'
                       'origin=%(check_stack_origin)s|configure=%(check_stack_configure)s|'
                       '%(check_display_name)s|%(check_result)s|%(check_perfvalues)s'),
            'format_perfvars': ('%(check_perf_var)s=%(check_perf_value)s|%(check_perf_unit)s|'
                                'ref=%(check_perf_ref)s|%(check_perf_lower_thres)s|'
                                '%(check_perf_upper_thres)s|'),
            'append': True,
        }],
    }],
    'general': [{
        # ReFrame polls a job at 10/s at first and slows by 10 % a poll, so a 3 s job was
        # seen finished up to 0.7 s late: over the quick pass's 340 jobs, minutes. Polling a
        # local job is a waitpid; here the rate slows by 1 % a poll (a 3 s job is seen within
        # about 0.15 s). The cluster keeps ReFrame's default: each of its polls runs Slurm's
        # commands on the cores the ranks use.
        'target_systems': ['testbed-local'],
        'poll_rate_decay': 0.01,
        'report_file': os.path.join(RUNS, 'reports', 'run-report-{sessionid}.json'),
        'purge_environment': False,
    }, {
        'report_file': os.path.join(RUNS, 'reports', 'run-report-{sessionid}.json'),
        'purge_environment': False,
    }],
    # Every session kept in ReFrame's results storage (sqlite; needs polars, which the set-up
    # installs): `reframe --list-stored-sessions`, `--performance-compare`, and testbed.compare
    # by session UUID. TESTBED_RESULTS_DB moves it (the unit tests keep theirs apart).
    'storage': [{
        'enable': True,
        'sqlite_db_file': os.environ.get('TESTBED_RESULTS_DB',
                                         os.path.join(RUNS, 'results', 'sessions.db')),
    }],
}
