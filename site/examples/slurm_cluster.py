"""Example ReFrame configuration for a real Slurm cluster. Copy it, change what the comments
marked CHANGE say, and run the same tests as on the embedded default:

    RFM_CONFIG_FILES=site/my_cluster.py reframe -c reframe/tests -r --system mycluster

The stacks still come from site/stacks.toml: here each one's environment says how the cluster
provides it (a module, a Spack environment or a prefix; containers come with the next issue)
and srun starts its ranks with the PMI the registry names (`srun_mpi`). docs/cluster.md says
how PMI maps, stack by stack. Not run on a real cluster by this project: it is the emulated
cluster's configuration (site/local.py, cluster_system) with the site's names in place.
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, 'reframe'))
from testbed import registry  # noqa: E402

REGISTRY = registry.load()
# CHANGE: the stacks this cluster has, and how each is brought into a job (module names,
# `spack env activate`, or PATH to a prefix). Only stacks with `srun_mpi` can run under srun.
PROVIDED = {
    'mpich-4.0': {'modules': ['mpich/4.0.2'], 'cc': 'mpicc'},
    'openmpi-4.1': {'modules': ['openmpi/4.1.4'], 'cc': 'mpicc'},
}
STACKS = [s for s in REGISTRY.stacks.values() if s.name in PROVIDED and s.srun_mpi]

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
            },
        }],
    }],
    'environments': [{
        'name': s.environ,
        'cc': PROVIDED[s.name].get('cc', 'mpicc'),            # the module's compiler wrapper
        'features': list(s.features),
        'modules': PROVIDED[s.name].get('modules', []),
        'env_vars': [[k, registry.shell_word(v)] for k, v in s.environment.items()],
        'extras': {'stack': s.name, 'family': s.family, 'origin': s.origin},
    } for s in STACKS],
}
