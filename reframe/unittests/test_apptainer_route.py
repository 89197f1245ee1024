"""The Apptainer route of a cluster (docs/apptainer.md), checked without Apptainer: the pull
script (ci/pull_images.sh) against a fake `apptainer` that records its arguments, and make site
(site/make_site.py) for a made-up cluster with SIF_DIR, against the fake Slurm of
test_make_site: the image route's probe, the partition it writes, and the line srun starts each
rank with as the launch plan (testbed/launch.py) writes it. No Apptainer ran."""
import json
import os
import subprocess
from types import SimpleNamespace

import pytest

from testbed import registry
import test_make_site
from test_make_site import failed, load, make_site_run, probe_found, tool, worked

#: test_make_site's fake Slurm, as a fixture of this module too
fake = test_make_site.fake

REPO = registry.REPO
PULL = REPO / 'ci' / 'pull_images.sh'
#: the fake: each call one line of arguments; a pull writes its output file, and fails for
#: a reference named in $FAKE_APPTAINER_FAILS (a tag the registry lacks)
FAKE_APPTAINER = '''echo "$*" >> "$FAKE_APPTAINER_LOG"
if [ "$1" = pull ]; then
  for ref; do :; done
  [ "$ref" = "${FAKE_APPTAINER_FAILS:-}" ] && { echo "FATAL: manifest unknown" >&2; exit 255; }
  for out; do case "$out" in *.sif) : > "$out"; break ;; esac; done
fi
exit 0
'''


def image_stacks():
    """The stacks that have an image (ci/images.sh builds those), in the registry's order."""
    return [s for s in registry.load().stacks.values()
            if s.origin in ('debian', 'pypi', 'source')]


@pytest.fixture
def apptainer(tmp_path):
    tool(tmp_path, 'apptainer', FAKE_APPTAINER)
    return tmp_path


def pull(tmp_path, path_dirs, **env):
    """ci/pull_images.sh run by dash, as make pull-images runs it; (process, apptainer's calls)."""
    log = tmp_path / 'apptainer.log'
    run_env = {k: v for k, v in os.environ.items()
               if k not in ('REGISTRY_URL', 'TAG', 'SIF_DIR', 'TESTBED_SIF_DIR', 'STACKS',
                            'NO_HTTPS')}
    run_env.update(PATH=':'.join(path_dirs), HOME=str(tmp_path), FAKE_APPTAINER_LOG=str(log),
                   **env)
    proc = subprocess.run(['sh', str(PULL)], env=run_env, capture_output=True, text=True,
                          timeout=60)
    calls = log.read_text().splitlines() if log.exists() else []
    return proc, calls


def path_with(apptainer):
    return [str(apptainer)] + os.environ['PATH'].split(':')


def test_pull_from_an_oci_registry_over_plain_http(tmp_path, apptainer):
    """docker://: the names ci/images.sh pushes (mpi-testbed/<stack>:current), Apptainer's
    --no-https for the emulated cluster's plain-HTTP registry; every stack with an image, the
    fallback launcher's (LAM, PVM) too, which make site then leaves out of the image route."""
    images = tmp_path / 'images'
    proc, calls = pull(tmp_path, path_with(apptainer), REGISTRY_URL='docker://198.18.0.3:5000/',
                       NO_HTTPS='1', SIF_DIR=str(images))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert calls == [f'pull --force --no-https {images}/{s.name}.sif '
                     f'docker://198.18.0.3:5000/mpi-testbed/{s.name}:current'
                     for s in image_stacks()]
    assert {'lam-7.1', 'pvm-3.4', 'lam-7.1-src'} <= {s.name for s in image_stacks()}
    assert 'note: lam-7.1 pvm-3.4 lam-7.1-src: the fallback launcher\'s stacks: make site ' \
        'leaves them out of the image route; run them by hand (docs/apptainer.md)' in proc.stdout
    assert f'next: make site SIF_DIR={images} PROVIDE=image,installed,spack,module' in proc.stdout
    assert sorted(p.name for p in images.iterdir()) == \
        sorted(f'{s.name}.sif' for s in image_stacks())


def test_pull_sif_files_with_oras_a_tag_and_some_stacks(tmp_path, apptainer):
    """oras://: the names .github/workflows/images.yml pushes (mpi-testbed-<stack>:latest, or
    TAG); the default folder ~/mpi-testbed-images; no --no-https unless asked."""
    proc, calls = pull(tmp_path, path_with(apptainer), REGISTRY_URL='oras://ghcr.io/some-org',
                       STACKS='mpich-4.0,pvm-3.4')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    home = tmp_path / 'mpi-testbed-images'
    assert calls == [
        f'pull --force {home}/mpich-4.0.sif oras://ghcr.io/some-org/mpi-testbed-mpich-4.0:latest',
        f'pull --force {home}/pvm-3.4.sif oras://ghcr.io/some-org/mpi-testbed-pvm-3.4:latest']
    _, calls = pull(tmp_path, path_with(apptainer), REGISTRY_URL='oras://ghcr.io/some-org',
                    STACKS='mpich-4.0', TAG='0123abcd4567', SIF_DIR=str(tmp_path / 'x'))
    assert calls[-1] == (f'pull --force {tmp_path}/x/mpich-4.0.sif '
                         f'oras://ghcr.io/some-org/mpi-testbed-mpich-4.0:0123abcd4567')


