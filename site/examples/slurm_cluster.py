"""Example ReFrame configuration for a real Slurm cluster. Copy it, change what the comments
marked CHANGE say, and run the same tests as on the embedded default:

    RFM_CONFIG_FILES=site/my_cluster.py reframe -c reframe/tests -r --system mycluster

The stacks still come from site/stacks.toml. TESTBED_PROVIDE says how the cluster provides them:
  spack      each stack's Spack environment, spack-envs/<stack>/ (generated from the registry),
             activated in every job through the environment's prepare commands;
  container  each stack's Apptainer image, pulled by `make pull-images` (ci/pull_images.sh)
             into TESTBED_SIF_DIR; srun starts every rank inside it (hybrid model: the
             image's MPI speaks the PMI srun offers, `srun_mpi` in the registry);
  modules    site modules named in PROVIDED below.
Either way srun starts the ranks with the PMI the registry names (`srun_mpi`). docs/cluster.md
says how PMI maps, stack by stack, and the steps from an empty account. Not run on a real
cluster by this project: it is the emulated cluster's configuration (site/local.py,
cluster_system) with the site's names in place.
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, 'reframe'))
from testbed import registry  # noqa: E402

REGISTRY = registry.load()
PROVIDE = os.environ.get('TESTBED_PROVIDE', 'spack')
SIF_DIR = os.environ.get('TESTBED_SIF_DIR', os.path.expanduser('~/mpi-testbed-images'))
# CHANGE: the stacks this cluster runs; with PROVIDE=modules, how each is loaded.
PROVIDED = {
    'mpich-4.0': {'modules': ['mpich/4.0.2']},
    'openmpi-4.1': {'modules': ['openmpi/4.1.4']},
}
STACKS = [s for s in REGISTRY.stacks.values() if s.name in PROVIDED and s.srun_mpi]
if PROVIDE not in ('spack', 'container', 'modules'):
    raise ValueError(f'TESTBED_PROVIDE={PROVIDE!r}: not spack, container or modules')


def provision(stack):
    """The ReFrame environment fields that bring `stack` into a job."""
    if PROVIDE == 'spack':
        # `spack env activate` puts the environment's MPI (and hpl, openblas) on PATH
        return {'cc': 'mpicc', 'prepare_cmds': [
            f'spack env activate {os.path.join(REPO, "spack-envs", stack.name)}']}
    if PROVIDE == 'container':
        # the registry's compiler wrapper, run inside the image (checks.compiler_of)
        return {'cc': stack.compiler}
    return {'cc': 'mpicc', 'modules': PROVIDED[stack.name].get('modules', [])}


site_configuration = {
    'systems': [{
        'name': 'mycluster',                                  # CHANGE
        'descr': 'A Slurm cluster',
        'hostnames': [r'^login\d+'],                           # CHANGE: the login nodes' names
        'stagedir': '/scratch/$USER/mpi-testbed/stage',        # CHANGE: a shared file system
        'outputdir': os.path.join(REPO, 'reframe', 'output'),
        'partitions': [{
            # The partition name goes into every result and reference key: name it after
            # what decides the figures (the network), not after the queue.
            'name': 'ib_hdr',                                  # CHANGE
            'descr': 'compute nodes, one rank per node for the point-to-point matrix',
            # 'slurm' asks sacct for exit codes; use 'squeue' where accounting is off
            'scheduler': 'slurm',
            'launcher': 'srun',
            'access': ['--partition=compute', '--exclusive'],  # CHANGE: queue, account, QoS
            'max_jobs': 4,
            'environs': [s.environ for s in STACKS],
            'extras': {
                'nodes': 2,                 # P2PMatrix puts its two ranks on two nodes
                # Knob values for this partition (site/stacks.toml knobs), under the test's own
                'knobs': {},
                # Raw layers P2PMatrix measures beside MPI: between nodes, raw TCP over the
                # same network (loopback or 198.18.0.0/15 only: extend tr_tcp.c's rule first)
                'p2p_baselines': 'memcpy',
                # PROVIDE=container: every rank in its stack's image (reframe/testbed/checks.py)
                **({'container_engine': 'apptainer',
                    'container_images': {s.name: os.path.join(SIF_DIR, f'{s.name}.sif')
                                         for s in STACKS}} if PROVIDE == 'container' else {}),
            },
        }],
    }],
    'environments': [{
        'name': s.environ,
        **provision(s),
        'features': list(s.features),
        'env_vars': [[k, registry.shell_word(v)] for k, v in s.environment.items()],
        'extras': {'stack': s.name, 'family': s.family, 'origin': s.origin,
                   'provided_by': PROVIDE},
    } for s in STACKS],
}
