"""Jobs that run the point-to-point program two ways, launch by launch, over the quick sizes:
ContainerTax (bare, then inside the stack's image) and BindModel (the stack's own build, then
the bind model's image with the stack's library bound in). Alternating in one job (ABAB) puts
the machine's slow minutes on both sides; each round pairs a launch of the first side with the
launch of the second right after it, and a figure is the median over the rounds.
InterleavedP2P is what both tests share: the program's options, the rounds' job lines, the
files they write, the sanity of the launches, the paired figures and, where a test sets
`max_extra`, the judgement of testbed.ab on the rounds: the families latency (8 B, 1 KiB) and
bandwidth (64 KiB, 1 MiB) of the second side over the first, a failure when the rounds show a
cost above `max_extra` (docs/ab.md: the Hodges-Lehmann ratio and its Wilcoxon interval)."""
import os
import statistics

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import sanity_function, variable

from testbed import ab
from testbed.checks import records
from testbed.launch import baseline_line

SIZES = (8, 1024, 65536, 1048576)


def outputs(test, side, last):
    """The output files of `side`'s rounds (SIDE_R.out in the stage); the final round of the
    side named `last` is the job's own launch, its stdout."""
    names = [f'{side}_{r}.out' for r in range(1, test.rounds + 1)]
    if side == last:
        names[-1] = test.stdout.evaluate()
    return [os.path.join(test.stagedir, n) for n in names]


def incomplete(paths):
    """Why a launch's output falls short (no P2P-END record, or not every quick size); None
    when none does."""
    for path in paths:
        name = os.path.basename(path)
        if not os.path.exists(path) or not records(path, 'P2P-END'):
            return f'{name}: no P2P-END record (see its .err)'
        got = {r['size_bytes'] for r in records(path, 'P2P') if r['transport'] in ab.MEASURED}
        if got != set(SIZES):
            return f'{name}: sizes {sorted(got)}, not {list(SIZES)}'
    return None


def medians(recs):
    """{size: median half round trip (us)} of the measured records (MPI's or PVM's) of one
    launch."""
    return {r['size_bytes']: r['median_us'] for r in recs if r.get('transport') in ab.MEASURED}


def paired(first, second, sides):
    """Per size, the median over rounds of each side's time ('first_us', 'second_us'), of the
    second over the first round by round ('ratio', with the rounds' 'ratios') and of the time
    the second adds ('extra_us'). `first`, `second`: one list of MPI records per round, in the
    order they ran; `sides`: their names, for the error. A size missing from a round leaves that
    round out for it."""
    if len(first) != len(second) or not first:
        raise ValueError(f'{len(first)} {sides[0]} and {len(second)} {sides[1]} launches: they '
                         f'pair by round')
    pairs = [(medians(a), medians(b)) for a, b in zip(first, second)]
    out = {}
    for size in sorted({s for a, b in pairs for s in a if s in b}):
        both = [(a[size], b[size]) for a, b in pairs if size in a and size in b]
        ratios = [b / a for a, b in both]
        out[size] = {'first_us': statistics.median(a for a, _ in both),
                     'second_us': statistics.median(b for _, b in both),
                     'ratio': statistics.median(ratios), 'ratios': ratios,
                     'extra_us': statistics.median(b - a for a, b in both)}
    return out