def test_a_pull_that_fails_is_named_and_the_others_go_on(tmp_path, apptainer):
    missing = 'docker://reg.example:5000/mpi-testbed/mpich-5.0:in-0123456789abcdef'
    proc, calls = pull(tmp_path, path_with(apptainer), REGISTRY_URL='docker://reg.example:5000',
                       TAG='in-0123456789abcdef', STACKS='mpich-4.0,mpich-5.0,openmpi-4.1',
                       SIF_DIR=str(tmp_path / 'images'), FAKE_APPTAINER_FAILS=missing)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert len(calls) == 3 and calls[1].endswith(' ' + missing)
    assert proc.stderr.splitlines() == [
        'FATAL: manifest unknown', f'error: mpich-5.0: apptainer pull {missing} failed (exit 255)',
        'error: not pulled: mpich-5.0']


def without_apptainer():
    return [d for d in os.environ['PATH'].split(':')
            if d and not os.path.exists(os.path.join(d, 'apptainer'))]


@pytest.mark.parametrize('env, message', [
    ({'REGISTRY_URL': 'docker://reg.example:5000'},
     'error: apptainer not found on PATH: pull on a node with Apptainer (docs/apptainer.md)'),
    ({'REGISTRY_URL': 'https://reg.example/images'},
     'error: REGISTRY_URL=https://reg.example/images: the scheme must be docker:// (an OCI '
     'registry) or oras:// (SIF files)'),
    ({'REGISTRY_URL': 'reg.example:5000'},
     'error: REGISTRY_URL=reg.example:5000: the scheme must be docker:// (an OCI registry) or '
     'oras:// (SIF files)'),
    ({}, 'error: set REGISTRY_URL: docker://HOST:PORT (an OCI registry) or oras://HOST/ORG '
         '(SIF files)'),
    ({'REGISTRY_URL': 'docker://reg.example:5000', 'NO_HTTPS': 'yes'},
     'error: NO_HTTPS=yes: 1 (plain HTTP) or 0'),
])
def test_bad_input_is_one_line_and_pulls_nothing(tmp_path, apptainer, env, message):
    path = without_apptainer() if 'apptainer not found' in message else path_with(apptainer)
    proc, calls = pull(tmp_path, path, **env)
    assert proc.returncode == 2 and proc.stdout == '' and calls == []
    assert proc.stderr.splitlines() == [message]


# -- make site: the image route of a made-up cluster, and the line each rank starts with -----

def probe_images(sif_dir, routes, installed):
    """The probe's findings on a stack (make_site.probe's loop): the image route probed for
    real, with the fake apptainer on PATH; the installed route as `installed` says."""
    from testbed_site import make_site
    reg = registry.load()
    found = {}
    for name, result in installed.items():
        tried = {}
        for route in routes:
            if route == 'image':
                detail, why = make_site.route_image(reg.stacks[name], {'sif_dir': sif_dir})
                tried[route] = {'ok': detail is not None, 'detail': detail or {}, 'why': why}
            else:
                tried[route] = result
            if tried[route]['ok']:
                break
        found[name] = tried
    return found


def rank_line(partition, environ, stage):
    """The job script's launch line of a test on `partition` (a partition of the loaded
    configuration) in `environ`, from the launch plan's own hooks: launch_with_srun (srun
    with the stack's PMI), wrap_rank_in_image (last), joined as ReFrame joins them; and the
    compiler the build uses there."""
    from reframe.core.backends import getlauncher
    from testbed.checks import compiler_of
    from testbed.launch import StackLaunch
    reg = registry.load()
    test = SimpleNamespace(
        current_partition=SimpleNamespace(extras=partition['extras'],
                                          fullname=f'fakecluster:{partition["name"]}'),
        current_environ=SimpleNamespace(name=environ['name'], extras=environ['extras'],
                                        cc=environ['cc']),
        job=SimpleNamespace(launcher=getlauncher('srun')(), num_cpus_per_task=None),
        stagedir=str(stage), env_vars={}, postrun_cmds=[], executable='./p2p',
        executable_opts=['--pair', 'Send-Recv'])
    stack = reg.by_environ(environ['name'])
    StackLaunch.launch_with_srun(test, reg, stack, [])
    StackLaunch.wrap_rank_in_image(test)
    line = ' '.join([test.job.launcher.run_command(test.job), test.executable,
                     *test.executable_opts]).strip()
    return line, compiler_of(test, stack)


