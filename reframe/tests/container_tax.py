"""The container tax on the emulated cluster: the point-to-point program (Send-Recv over the
quick sizes, across two nodes) run bare and inside the stack's image in one job, launch by
launch (bare, image, bare, image, ...), so that the machine's state falls on both sides alike.

Each round pairs a bare launch with the image launch after it (testbed/container_tax.py);
the figures are the median over the rounds of image time over bare time per size
(tax_ratio@SIZE) and of the time it adds (tax_us@SIZE). Reported, not asserted: no band has
been made from runs yet (docs/spack-and-containers.md says what was measured). Runs on the
system testbed-cluster-images (make cluster-pull), whose plan starts ranks in the image.
"""
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, run_before, sanity_function, variable

from testbed.checks import records
from testbed.container_tax import tax
from testbed.launch import StackLaunch, extra_launch, rank_in_image
from testbed.p2p import P2PBuild
from testbed.perf import set_perf_variables

SIZES = (8, 1024, 65536, 1048576)


@rfm.simple_test
class ContainerTax(StackLaunch, rfm.RunOnlyRegressionTest):
    descr = 'p2p Send-Recv bare and in the image, interleaved launch by launch'
    #: rounds, each a bare launch then an image launch
    rounds = variable(int, value=4)
    samples = variable(int, value=10)
    valid_systems = ['testbed-cluster-images']
    valid_prog_environs = ['+mpi -no-p2p']
    num_tasks = 2
    num_tasks_per_node = 1
    time_limit = '15m'
    build = fixture(P2PBuild, scope='environment')
    tags = {'containers'}

    def _opts(self):
        return ['--pair', 'Send-Recv', '--variant', 'complete', '--sizes', 'quick',
                '--samples', str(self.samples), '--baselines', 'none',
                '--stack', self.stack_name]

    @run_before('run')
    def interleave(self):
        """The main launch is the last image round (the plan wraps it); before it, the other
        rounds and the last bare launch, each into a file of its own."""
        self.executable = self.build.executable_path
        self.executable_opts = self._opts()
        program = [self.executable, *self.executable_opts]
        bare = ' '.join(extra_launch(self, 2, over_the_nodes=True) + program)
        image = ' '.join(extra_launch(self, 2, over_the_nodes=True) + rank_in_image(self) +
                         program)
        for r in range(1, self.rounds + 1):
            self.prerun_cmds.append(f'{bare} > bare_{r}.out 2> bare_{r}.err')
            if r < self.rounds:
                self.prerun_cmds.append(f'{image} > image_{r}.out 2> image_{r}.err')

    def _outputs(self, side):
        names = [f'{side}_{r}.out' for r in range(1, self.rounds + 1)]
        if side == 'image':
            names[-1] = self.stdout.evaluate()
        return [os.path.join(self.stagedir, n) for n in names]

    @sanity_function
    def validate(self):
        return sn.all([sn.assert_eq(self._complete(), True, msg='{0}'),
                       sn.assert_eq(self.exit_status_after('P2P-END'), 0,
                                    msg='the last image launch exited with {0}')])

    @sn.deferrable
    def _complete(self):
        for path in self._outputs('bare') + self._outputs('image'):
            if not os.path.exists(path) or not records(path, 'P2P-END'):
                return f'{os.path.basename(path)}: no P2P-END record (see its .err)'
            got = {r['size_bytes'] for r in records(path, 'P2P') if r['transport'] == 'mpi'}
            if got != set(SIZES):
                return f'{os.path.basename(path)}: sizes {sorted(got)}, not {list(SIZES)}'
        return True

    @sn.deferrable
    def _tax(self, size, field):
        got = tax([records(p, 'P2P') for p in self._outputs('bare')],
                  [records(p, 'P2P') for p in self._outputs('image')])
        return got[size][field]

    @run_before('performance')
    def define_perf(self):
        set_perf_variables(self, {f'tax_ratio@{s}': ('ratio', self._tax(s, 'ratio'))
                                  for s in SIZES} |
                           {f'tax_us@{s}': ('us', self._tax(s, 'extra_us')) for s in SIZES})