class InterleavedP2P(rfm.RegressionTestPlugin):
    """A test that runs the p2p program's Send-Recv over the quick sizes two ways in one job,
    round by round. `sides`: the two ways' names, which name their files (SIDE_R.out); the
    second side's last round is the job's own launch. The test sets `_complete` (a deferred
    True, or why not) and calls add_rounds before the run."""
    #: rounds, each a launch of the first side then one of the second
    rounds = variable(int, value=4)
    samples = variable(int, value=10)
    #: the cost of the second side, a fraction, past which the rounds fail the test when
    #: their interval shows it; None: the figures are reported only
    max_extra = variable(float, type(None), value=None)
    #: an absolute allowance at 8 B (us): the latency family's threshold is the larger of
    #: max_extra and this over the first side's median 8 B time (None: max_extra alone)
    max_extra_us_at_8 = variable(float, type(None), value=None)
    sides = ('first', 'second')

    def p2p_options(self):
        return ['--pair', 'Send-Recv', '--variant', 'complete', '--sizes', 'quick',
                '--samples', str(self.samples), '--baselines', 'none',
                '--stack', self.stack_name]

    def add_rounds(self, first, second, first_as_baseline=False):
        """The job lines of the rounds before the job's own launch: `first` (a command line),
        then `second(r)` (round r's), each into its side's files. `first_as_baseline`: the
        first side's launches are the job's baselines (an injected slowdown of scope 'run'
        leaves them at full speed: launch.baseline_line)."""
        a, b = self.sides
        for r in range(1, self.rounds + 1):
            line = f'{first} > {a}_{r}.out 2> {a}_{r}.err'
            self.prerun_cmds.append(baseline_line(self, line) if first_as_baseline else line)
            if r < self.rounds:
                self.prerun_cmds.append(f'{second(r)} > {b}_{r}.out 2> {b}_{r}.err')

    def side_outputs(self, side):
        return outputs(self, side, last=self.sides[1])

    @sanity_function
    def validate(self):
        checks = [sn.assert_eq(self._complete(), True, msg='{0}'),
                  sn.assert_eq(self.exit_status_after('P2P-END'), 0,
                               msg=f'the last {self.sides[1]} launch exited with {{0}}')]
        if self.max_extra is not None:
            checks.append(sn.assert_eq(self.beyond_max_extra(), '', msg='{0}'))
        return sn.all(checks)

    def families(self):
        """testbed.ab's verdict per family on the rounds (the second side as B), judged
        against `max_extra`."""
        first, second = ([ab.launch_figures(records(p, 'P2P')) for p in self.side_outputs(side)]
                         for side in self.sides)
        return ab.decide(first, second, threshold=self.max_extra,
                         thresholds=self.family_thresholds(first))['families']

    def family_thresholds(self, first):
        """{'latency': its threshold} where max_extra_us_at_8 widens it past max_extra: the
        allowance over the first side's median 8 B time across the rounds."""
        if self.max_extra_us_at_8 is None or self.max_extra is None:
            return {}
        at_8 = [t for launch in first for (_, _, size), t in launch.items() if size == 8]
        if not at_8:
            return {}
        return {'latency': max(self.max_extra,
                               self.max_extra_us_at_8 / statistics.median(at_8))}

    @sn.deferrable
    def beyond_max_extra(self):
        """'' when no family shows a cost above max_extra, else why, in one line."""
        a, b = self.sides
        out = []
        for name, f in self.families().items():
            if f['verdict'].startswith('too few rounds'):
                out.append(f'{name}: {f["verdict"]}: set -S {type(self).__name__}.rounds to at '
                           f'least {ab.MIN_ROUNDS}')
            elif f['verdict'] == 'slower':
                out.append(f'{name}: {b} over {a} {f["ratio"]:.3f} [{f["lo"]:.3f}-'
                           f'{f["hi"]:.3f}] over {f["rounds"]} rounds, above '
                           f'{1 + f["threshold"]:.3f} (the run could see '
                           f'{100 * f["detectable"]:.1f} %)')
        return '; '.join(out)

    @sn.deferrable
    def family_figure(self, name, field):
        """`field` of the family `name`'s verdict (the ratio, or 'detectable' in percent)."""
        f = self.families()[name]
        value = f[field]
        return 100 * value if field == 'detectable' and value is not None else value

    @sn.deferrable
    def paired_figure(self, size, field):
        """`field` of paired() at `size`, over the two sides' rounds."""
        first, second = ([records(p, 'P2P') for p in self.side_outputs(side)]
                         for side in self.sides)
        return paired(first, second, self.sides)[size][field]