def test_make_site_with_sif_dir_runs_srun_stacks_in_apptainer(fake, tmp_path, monkeypatch):
    """A made-up cluster, PROVIDE=image,installed, SIF_DIR given relative to where make site
    runs: mpich-4.0 has its image (the probe's `apptainer exec` finds mpicc.mpich in it), so
    its ranks start as `srun --mpi=pmi2 apptainer exec <SIF_DIR>/mpich-4.0.sif program`;
    mpich-5.0 has none and is named with the pull that fixes it; LAM (the fallback launcher)
    runs from the node, outside the image route."""
    images = tmp_path / 'images'
    images.mkdir()
    (images / 'mpich-4.0.sif').write_text('')
    calls = tmp_path / 'calls'
    tool(tmp_path, 'apptainer', f'echo "$*" >> {calls}\n[ "$1" = exec ] && exit 0\nexit 1\n')
    # srun --version, which ReFrame's srun launcher asks when it is made
    tool(tmp_path, 'srun', 'echo "slurm 22.05.8"\n')
    monkeypatch.setenv('PATH', f'{tmp_path}:{os.environ["PATH"]}')
    stacks = probe_images(str(images), ['image', 'installed'], {
        'mpich-4.0': failed('mpicc.mpich: not on PATH'),
        'mpich-5.0': failed('/opt/mpi-testbed/stacks/mpich-5.0/bin/mpicc: not on PATH'),
        'lam-7.1': worked()})
    assert calls.read_text() == f'exec {images}/mpich-4.0.sif sh -c command -v mpicc.mpich\n'
    (fake / 'probe-compute.json').write_text(json.dumps(probe_found(stacks=stacks)))
    (fake / 'probe-compute.json').chmod(0o644)
    # the probe's spec, as the fake salloc got it
    spec_dir = fake / 'spec'
    spec_dir.mkdir(mode=0o777)
    spec_dir.chmod(0o777)
    (fake / 'bin' / 'salloc').write_text((fake / 'bin' / 'salloc').read_text().replace(
        '#!/bin/sh\n', f'#!/bin/sh\nfor a; do last=$a; done; printf %s "$last" > {spec_dir}/spec\n'))
    out = fake / 'made-up-site.py'
    relative = os.path.relpath(images)
    assert not os.path.isabs(relative)
    proc = make_site_run(fake, '--out', str(out), '--partitions', 'compute',
                         '--stacks', 'mpich-4.0,mpich-5.0,lam-7.1', '--provide', 'image,installed',
                         '--sif-dir', relative)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text
    # the probe got SIF_DIR absolute: it runs in another folder, on a node
    assert json.loads((spec_dir / 'spec').read_text())['sif_dir'] == str(images)
    assert 'compute: mpich-4.0 (image), lam-7.1 (installed)' in proc.stdout
    assert (f'skip stack mpich-5.0 on partition compute: image: no image {images}/mpich-5.0.sif '
            f'(pull it: make pull-images REGISTRY_URL=docker://HOST:PORT|oras://HOST/ORG '
            f'SIF_DIR={images} STACKS=mpich-5.0; docs/apptainer.md); installed: '
            f'/opt/mpi-testbed/stacks/mpich-5.0/bin/mpicc: not on PATH') in proc.stdout

    system, environments = load(out, monkeypatch)
    parts = {p['name']: p for p in system['partitions']}
    assert sorted(parts) == ['compute', 'compute_image']
    assert parts['compute']['environs'] == ['lam-7_1']
    image_part = parts['compute_image']
    assert image_part['environs'] == ['mpich-4_0'] and image_part['launcher'] == 'srun'
    assert image_part['extras']['container_engine'] == 'apptainer'
    assert image_part['extras']['container_images'] == {'mpich-4.0': f'{images}/mpich-4.0.sif'}
    envs = {e['name']: e for e in environments}
    assert envs['mpich-4_0']['extras']['provided_by'] == 'image'
    assert envs['mpich-4_0']['target_systems'] == ['fakecluster:compute_image']

    stage = tmp_path / 'stage'
    stage.mkdir()
    line, cc = rank_line(image_part, envs['mpich-4_0'], stage)
    assert line.split() == ['srun', '--mpi=pmi2', 'apptainer', 'exec',
                            f'{images}/mpich-4.0.sif', './p2p', '--pair', 'Send-Recv']
    assert cc == f'apptainer exec {images}/mpich-4.0.sif mpicc.mpich'


def test_the_fallback_stacks_stay_out_of_the_image_route(tmp_path):
    """LAM and PVM: make site's image route never takes them (their launcher and daemons
    would have to run from the image, which the launch plan does only with podman); their
    .sif is not even looked at."""
    from testbed_site import make_site
    reg = registry.load()
    for name in ('lam-7.1', 'pvm-3.4', 'lam-7.1-src'):
        (tmp_path / f'{name}.sif').write_text('')
        assert make_site.route_image(reg.stacks[name], {'sif_dir': str(tmp_path)}) == \
            (None, 'the fallback launcher and its daemons run on the node, not in the image '
                   '(only the ranks do): another route must provide the stack there')
