"""The launch plan (testbed/launch.py) as ReFrame writes it into job scripts, without running a
job (--dry-run): the stack's own line through the testbed's launcher, and knobs a user sets
reaching the launches of StartupTime too."""
import json
import shutil

from test_suite_runs import reframe, workdir  # noqa: F401  (the fixture, by name)


def job_script(workdir, test):
    scripts = [p for p in (workdir / 'stage').rglob('rfm_job.sh') if test in str(p)]
    assert len(scripts) == 1, scripts
    return scripts[0].read_text()


def test_the_stack_launches_through_the_plans_launcher(workdir):  # noqa: F811
    reframe(workdir, '--dry-run', '-n', 'P2PMatrix.*%mode=Send-Recv/complete.*%size_range=quick',
            '-p', '^mpich-4_0$')
    lines = [line for line in job_script(workdir, 'P2PMatrix').splitlines()
             if 'mpiexec.mpich' in line]
    assert len(lines) == 1, lines
    assert lines[0].startswith('setpriv --reuid=') and \
        ' mpiexec.mpich -n 2 -bind-to core ' in lines[0], lines[0]


def test_startup_takes_the_knobs_a_user_sets(workdir):  # noqa: F811
    reframe(workdir, '--dry-run', '-n', 'StartupTime', '-p', '^mpich-4_0$',
            '-S', 'StartupTime.knobs=transport:tcp')
    assert 'export MPIR_CVAR_NOLOCAL=1' in job_script(workdir, 'StartupTime')


def test_srun_lines_come_from_one_function():
    """extra_launch (one node, or the job's nodes) and StartupTime's driver (np ranks over the
    job's nodes, more than their cores allowed) take srun's line from srun_argv."""
    from types import SimpleNamespace
    from testbed.launch import srun_argv
    stack = SimpleNamespace(srun_mpi='pmix')
    assert srun_argv(stack, 2, nodes=1) == ['srun', '--mpi=pmix', '-N', '1', '-n', '2']
    assert srun_argv(stack, 4) == ['srun', '--mpi=pmix', '-n', '4']
    assert srun_argv(stack, '{np}', 2, overcommit=True) == \
        ['srun', '--mpi=pmix', '--overcommit', '-N', '2', '-n', '{np}']


def _images_cluster(workdir, images):
    run = workdir / 'cluster'
    run.mkdir()
    # a configuration srun reads at once (ReFrame asks `srun --version`; a missing file is
    # retried for 60 s)
    (run / 'slurm.conf').write_text('ClusterName=x\nSlurmctldHost=x(127.0.0.1)\n')
    (run / 'state.json').write_text(json.dumps({
        'nodes': [{'name': 'node1'}, {'name': 'node2'}], 'profile': 'native', 'mtu': 1500,
        'link': {}, 'bucket_bytes': None, 'slurm_conf': str(run / 'slurm.conf')}))
    (run / 'node-images.json').write_text(json.dumps({'images': images, 'failed': {}}))
    return {'TESTBED_CLUSTER_DIR': str(run)}


def test_on_the_emulated_cluster_srun_starts_each_rank_in_the_nodes_image(workdir):  # noqa: F811
    """--system testbed-cluster-images (make cluster-pull wrote the list of images every node
    has): srun with the stack's PMI starts ch-run, which runs the program in the node's copy,
    /var/tmp (the stage) bound in, as the job account with USER set (ch-run refuses without)."""
    image = '/var/tmp/mpi-testbed-node-images/this-node/mpich-4.0/rootfs'
    why = ('node2: pull of tbreg:5000/mpi-testbed/openmpi-4.1:current failed: manifest '
           'unknown')
    env = _images_cluster(workdir, {'mpich-4.0': image})
    (workdir / 'cluster' / 'node-images.json').write_text(json.dumps(
        {'images': {'mpich-4.0': image}, 'failed': {'openmpi-4.1': why}}))
    _, cases = reframe(workdir, '--dry-run', '--system', 'testbed-cluster-images',
                       '-n', 'P2PMatrix.*%mode=Send-Recv/complete.*%size_range=quick',
                       '-p', '^(mpich-4_0|openmpi-4_1)$', env=env)
    # the stack whose pull failed: its case fails, naming the image and the cause
    failed = cases[('P2PMatrix', 'openmpi-4_1')]
    assert failed['result'] == 'fail' and f'no image of openmpi-4.1 on every node: {why}' in \
        failed['fail_reason'], failed['fail_reason']
    script = job_script(workdir, 'P2PMatrix')
    lines = [line for line in script.splitlines() if 'ch-run' in line]
    assert len(lines) == 1, script
    # --join: ranks of one step on one node share one container (shared memory between them)
    assert lines[0].startswith(f'srun --mpi=pmi2 ch-run --join -b /var/tmp:/var/tmp {image} -- '), \
        lines
    assert '/p2p/p2p --pair Send-Recv' in lines[0]
    assert 'export USER=' in script


