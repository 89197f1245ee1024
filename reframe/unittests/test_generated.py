"""The generated Spack environments and container definitions (site/generate.py) match the
registry: a stale file in the repository fails `make test`, and a stack added to or removed from
a registry copy is reported as a missing or orphaned file by name. Writes only under tmp_path;
runs no Spack, Podman or Apptainer."""
import shutil
import subprocess
import sys
import tomllib

import pytest

from testbed import registry

GENERATE = registry.REPO / 'site' / 'generate.py'
REPO_DIR = 'spack-envs/repo'     # the hand-written recipes (LAM, the apps), copied along
APPS_RECIPE = 'spack-envs/repo/spack_repo/mpi_testbed/packages/mpi_testbed_apps/package.py'


def generate(*args):
    return subprocess.run([sys.executable, str(GENERATE), *args], capture_output=True,
                          text=True, timeout=60)


def test_repository_files_are_current():
    out = generate('--check')
    assert out.returncode == 0, 'generated files out of date; run `make generate`:\n' + out.stderr


def registry_copy(tmp_path, edit):
    """A copy of site/stacks.toml with `edit` applied to its text, and an output root that
    holds the files generated from the real registry."""
    root = tmp_path / 'root'
    shutil.copytree(registry.REPO / REPO_DIR, root / REPO_DIR)
    assert generate('--root', str(root)).returncode == 0
    copy = tmp_path / 'stacks.toml'
    copy.write_text(edit(registry.DEFAULT_FILE.read_text()))
    tomllib.loads(copy.read_text())                  # the edit left valid TOML
    return copy, root


def test_added_stack_is_reported_missing_by_file(tmp_path):
    added = '''
[stacks."mpich-4.3"]
family = "mpich"
origin = "pypi"
packages = ["mpich==4.3.2"]
cc = "{prefix}/bin/mpicc"
launcher = ["{prefix}/bin/mpiexec", "-n", "{ntasks}"]
srun_mpi = "pmi2"
'''
    copy, root = registry_copy(tmp_path, lambda text: text + added)
    out = generate('--check', '--registry', str(copy), '--root', str(root))
    assert out.returncode == 1
    for rel in ['spack-envs/mpich-4.3/spack.yaml', 'containers/mpich-4.3/Containerfile',
                'containers/mpich-4.3/apptainer.def']:
        assert f'missing: {rel}' in out.stderr
    assert 'stale' not in out.stderr and 'orphan' not in out.stderr
    # generating from the copy writes them, pinned to the wheel's version, and the check passes
    assert generate('--registry', str(copy), '--root', str(root)).returncode == 0
    assert '- mpich@=4.3.2 device=ch4 netmod=ofi' in \
        (root / 'spack-envs/mpich-4.3/spack.yaml').read_text()
    assert 'testbed.install --image --stacks mpich-4.3' in \
        (root / 'containers/mpich-4.3/Containerfile').read_text()
    assert generate('--check', '--registry', str(copy), '--root', str(root)).returncode == 0


def test_removed_stack_is_reported_orphan_by_folder(tmp_path):
    def drop_lam(text):
        start = text.index('[stacks."lam-7.1"]')
        return text[:start] + text[text.index('[stacks."mpich-5.0"]'):]
    copy, root = registry_copy(tmp_path, drop_lam)
    out = generate('--check', '--registry', str(copy), '--root', str(root))
    assert out.returncode == 1
    assert 'orphan: spack-envs/lam-7.1/' in out.stderr
    assert 'orphan: containers/lam-7.1/' in out.stderr
    assert 'missing' not in out.stderr


def test_edited_file_is_stale_and_cluster_state_is_not_an_orphan(tmp_path):
    copy, root = registry_copy(tmp_path, lambda text: text)
    env = root / 'spack-envs/mpich-4.0'
    (env / 'spack.lock').write_text('{}')            # what `spack concretize` leaves there
    (env / '.spack-env').mkdir()
    (root / 'containers/mpich-4.0/Containerfile').write_text('FROM scratch\n')
    out = generate('--check', '--registry', str(copy), '--root', str(root))
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        'stale: containers/mpich-4.0/Containerfile (differs from what site/generate.py writes '
        f'from {copy}; run make generate)']


