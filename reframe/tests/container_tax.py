"""The container tax: the point-to-point program (Send-Recv over the quick sizes, two ranks on
this host or one on each of two nodes) run bare and inside the stack's image in one job, launch
by launch (bare, image, bare, image, ...), so that the machine's state falls on both sides
alike.

Each round pairs a bare launch with the image launch after it (testbed/interleaved.py);
the figures are the median over the rounds of image time over bare time per size
(tax_ratio@SIZE, a ratio to a same-job baseline: asserted against the machine type's row in
references/containers.csv where one was made from runs, reported elsewhere) and of the time
it adds (tax_us@SIZE, reported). Asserted on any machine: the rounds, judged as `make ab`
judges two builds (testbed/ab.py; families latency at 8 B and 1 KiB, bandwidth at 64 KiB and
1 MiB), do not show the image slower than bare by more than the targets: `max_extra` (3 %, the
target at 1 MiB) for bandwidth, and for latency the larger of 3 % and `max_extra_us_at_8` (0.1
us, the target at 8 B) over the bare 8 B time; tax@FAMILY is the family's ratio and
tax_could_see@FAMILY the smallest cost the run could have shown (percent), so a pass says "no
tax above that". Runs on the systems testbed-local-images (make images
unpacks a copy of each image here) and testbed-cluster-images (make cluster-pull), whose plan
starts each rank in the image.

PvmContainerTax is the same for PVM (p2p-pvm, pvm_send with PvmDataInPlace and pvm_recv over
the direct route, the fastest of PVM's paths): the job's pvmd runs bare, rank 0 is started bare
or in the image, and spawns rank 1 the same way (TESTBED_PVM_SPAWN_WRAPPER, unset for the bare
launches).
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, parameter, run_after, run_before

from testbed.ab import FAMILIES
from testbed.checks import APPS, ReferenceLookup
from testbed.interleaved import SIZES, InterleavedP2P, incomplete
from testbed.launch import StackLaunch, extra_launch, rank_in_image
from testbed.p2p import P2PBuild
from testbed.perf import set_perf_variables
from testbed.pvm import PvmBuild


@rfm.simple_test
class ContainerTax(InterleavedP2P, StackLaunch, ReferenceLookup, rfm.RunOnlyRegressionTest):
    descr = 'p2p Send-Recv bare and in the image, interleaved launch by launch'
    #: both ranks on this host (testbed-local-images: the stack's launcher starts each rank in
    #: ch-run) or one on each of two nodes of the emulated cluster (testbed-cluster-images)
    placement = parameter(['one-host', 'two-nodes'])
    sides = ('bare', 'image')
    valid_prog_environs = ['+mpi -no-p2p']
    num_tasks = 2
    time_limit = '15m'
    build = fixture(P2PBuild, scope='environment')
    tags = {'containers'}
    reference_file = 'containers.csv'
    #: rounds enough for a verdict on a few per cent (testbed.ab needs 6 for any)
    rounds = 24
    max_extra = 0.03
    max_extra_us_at_8 = 0.1
    #: words before the program on the bare launches only
    bare_words = ()

    @run_after('init')
    def place(self):
        if self.placement == 'one-host':
            self.valid_systems = ['testbed-local-images']
        else:
            self.valid_systems = ['testbed-cluster-images']
            self.num_tasks_per_node = 1
        self.reference_case = self.placement

    @run_before('run')
    def interleave(self):
        """The main launch is the last image round (the plan wraps it); before it, the other
        rounds and the last bare launch, each into a file of its own."""
        self.executable = self.build.executable_path
        self.executable_opts = self.p2p_options()
        program = [self.executable, *self.executable_opts]
        spread = self.placement == 'two-nodes'
        bare = ' '.join(extra_launch(self, 2, over_the_nodes=spread) + list(self.bare_words) +
                        program)
        image = ' '.join(extra_launch(self, 2, over_the_nodes=spread) + rank_in_image(self) +
                         program)
        # the bare launches are the job's baselines: an injected slowdown of scope 'run'
        # (make slowdown SCOPE=run) slows the image launches only
        self.add_rounds(bare, lambda r: image, first_as_baseline=True)

    @sn.deferrable
    def _complete(self):
        return incomplete(self.side_outputs('bare') + self.side_outputs('image')) or True

    def perf_variable_names(self):
        """What ReferenceLookup looks up at set-up, before define_perf: the ratios (the added
        time, tax_us, is reported only)."""
        return [f'tax_ratio@{s}' for s in SIZES]

    @run_before('performance')
    def define_perf(self):
        set_perf_variables(self, {f'tax_ratio@{s}': ('ratio', self.paired_figure(s, 'ratio'))
                                  for s in SIZES} |
                           {f'tax_us@{s}': ('us', self.paired_figure(s, 'extra_us'))
                            for s in SIZES} |
                           {f'tax@{f}': ('ratio', self.family_figure(f, 'ratio'))
                            for f in FAMILIES} |
                           {f'tax_could_see@{f}': ('%', self.family_figure(f, 'detectable'))
                            for f in FAMILIES})


@rfm.simple_test
class PvmContainerTax(ContainerTax):
    descr = 'PVM ping-pong bare and in the image, interleaved launch by launch'
    valid_prog_environs = ['+pvm']
    # apps/pvm holds pvmd-job, which the registry's boot and halt run from the stage directory
    sourcesdir = str(APPS / 'pvm')
    build = fixture(PvmBuild, scope='environment')
    tags = {'containers', 'pvm'}
    # a bare rank 0 spawns its rank 1 bare: the plan's spawn wrapper (the image's words, set
    # for the job) is unset for those launches
    bare_words = ('env', '-u', 'TESTBED_PVM_SPAWN_WRAPPER')

    def p2p_options(self):
        return ['--pvm-route', 'direct', '--pvm-send', 'send', '--pvm-recv', 'recv',
                '--pvm-encoding', 'inplace', '--sizes', 'quick', '--samples', str(self.samples),
                '--baselines', 'none', '--stack', self.stack_name, '--bind-self']
