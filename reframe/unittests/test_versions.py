"""The version series (site/versions.toml) and its table (testbed/sweep_table.py): the file loads
with the registry, every entry is one pinned PyPI release named after it, nothing collides with
the default registry; the table of a small synthetic report is exact and sorts versions as
numbers. Nothing here installs, runs MPI or times anything."""
import json
import re
import subprocess

from testbed import registry, sweep_table

VERSIONS = registry.REPO / 'site' / 'versions.toml'


def test_versions_file_loads_and_pins_each_release_it_names():
    reg = registry.load(VERSIONS)
    assert reg.stacks
    for name, stack in reg.stacks.items():
        family, version = re.fullmatch(r'(mpich|openmpi|intel-mpi)-(\d+(?:\.\d+)+)',
                                       name).groups()
        assert stack.family == family and stack.origin == 'pypi'
        # the wheels, pinned to exactly the release in the name (own venv: install.py
        # --no-deps): one for MPICH and Open MPI; Intel MPI's wrappers and its runtime
        wheels = ('impi-devel', 'impi-rt') if family == 'intel-mpi' else (family,)
        assert stack.packages == tuple(f'{w}=={version}' for w in wheels)
        assert stack.compiler == f'{reg.prefix_root}/{name}/bin/mpicc'
        assert stack.launch_command(2)[0].startswith(f'{reg.prefix_root}/{name}/bin/')
        assert 'mpi' in stack.features


def test_versions_names_are_unique_and_apart_from_the_default_registry():
    versions, default = registry.load(VERSIONS), registry.load(registry.DEFAULT_FILE)
    environs = [s.environ for s in versions.stacks.values()]
    assert len(set(environs)) == len(environs)              # dots -> underscores stay distinct
    assert not set(versions.stacks) & set(default.stacks)
    assert not set(environs) & {s.environ for s in default.stacks.values()}
    assert not {s.prefix for s in versions.stacks.values()} & \
        {s.prefix for s in default.stacks.values()}       # never a shared venv


def test_version_key_sorts_numerically():
    names = ['mpich-4.10', 'openmpi-5.0.10', 'mpich-4.9', 'openmpi-5.0.9', 'mpich-3.4.3',
             'openmpi-4.1.8']
    assert sorted(names, key=sweep_table.version_key) == [
        'mpich-3.4.3', 'mpich-4.9', 'mpich-4.10', 'openmpi-4.1.8', 'openmpi-5.0.9',
        'openmpi-5.0.10']


def case(name, stack, perfvalues, result='pass', **extra):
    return {'name': name, 'environ': stack.replace('.', '_'), 'stack_name': stack,
            'result': result, 'perfvalues': perfvalues, **extra}


def pv(value, unit):
    return [value, 0, None, None, unit, 'pass']


P2P = 'P2PMatrix %mode=Send-Recv/complete %size_range=quick'
SU3 = 'Su3Run %ranks=2 %comm=ssend'


def synthetic_report(tmp_path):
    cases = []
    # given out of order: 4.10 must come after 4.9
    for stack, lat, su3 in [('mpich-4.10', 2.0, 0.5), ('mpich-4.9', 4.0, 0.25)]:
        cases.append(case(P2P, stack, {'testbed-local:default:latency': pv(lat, 'us')},
                          library_version=f'MPICH Version:\t{stack[6:]}',
                          figure_samples={'half_round_trip_us@8': [lat, lat / 2, lat * 2],
                                          'half_round_trip_us@1048576': [100.0, 200.0, 50.0]}))
        cases.append(case(SU3, stack, {'testbed-local:default:s_per_traj': pv(su3, 's')}))
    path = tmp_path / 'report.json'
    path.write_text(json.dumps({'runs': [{'testcases': cases}]}))
    return path


