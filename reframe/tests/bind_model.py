"""One image, many MPIs (the bind model; docs/bind-model.md): the point-to-point program of
the image containers/bind-abi (make bind-image), built once against an ABI, runs with the
host stack's library bound in, each rank under ch-run, started by the stack's own launcher
on the host (hybrid model); and the stack's own build of the same program runs natively, in
the same job, launch by launch (native, bound, native, bound, ...), as tests/container_tax.py
interleaves bare and image launches.

abi=mpich: the program linked against libmpi.so.12, on every stack with the registry feature
mpich-abi (Debian's libmpich.so.12 presented under that name); abi=standard: linked against
libmpi_abi.so.1 (the mpich 5.0 wheel's mpicc_abi), on every stack that ships that file.
What is bound where, and what is staged beside it: testbed/bind_model.py.

Figures, per size of the quick range, the median over the rounds: bind_us@SIZE (the bound
launch's time), native_us@SIZE (the native one's) and bind_ratio@SIZE (bound over native,
round by round). Reported only: no reference file, so no row is looked up or missing.
Sanity: every launch complete; the bound launches report the same library as the native
ones (MPI_Get_library_version); ldd run in the image with the job's binds resolves the ABI's
soname through the bind, and finds every library the stack's needs; the image holds no MPI
library of its own.
"""
import os
import subprocess

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, parameter, run_after, run_before, variable
from reframe.core.exceptions import ReframeError

from testbed import bind_model, registry
from testbed.checks import records, stack_of
from testbed.interleaved import SIZES, InterleavedP2P, incomplete
from testbed.launch import StackLaunch, drop_privileges, extra_launch
from testbed.p2p import P2PBuild
from testbed.perf import set_perf_variables



@rfm.simple_test
class BindModel(InterleavedP2P, StackLaunch, rfm.RunOnlyRegressionTest):
    descr = 'p2p Send-Recv from one image with the stack\'s library bound in, beside native'
    abi = parameter(list(bind_model.ABIS))
    #: each round a native launch then a bound launch
    sides = ('native', 'bind')
    #: the host file bound in for the ABI, and the binds (for the report)
    bound_library = variable(str, value='')
    bind_words = variable(str, value='')
    #: test-only: the ranks run in the image WITHOUT the binds (-S BindModel.omit_bind=yes):
    #: the proof that sanity fails when the image lacks them
    omit_bind = variable(bool, value=False)
    valid_systems = ['testbed-local']
    num_tasks = 2
    time_limit = '15m'
    build = fixture(P2PBuild, scope='environment')
    tags = {'containers', 'bind'}

    @run_after('init')
    def stacks_of_the_abi(self):
        try:
            stacks = registry.load().select(os.environ.get('TESTBED_STACKS'))
        except registry.RegistryError as err:
            raise ReframeError(str(err)) from None
        self.valid_prog_environs = [s.environ for s, _ in
                                    bind_model.stacks_for(stacks, self.abi)]

    @run_before('run')
    def interleave(self):
        """The binds staged, then the job: ldd of the program in the image (what it loads),
        the rounds, the last bound launch being the main one (the plan's launcher wraps it)."""
        reg, stack = stack_of(self)
        abi = bind_model.ABIS[self.abi]
        rootfs = os.path.join(os.environ.get('TESTBED_OCI_DIR', '/var/tmp/mpi-testbed-oci'),
                              'host-images', 'bind-abi', 'rootfs')
        if not os.path.isdir(rootfs):
            raise ReframeError(f'{rootfs}: no bind-model image (containers/bind-abi): build it '
                               f'with make bind-image')
        if not os.path.exists(os.path.join(rootfs, abi.program.lstrip('/'))):
            raise ReframeError(f'{rootfs}: no {abi.program} in the bind-model image: rebuild '
                               f'it with make bind-image')
        own = bind_model.mpi_libraries_in(rootfs)
        if own:
            raise ReframeError(f'{rootfs}: the bind-model image holds MPI libraries of its '
                               f'own ({", ".join(own[:3])}): rebuild it with make bind-image')
        library = bind_model.library_of(stack, self.abi)
        if not library or not os.path.exists(library):
            raise ReframeError(f'{library}: {stack.name} provides {abi.what} there, but the '
                               f'file is missing (install the stack: make setup)')
        self.bound_library = library
        done = subprocess.run(['ldd', library], capture_output=True, text=True)
        try:
            plan = bind_model.bind_plan(library, self.abi, bind_model.parse_ldd(done.stdout),
                                        bind_model.image_sonames(rootfs))
        except bind_model.BindError as err:
            raise ReframeError(f'{library}: {err}') from None
        shim = os.path.join(self.stagedir, 'bind-shim')
        bind_model.stage_shim(shim, plan)
        opts = self.p2p_options()

        def bound(tag):
            return bind_model.rank_words(rootfs, plan, shim, join=(2, f'tb-{tag}'),
                                         bind=not self.omit_bind)

        drop = drop_privileges(reg)
        ldd = ' '.join(drop + bind_model.rank_words(rootfs, plan, shim, bind=not self.omit_bind) +
                       ['ldd', abi.program])
        self.prerun_cmds.append(f'{ldd} > bind-ldd.txt 2>&1')
        native = ' '.join(extra_launch(self, 2) + [self.build.executable_path, *opts])
        tag = f'{stack.name}-{self.abi}-{os.getpid()}'
        self.add_rounds(native, lambda r: ' '.join(extra_launch(self, 2) + bound(f'{tag}-r{r}') +
                                                   [abi.program, *opts]))
        words = bound(f'{tag}-r{self.rounds}')
        self.bind_words = ' '.join(words)
        self.executable, self.executable_opts = words[0], [*words[1:], abi.program, *opts]

    @sn.deferrable
    def _complete(self):
        try:
            with open(os.path.join(self.stagedir, 'bind-ldd.txt'), errors='replace') as fh:
                problem = bind_model.load_problem(fh.read(), self.abi)
        except OSError:
            problem = 'bind-ldd.txt: ldd did not run in the image'
        if problem:
            return problem
        short = incomplete(self.side_outputs('native') + self.side_outputs('bind'))
        if short:
            return short
        versions = {side: {records(path, 'P2P-RUN')[0].get('library_version', 'unknown')
                           for path in self.side_outputs(side)} for side in self.sides}
        if versions['bind'] != versions['native'] or len(versions['native']) != 1:
            return (f'the bound launches report {sorted(versions["bind"])}, the stack\'s own '
                    f'build {sorted(versions["native"])}: the bound program did not load the '
                    f'stack\'s library')
        self.library_version = versions['native'].pop()
        return True

    @run_before('performance')
    def define_perf(self):
        set_perf_variables(self, {f'bind_us@{s}': ('us', self.paired_figure(s, 'second_us'))
                                  for s in SIZES} |
                           {f'native_us@{s}': ('us', self.paired_figure(s, 'first_us'))
                            for s in SIZES} |
                           {f'bind_ratio@{s}': ('ratio', self.paired_figure(s, 'ratio'))
                            for s in SIZES})