def test_spack_environments_parse_and_pin_the_shared_choices():
    yaml = pytest.importorskip('yaml')      # ReFrame's own dependency; skipped without it
    for path in sorted(registry.REPO.glob('spack-envs/*/spack.yaml')):
        env = yaml.safe_load(path.read_text())['spack']
        # one MPI per environment, then the testbed's programs (and HPL) built against it
        assert [s.split()[0].split('@')[0] for s in env['specs'][1:]] in (
            ['mpi-testbed-apps'], ['mpi-testbed-apps', 'hpl']), path
        assert env['view']['default']['root'] and env['concretizer']['unify'] is True, path
        # the library pinned to exactly one version (@=), never a range (@4.0.2 takes 4.0.2.1)
        assert '@=' in env['specs'][0].split()[0], path
        assert env['packages']['all']['require'] == ['target=x86_64_v3'], path
        for external in ('slurm', 'pmix', 'gcc'):
            assert env['packages'][external]['buildable'] is False, path


def recipe_constant(name):
    """A module-level constant of the hand-written apps recipe, read without Spack."""
    import ast
    tree = ast.parse((registry.REPO / APPS_RECIPE).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == [name]:
            return ast.literal_eval(node.value)
    raise AssertionError(f'{APPS_RECIPE}: no {name}')


def test_apps_spec_builds_against_each_stacks_library_from_this_checkout():
    yaml = pytest.importorskip('yaml')
    reg = registry.load(registry.DEFAULT_FILE)
    extra = recipe_constant('EXTRA_SOURCES')
    for stack in reg.stacks.values():
        env_dir = registry.REPO / 'spack-envs' / stack.name
        env = yaml.safe_load((env_dir / 'spack.yaml').read_text())['spack']
        mpi = env['specs'][0].split()[0].split('@')[0]
        apps = env['specs'][1]
        if stack.family == 'pvm':
            assert apps == f'mpi-testbed-apps +pvm ^{mpi}', stack.name
        else:
            assert apps == f'mpi-testbed-apps ^{mpi}', stack.name
            # the registry's extra sources are the ones the recipe links in for that library
            assert tuple(stack.extra_sources) == extra.get(mpi, ()), stack.name
        assert ('hpl@2.3 ^openblas threads=none' in env['specs']) == \
            (stack.family != 'pvm' and 'no-hpl' not in stack.features), stack.name
        # the develop path is the repository root, the repos path the recipes' repository
        develop = env['develop']['mpi-testbed-apps']
        assert develop['spec'] == 'mpi-testbed-apps@develop'
        assert (env_dir / develop['path']).resolve() == registry.REPO, stack.name
        recipes = (env_dir / env['repos']['mpi_testbed']).resolve()
        assert (recipes / 'packages/mpi_testbed_apps/package.py').is_file(), stack.name
        assert env['config']['develop_stage_link'].startswith(f'spack-envs/{stack.name}/')


def test_apps_recipe_builds_every_mpi_program_of_apps():
    programs = recipe_constant('MPI_PROGRAMS')
    for program in programs:
        makefile = (registry.REPO / 'apps' / program / 'Makefile').read_text()
        assert f'\n{program}:' in makefile, program      # the target the recipe makes
    for folder in recipe_constant('FOLDERS'):
        assert (registry.REPO / 'apps' / folder).is_dir(), folder


def test_missing_apps_recipe_is_reported(tmp_path):
    copy, root = registry_copy(tmp_path, lambda text: text)
    (root / APPS_RECIPE).unlink()
    out = generate('--check', '--registry', str(copy), '--root', str(root))
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        f'missing: {APPS_RECIPE} (every environment needs it; written by hand)']


def test_a_prefix_stack_gets_no_image_and_says_so(tmp_path):
    """A stack a site installed under a prefix: its Spack environment (the prefix as an
    external) but no Containerfile that would fail when built; one line says why, and a
    folder left in containers/ for it is an orphan."""
    added = '''
[stacks."site-mpich"]
family = "mpich"
origin = "prefix"
prefix = "/opt/site-mpich"
cc = "{prefix}/bin/mpicc"
launcher = ["{prefix}/bin/mpiexec", "-n", "{ntasks}"]
'''
    copy, root = registry_copy(tmp_path, lambda text: text + added)
    out = generate('--registry', str(copy), '--root', str(root))
    assert out.returncode == 0, out.stderr
    assert 'no image for site-mpich: origin prefix is not installed by install.py inside an ' \
        'image (only debian, pypi, source)' in out.stdout
    assert (root / 'spack-envs/site-mpich/spack.yaml').is_file()
    assert not (root / 'containers/site-mpich').exists()
    (root / 'containers/site-mpich').mkdir()
    out = generate('--check', '--registry', str(copy), '--root', str(root))
    assert out.returncode == 1
    assert 'orphan: containers/site-mpich/ (origin prefix gets no image; remove the folder)' \
        in out.stderr