def test_table_of_a_synthetic_report(tmp_path, capsys):
    assert sweep_table.main([str(synthetic_report(tmp_path))]) == 0
    assert capsys.readouterr().out.splitlines() == [
        '| figure | mpich-4.9 | mpich-4.10 |',
        '|---|---|---|',
        '| library reports version | 4.9 | 4.10 |',
        '| P2PMatrix Send-Recv/complete quick: latency at 8 B (us, median half round trip) '
        '| 4 | 2 |',
        # 1 MiB over the median 100 us = 10486 bytes/us = MB/s
        '| P2PMatrix Send-Recv/complete quick: bandwidth at 1 MiB (MB/s = 10^6 bytes/s) '
        '| 10486 | 10486 |',
        '| P2PMatrix Send-Recv/complete quick: latency (us, geometric mean over the sizes) '
        '| 4 | 2 |',
        '| Su3Run 2 ssend: s_per_traj (s) | 0.25 | 0.5 |',
        '| test cases | all 2 passed | all 2 passed |',
    ]


def test_failed_and_missing_stacks_make_exit_1(tmp_path, capsys):
    path = synthetic_report(tmp_path)
    report = json.loads(path.read_text())
    report['runs'][0]['testcases'][1].update(
        result='fail', fail_phase='sanity', fail_reason='no SU3-END record\nmore',
        perfvalues={'testbed-local:default:s_per_traj': pv(None, 's')})   # as ReFrame writes
    path.write_text(json.dumps(report))
    assert sweep_table.main([str(path), '--stacks', 'mpich-4.9,mpich-4.10,mpich-5.0']) == 1
    out = capsys.readouterr().out
    assert '| test cases | all 2 passed | 1 of 2 failed | no test |' in out
    assert '- mpich-4.10: Su3Run %ranks=2 %comm=ssend: fail in sanity: no SU3-END record' in out
    assert '- mpich-5.0: no test case ran' in out
    assert '| Su3Run 2 ssend: s_per_traj (s) | 0.25 | — | — |' in out
    assert sweep_table.main([str(tmp_path / 'absent.json')]) == 2


def test_per_size_figures_from_the_kept_csv_without_samples(tmp_path):
    (tmp_path / 'p2p_sizes.csv').write_text(
        '# {"stack": "x"}\ntransport,size_bytes,median_us\nmpi,8,0.5\nshm,8,0.1\n'
        'mpi,1048576,262.144\n')
    rows = dict(sweep_table.figures(case(P2P, 'mpich-4.9', {}, outputdir=str(tmp_path))))
    assert rows[f'{sweep_table.case_label(P2P)}: latency at 8 B (us, median half round trip)'] \
        == 0.5
    assert rows[f'{sweep_table.case_label(P2P)}: bandwidth at 1 MiB (MB/s = 10^6 bytes/s)'] \
        == 4000.0


def test_sweep_refuses_an_unknown_series_naming_it():
    out = subprocess.run(['bash', str(registry.REPO / 'ci' / 'sweep.sh'), 'lam'],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "unknown series 'lam'" in out.stderr
    # the make target's recipe under dash (make's /bin/sh) reaches the same message
    out = subprocess.run(['make', '-C', str(registry.REPO), 'sweep', 'SERIES=lam',
                          'SHELL=/bin/dash'], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "unknown series 'lam'" in out.stderr


def test_repeats_give_median_and_range(tmp_path, capsys):
    one = synthetic_report(tmp_path)
    report = json.loads(one.read_text())
    for tc in report['runs'][0]['testcases']:
        if tc['name'] == SU3:
            tc['perfvalues']['testbed-local:default:s_per_traj'][0] *= 3
    two = tmp_path / 'two.json'
    two.write_text(json.dumps(report))
    assert sweep_table.main([str(one), str(two), str(two)]) == 0
    assert '| Su3Run 2 ssend: s_per_traj (s) | 0.75 (0.25–0.75) | 1.5 (0.5–1.5) |' in \
        capsys.readouterr().out
