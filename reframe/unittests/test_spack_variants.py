"""The registry's configure flags as Spack variants (site/stacks.toml, [spack_variants.FAMILY];
site/generate.py writes them into spack-envs/<stack>/spack.yaml): every flag of every stack maps
to variants or to a named "no variant" line, an unknown flag is a one-line error saying where
to add it, every environment has a view of its own, and the docs' MVAPICH2 example generates
the sock build. Runs no Spack."""
import dataclasses
import importlib.util
import re
import subprocess
import sys

import pytest

from testbed import registry

GENERATE = registry.REPO / 'site' / 'generate.py'
DOCS_EXAMPLE = registry.REPO / 'docs' / 'adding-a-stack.md'


def generator():
    spec = importlib.util.spec_from_file_location('testbed_generate', GENERATE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mpi_spec_line(text):
    """The environment's first spec: the library with its variants."""
    return next(line[4:] for line in text.splitlines() if line.startswith('  - '))


def test_every_registry_flag_is_a_variant_in_the_spec_or_a_named_no_variant_line():
    gen, reg = generator(), registry.load(registry.DEFAULT_FILE)
    flagged = [s for s in reg.stacks.values() if s.configure and not s.spack_build]
    assert flagged, 'no stack with configure flags left to check'
    for stack in flagged:
        text = gen.spack_yaml(reg, stack)
        spec = mpi_spec_line(text).split()
        package, flags = reg.spack_flags(stack)
        assert spec[0] == f'{package}@={stack.version}', stack.name
        assert [f for f, _, _ in flags] == list(stack.configure), stack.name
        for flag, variants, reason in flags:
            if variants:
                assert set(variants.split()) <= set(spec[1:]), (stack.name, flag)
                assert re.search(rf'^  #   {re.escape(variants)} +{re.escape(flag)}$', text,
                                 re.M), (stack.name, flag)
            else:
                # named in the file, with the package and why; nothing added to the spec
                assert f'#   (no variant)               {flag}: {package} has none' in text, \
                    (stack.name, flag)
                assert reason


def test_the_tables_name_a_known_family_and_well_formed_variants():
    reg = registry.load(registry.DEFAULT_FILE)
    assert set(reg.spack_variants) <= registry.FAMILIES
    for family, table in reg.spack_variants.items():
        for flag, (variants, reason) in table.flags.items():
            assert flag.startswith('--'), (family, flag)
            # variants or a reason, never both; each variant is +x, ~x or name=value
            assert bool(variants) != bool(reason), (family, flag)
            for v in variants.split():
                assert re.fullmatch(r'[+~][\w-]+|[\w-]+=[\w:,.-]+', v), (family, flag, v)


def test_mpich_ch3sock_gets_the_sock_device_and_no_libfabric():
    gen, reg = generator(), registry.load(registry.DEFAULT_FILE)
    spec = mpi_spec_line(gen.spack_yaml(reg, reg.stacks['mpich-4.0-ch3sock']))
    # device=ch3 would be ch3:nemesis (shared memory inside a node); netmod=tcp keeps the
    # recipe's default ofi, and with it libfabric, out of a build that never uses it
    assert spec == 'mpich@=4.0.2 device=ch3:sock netmod=tcp ~fortran ~romio'


def test_unknown_flag_is_one_line_error_naming_file_stack_field_and_fix():
    reg = registry.load(registry.DEFAULT_FILE)
    stack = reg.stacks['mpich-4.0-ch3sock']
    odd = dataclasses.replace(stack, configure=(*stack.configure, '--enable-g=dbg'))
    with pytest.raises(registry.RegistryError) as err:
        reg.spack_flags(odd)
    message = str(err.value)
    assert '\n' not in message
    assert message.startswith(f'{registry.DEFAULT_FILE}: stacks.mpich-4.0-ch3sock.configure[4]: '
                              "'--enable-g=dbg' is not in spack_variants.mpich.flags")
    assert 'add "--enable-g=dbg" = "<variants of mpich>"' in message
    assert '{ none = "<why>" }' in message


def registry_copy(tmp_path, extra):
    copy = tmp_path / 'stacks.toml'
    copy.write_text(registry.DEFAULT_FILE.read_text() + extra)
    return copy


def test_generate_stops_on_an_unknown_flag_and_writes_nothing(tmp_path):
    copy = registry_copy(tmp_path, '''
[stacks."mpich-4.0-g"]
family = "mpich"
version = "4.0.2"
origin = "prefix"
prefix = "/opt/mpich-g"
configure = ["--with-device=ch3:sock", "--enable-g=dbg"]
cc = "{prefix}/bin/mpicc"
launcher = ["{prefix}/bin/mpiexec", "-n", "{ntasks}"]
''')
    root = tmp_path / 'root'
    out = subprocess.run([sys.executable, str(GENERATE), '--registry', str(copy),
                          '--root', str(root)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"error: {copy}: stacks.mpich-4.0-g.configure[1]: '--enable-g=dbg' is not in "
        'spack_variants.mpich.flags (add "--enable-g=dbg" = "<variants of mpich>" there, or '
        '{ none = "<why>" } if it has none)']
    assert not root.exists()


def test_family_without_a_table_is_an_error_naming_the_table(tmp_path):
    text = registry.DEFAULT_FILE.read_text()
    text = text[:text.index('[spack_variants.lam]')] + text[text.index('[spack_variants.openmpi]'):]
    copy = tmp_path / 'stacks.toml'
    copy.write_text(text)
    reg = registry.load(copy)
    with pytest.raises(registry.RegistryError, match=re.escape(
            f"{copy}: stacks.lam-7.1-src.configure: family 'lam' has no [spack_variants.lam] "
            'table (add one')):
        reg.spack_flags(reg.stacks['lam-7.1-src'])


@pytest.mark.parametrize('extra, field', [
    ('[spack_variants.mpich2]\npackage = "mpich"\n', 'spack_variants.mpich2'),
    ('[spack_variants.openmpi.flags]\n"--with-slurm" = 1\n',
     'spack_variants.openmpi.flags."--with-slurm"'),
    ('[spack_variants.openmpi.flags]\n"--with-slurm" = { because = "x" }\n',
     'spack_variants.openmpi.flags."--with-slurm"'),
    ('[spack_variants.openmpi.flags]\n"--with-slurm" = ""\n',
     'spack_variants.openmpi.flags."--with-slurm"'),
])
def test_malformed_table_names_the_field(tmp_path, extra, field):
    # the openmpi table exists already: add flags to it by rewriting its header
    text = registry.DEFAULT_FILE.read_text()
    if extra.startswith('[spack_variants.openmpi.flags]'):
        text = text.replace('[spack_variants.openmpi]\npackage = "openmpi"\n',
                            '[spack_variants.openmpi]\npackage = "openmpi"\n' + extra)
    else:
        text += extra
    copy = tmp_path / 'stacks.toml'
    copy.write_text(text)
    with pytest.raises(registry.RegistryError, match=re.escape(f'{copy}: {field}: ')):
        registry.load(copy)


def test_every_environment_has_a_view_of_its_own():
    yaml = pytest.importorskip('yaml')      # ReFrame's own dependency; skipped without it
    roots = {}
    reg = registry.load(registry.DEFAULT_FILE)
    for name in reg.stacks:
        env_dir = registry.REPO / 'spack-envs' / name
        view = yaml.safe_load((env_dir / 'spack.yaml').read_text())['spack']['view']['default']
        # relative: Spack takes it from the environment's folder, so it stays inside it
        assert not view['root'].startswith('/'), name
        root = (env_dir / view['root']).resolve()
        assert root.is_relative_to(env_dir.resolve()), name
        assert view['link'] == 'roots', name
        roots[root] = name
    assert len(roots) == len(reg.stacks)            # no two environments share a view


def docs_mvapich2_entry():
    """The registry entry docs/adding-a-stack.md shows, as it stands there."""
    text = DOCS_EXAMPLE.read_text()
    block = re.search(r'```toml\n(\[stacks\."mvapich2-2\.3"\].*?)```', text, re.S)
    assert block, f'{DOCS_EXAMPLE}: no ```toml block with [stacks."mvapich2-2.3"]'
    return block.group(1)


def test_docs_mvapich2_example_generates_the_sock_build(tmp_path):
    gen = generator()
    entry = docs_mvapich2_entry()
    assert 'configure = ["--with-device=ch3:sock"]' in entry
    reg = registry.load(registry_copy(tmp_path, '\n' + entry))
    text = gen.spack_yaml(reg, reg.stacks['mvapich2-2.3'])
    # not the recipe's default fabrics=mrail (InfiniBand): the build the entry declares
    assert mpi_spec_line(text) == 'mvapich2@=2.3.7 fabrics=sock'
    assert re.search(r'^  #   fabrics=sock +--with-device=ch3:sock$', text, re.M)
    assert '- mpi-testbed-apps ^mvapich2' in text