def test_the_fallback_stacks_start_their_ranks_in_the_image_too(workdir):  # noqa: F811
    """LAM: lamboot and mpirun on the node (the fallback launcher), each rank its program in
    ch-run, whose words come after LAM's own '--'; PVM: rank 0 in ch-run, and rank 1 spawned
    through the same words (the variable apps/p2p/ctl_pvm.c reads)."""
    lam = '/var/tmp/mpi-testbed-node-images/this-node/lam-7.1/rootfs'
    pvm = '/var/tmp/mpi-testbed-node-images/this-node/pvm-3.4/rootfs'
    env = _images_cluster(workdir, {'lam-7.1': lam, 'pvm-3.4': pvm})
    reframe(workdir, '--dry-run', '--system', 'testbed-cluster-images',
            '-n', 'P2PMatrix.*%mode=Send-Recv/complete.*%size_range=quick',
            '-n', 'PvmMatrix.*%route=direct.*%size_range=quick.*%pack=double',
            '-p', '^(lam-7_1|pvm-3_4)$', env=env)
    script = job_script(workdir, 'P2PMatrix')
    lines = [line for line in script.splitlines() if 'ch-run' in line]
    assert len(lines) == 1 and 'mpirun' in lines[0].split(' ch-run ')[0] and \
        f'ch-run -- -b /var/tmp:/var/tmp {lam} -- ' in lines[0], script
    script = job_script(workdir, 'PvmMatrix')
    # a pvmd finds a task by its path: ch-run's own where installed, its bare name elsewhere
    ch_run = shutil.which('ch-run') or 'ch-run'
    assert f"export TESTBED_PVM_SPAWN_WRAPPER='{ch_run} -b /var/tmp:/var/tmp {pvm} --'" \
        in script, script
    assert any(line.startswith(f'env PVM_TESTBED_NTASKS=2 ch-run -b /var/tmp:/var/tmp {pvm} -- ')
               for line in script.splitlines()), script


def test_the_container_tax_runs_on_one_host_and_across_two_nodes(workdir):  # noqa: F811
    """ContainerTax: the same launches bare and in the image, in turn; on this host the stack's
    own launcher starts each rank in ch-run (testbed-local-images, from the copies make images
    unpacked), on the cluster srun does, one rank on each of two nodes."""
    image = '/var/tmp/mpi-testbed-node-images/this-node/mpich-4.0/rootfs'
    here = '/var/tmp/mpi-testbed-oci/host-images/mpich-4.0/rootfs'
    env = _images_cluster(workdir, {'mpich-4.0': image})
    oci = workdir / 'oci'
    oci.mkdir()
    (oci / 'images.json').write_text(json.dumps({'images': {}, 'rootfs': {'mpich-4.0': here}}))
    env['TESTBED_OCI_DIR'] = str(oci)
    for system in ('testbed-cluster-images', 'testbed-local-images'):
        reframe(workdir, '--dry-run', '--system', system, '-n', 'ContainerTax',
                '-p', '^mpich-4_0$', '-S', 'ContainerTax.rounds=2', env=env)
    scripts = {}
    for path in (workdir / 'stage').rglob('rfm_job.sh'):
        if 'ContainerTax' in str(path):
            scripts[path.parts[-5]] = path.read_text().splitlines()
    assert sorted(scripts) == ['testbed-cluster-images', 'testbed-local-images'], scripts
    for system, start, words in (
            ('testbed-cluster-images', 'srun --mpi=pmi2 -n 2 ',
             f'--join -b /var/tmp:/var/tmp {image}'),
            ('testbed-local-images', 'setpriv --reuid=',
             f'--join-ct=2 --join-tag=tb$$-$RANDOM$RANDOM -b /var/tmp:/var/tmp {here}')):
        lines = scripts[system]
        bare = [line for line in lines if line.endswith('> bare_1.out 2> bare_1.err')]
        inside = [line for line in lines if line.endswith('> image_1.out 2> image_1.err')]
        assert len(bare) == 1 and bare[0].startswith(start) and 'ch-run' not in bare[0], lines
        assert len(inside) == 1 and inside[0].startswith(start) and \
            f'ch-run {words} -- ' in inside[0], lines


def test_the_pvm_container_tax_spawns_rank_1_where_rank_0_runs(workdir):  # noqa: F811
    """PvmContainerTax on this host: the bare launches unset the spawn wrapper (rank 1 bare
    too), the image launches start rank 0 in ch-run, and the wrapper the job exports for rank
    1 is the same words; no --join: a join tag drawn by the job's shell for rank 0 would not
    reach rank 1, which the pvmd spawns."""
    here = '/var/tmp/mpi-testbed-oci/host-images/pvm-3.4/rootfs'
    oci = workdir / 'oci'
    oci.mkdir()
    (oci / 'images.json').write_text(json.dumps({'images': {}, 'rootfs': {'pvm-3.4': here}}))
    reframe(workdir, '--dry-run', '--system', 'testbed-local-images', '-n', 'PvmContainerTax',
            '-p', '^pvm-3_4$', '-S', 'PvmContainerTax.rounds=2',
            env={'TESTBED_OCI_DIR': str(oci)})
    lines = job_script(workdir, 'PvmContainerTax').splitlines()
    words = f'ch-run -b /var/tmp:/var/tmp {here} --'
    bare = [line for line in lines if line.endswith('> bare_1.out 2> bare_1.err')]
    inside = [line for line in lines if line.endswith('> image_1.out 2> image_1.err')]
    assert len(bare) == 1 and 'env -u TESTBED_PVM_SPAWN_WRAPPER ' in bare[0] and \
        'ch-run' not in bare[0], lines
    assert len(inside) == 1 and f'{words} ' in inside[0] and \
        'TESTBED_PVM_SPAWN_WRAPPER' not in inside[0], lines
    exported = [line for line in lines if line.startswith('export TESTBED_PVM_SPAWN_WRAPPER=')]
    assert len(exported) == 1 and words in exported[0] and '--join' not in exported[0], lines
