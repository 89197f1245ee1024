"""The stack registry: the real file loads, and every malformed entry names file and field."""
import pytest

from testbed import registry

REAL = registry.DEFAULT_FILE


def test_real_registry_loads_and_every_stack_is_usable():
    """No list of stacks here: adding one is a registry entry and nothing else."""
    reg = registry.load(REAL)
    assert reg.stacks
    environs = [s.environ for s in reg.stacks.values()]
    assert len(set(environs)) == len(environs), 'two stacks share a ReFrame environment name'
    for stack in reg.stacks.values():
        assert stack.features, f'{stack.name}: no features, so no test selects it'
        assert stack.environ.replace('_', '.') == stack.name.replace('_', '.')
        assert '.' not in stack.environ
        assert stack.origin in registry.ORIGINS
        if stack.origin == 'source':
            assert stack.source and stack.configure, stack.name


def test_launch_command_renders_prefix_ntasks_and_knob_defaults():
    reg = registry.load(REAL)
    lam = reg.stacks['lam-7.1']
    assert lam.launch_command(2) == ['mpirun.lam', '-np', '2']
    # LAM's knobs travel in the environment (SSI parameters), as every other stack's
    assert lam.knob_settings({'transport': 'tcp', 'tcp_socket_buffer': '262144'}) == (
        {'LAM_MPI_SSI_rpi': 'tcp', 'LAM_MPI_SSI_rpi_tcp_sockbuf': '262144'}, [])
    assert lam.knob_settings()[0] == {'LAM_MPI_SSI_rpi': 'usysv'}
    mpich5 = reg.stacks['mpich-5.0']
    assert mpich5.launch_command(2)[0] == f'{reg.prefix_root}/mpich-5.0/bin/mpiexec'
    assert reg.stacks['intel-mpi-2021'].environment['I_MPI_ROOT'] == \
        f'{reg.prefix_root}/intel-mpi-2021'


def test_knob_errors_name_the_knob_and_the_choices():
    lam = registry.load(REAL).stacks['lam-7.1']
    with pytest.raises(KeyError, match="no value 'gm'.*lamd, sysv, tcp, usysv"):
        lam.launch_command(2, {'transport': 'gm'})
    with pytest.raises(KeyError, match="no knob 'colour'"):
        lam.launch_command(2, {'colour': 'red'})


def test_unknown_stack_name_is_an_error_naming_it():
    reg = registry.load(REAL)
    with pytest.raises(registry.RegistryError, match="TESTBED_STACKS: unknown stack 'mpich-9'"):
        reg.select('mpich-4.0,mpich-9')
    assert [s.name for s in reg.select('lam-7.1')] == ['lam-7.1']


GOOD = '''
[stacks."x-1.0"]
family = "mpich"
origin = "debian"
packages = ["x"]
cc = "mpicc.x"
launcher = ["mpiexec.x", "-n", "{ntasks}"]
'''


@pytest.mark.parametrize('edit, field, message', [
    (lambda t: t.replace('family = "mpich"', 'family = "mpi-ch"'),
     'stacks.x-1.0.family', 'is not one of'),
    (lambda t: t.replace('cc = "mpicc.x"\n', ''), 'stacks.x-1.0.cc', 'missing'),
    (lambda t: t.replace('packages = ["x"]', 'packages = "x"'),
     'stacks.x-1.0.packages', 'expected a list'),
    (lambda t: t.replace('"{ntasks}"', '"2"'), 'stacks.x-1.0.launcher', 'must contain {ntasks}'),
    (lambda t: t + 'boot = ["xboot"]\n', 'stacks.x-1.0.halt', 'boot and halt go together'),
    (lambda t: t + 'colour = "red"\n', 'stacks.x-1.0.colour', 'unknown field'),
    (lambda t: t + '[stacks."x-1.0".knobs.transport]\ndefault = "ib"\nvalues.shm = {}\n',
     'stacks.x-1.0.knobs.transport.default', "'ib' is not one of its values"),
    (lambda t: t + '[stacks."x-1.0".knobs.eager]\nenv = { X = "1" }\n',
     'stacks.x-1.0.knobs.eager', 'needs {value}'),
    (lambda t: t.replace('origin = "debian"', 'origin = debian'), 'not valid TOML', 'line'),
    # origins: each needs its own fields and refuses another origin's
    (lambda t: t.replace('packages = ["x"]\n', ''), 'stacks.x-1.0.packages',
     "missing (origin 'debian' needs: packages)"),
    (lambda t: t.replace('origin = "debian"', 'origin = "source"'), 'stacks.x-1.0.source',
     "missing (origin 'source' needs: source, configure)"),
    (lambda t: t.replace('origin = "debian"', 'origin = "source"\nsource = "x"'),
     'stacks.x-1.0.configure', 'missing'),
    (lambda t: t.replace('origin = "debian"', 'origin = "prefix"'), 'stacks.x-1.0.prefix',
     "missing (origin 'prefix' needs: prefix)"),
    (lambda t: t.replace('origin = "debian"', 'origin = "prefix"\nprefix = "opt/x"'),
     'stacks.x-1.0.prefix', 'not an absolute path'),
    (lambda t: t + 'prefix = "/opt/x"\n', 'stacks.x-1.0.prefix',
     "not a field of origin 'debian' (only of: prefix)"),
    (lambda t: t + 'source = "x"\n', 'stacks.x-1.0.source', "not a field of origin 'debian'"),
    (lambda t: t.replace('origin = "debian"', 'origin = "source"\nsource = "x"\n'
                         'configure = []\npatches = ["site/patches/none.patch"]'),
     'stacks.x-1.0.patches[0]', "no file 'site/patches/none.patch'"),
    (lambda t: t + 'configure = "--x"\n', 'stacks.x-1.0.configure', 'expected a list'),
    (lambda t: t + 'features = ["mpi", "no-hlp"]\n', 'stacks.x-1.0.features[1]',
     "'no-hlp' opts out of no test family"),
    # the fallback launch: a host file named, a host line that sed can write safely
    (lambda t: t + 'fallback_env = { X_AGENT = "{agent}" }\n', 'stacks.x-1.0.fallback_env',
     'no variable names {hostfile}'),
    (lambda t: t + 'fallback_hostline = "node slots=1"\n', 'stacks.x-1.0.fallback_hostline',
     'must contain {host}'),
    (lambda t: t + 'fallback_hostline = "{host}/s;x"\n', 'stacks.x-1.0.fallback_hostline',
     'only letters, digits'),
    # per-stack facts: peers and calls a stack skips
    (lambda t: t + 'peers = { NPfoo = {} }\n', 'stacks.x-1.0.peers.NPfoo', 'unknown peer'),
    (lambda t: t + 'peers = { imb = { "libmpi.so.12" = "lib/libmpi.so.12" } }\n',
     'stacks.x-1.0.peers.imb.libmpi.so.12', 'not an absolute path'),
    (lambda t: t + 'peers = { imb = { "mpi" = "/x" } }\n', 'stacks.x-1.0.peers.imb.mpi',
     'not a shared library name'),
    (lambda t: t + 'skip_calls = { MPI_Send = "no" }\n', 'stacks.x-1.0.skip_calls.MPI_Send',
     'not a call any test skips'),
    (lambda t: t + 'skip_calls = { MPI_Win_flush = " " }\n',
     'stacks.x-1.0.skip_calls.MPI_Win_flush', 'say why'),
])
def test_malformed_entry_names_file_and_field(tmp_path, edit, field, message):
    path = tmp_path / 'stacks.toml'
    path.write_text(edit(GOOD))
    with pytest.raises(registry.RegistryError) as err:
        registry.load(path)
    text = str(err.value)
    assert text.startswith(f'{path}: ')
    assert field in text and message in text


def test_fallback_settings_fill_agent_hostfile_and_job(tmp_path):
    path = tmp_path / 'stacks.toml'
    path.write_text(GOOD + 'fallback_env = { X_RSH = "{agent}", X_HOSTS = "{hostfile}", '
                           'X_ID = "t{job}" }\nfallback_hostline = "{host} cpu=1"\n')
    stack = registry.load(path).stacks['x-1.0']
    assert stack.fallback_settings('/a/agent', '/s/hosts') == {
        'X_RSH': '/a/agent', 'X_HOSTS': '/s/hosts', 'X_ID': f't{registry.JOB_PID}'}
    assert stack.fallback_hostline == '{host} cpu=1'
    assert stack.fallback_hostfile_command('hosts') == (
        'scontrol show hostnames "$SLURM_JOB_NODELIST" | sed \'s/.*/& cpu=1/\' > hosts')
    # the fallback leaves out the launcher options (they bind to one machine's cores)
    path.write_text(GOOD + 'launcher_options = ["-bind-to", "core"]\n')
    stack = registry.load(path).stacks['x-1.0']
    assert stack.launch_command(2, options=False) == ['mpiexec.x', '-n', '2']
    assert stack.launch_command(2)[-2:] == ['-bind-to', 'core']


def test_good_minimal_entry_loads(tmp_path):
    path = tmp_path / 'stacks.toml'
    path.write_text(GOOD)
    stack = registry.load(path).stacks['x-1.0']
    assert stack.launch_command(3) == ['mpiexec.x', '-n', '3']
    assert stack.environ == 'x-1_0'


def test_origins_source_and_prefix(tmp_path):
    path = tmp_path / 'stacks.toml'
    path.write_text(GOOD.replace('origin = "debian"\npackages = ["x"]',
                                 'origin = "prefix"\nprefix = "/opt/x-site"')
                    .replace('"mpicc.x"', '"{prefix}/bin/mpicc"') +
                    'boot = ["{prefix}/bin/xboot"]\nhalt = ["{prefix}/bin/xhalt"]\n'
                    '[stacks."y-2"]\nfamily = "lam"\norigin = "source"\nsource = "y"\n'
                    'configure = ["--with-rsh=ssh -x", "--enable-shared"]\ncc = "{prefix}/cc"\n'
                    'launcher = ["{prefix}/run", "{ntasks}"]\n')
    reg = registry.load(path)
    x, y = reg.stacks['x-1.0'], reg.stacks['y-2']
    # a site's prefix is used as it is; a source build goes under the stacks root
    assert x.prefix == '/opt/x-site' and x.compiler == '/opt/x-site/bin/mpicc'
    assert x.boot == ('/opt/x-site/bin/xboot',)
    assert y.prefix == f'{reg.prefix_root}/y-2' and y.packages == ()
    assert y.configure == ('--with-rsh=ssh -x', '--enable-shared')


def test_missing_file(tmp_path):
    with pytest.raises(registry.RegistryError, match='no such file'):
        registry.load(tmp_path / 'nope.toml')


# --- values go into job scripts: quoted there, control characters refused at load ----------

@pytest.mark.parametrize('extra, field', [
    ('env = { X = "a\\nb" }\n', 'stacks.x-1.0.env.X'),
    ('env = { X = "a\\u0000b" }\n', 'stacks.x-1.0.env.X'),
    ('launcher_options = ["--x", "a\\u001bb"]\n', 'stacks.x-1.0.launcher_options[1]'),
    ('boot = ["xboot\\t-v"]\nhalt = ["xhalt"]\n', 'stacks.x-1.0.boot[0]'),
    ('[stacks."x-1.0".knobs.t]\nvalues.a = { env = { Y = "1\\r" } }\n',
     'stacks.x-1.0.knobs.t.values.a.env.Y'),
])
def test_control_characters_are_refused_naming_file_and_field(tmp_path, extra, field):
    path = tmp_path / 'stacks.toml'
    path.write_text(GOOD + extra)
    with pytest.raises(registry.RegistryError, match='control character') as err:
        registry.load(path)
    assert str(err.value).startswith(f'{path}: {field}: ')


def test_env_name_that_is_no_shell_name_is_refused(tmp_path):
    path = tmp_path / 'stacks.toml'
    path.write_text(GOOD + 'env = { "A;B" = "1" }\n')
    with pytest.raises(registry.RegistryError, match='not a valid environment variable name'):
        registry.load(path)


def sh(script):
    import subprocess
    return subprocess.run(['sh', '-c', script], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.parametrize('value', ['a b', "it's", 'x;rm -rf /tmp/nope', '$HOME', '`id`',
                                   '"q"', 'tab\\', '*', ''])
def test_quoted_value_reaches_the_program_unchanged(value):
    assert sh(f'export K={registry.shell_word(value)}; printf %s "$K"') == value
    assert sh(f'printf "%s|" {registry.shell_join(["a", value, "b c"])}') == f'a|{value}|b c|'


def test_job_pid_stays_live_in_lam_session_suffix():
    lam = registry.load(REAL).stacks['lam-7.1']
    word = registry.shell_word(lam.environment['LAM_MPI_SESSION_SUFFIX'])
    assert word == 'testbed$$'
    out = sh(f'export K={word}; printf "%s %s" "$K" "$$"').split()
    assert out[0] == f'testbed{out[1]}'
    # the rest of a value around $$ is quoted, $$ itself is not
    value, pid = sh(f'printf "%s|%s" {registry.shell_word("a b$$c;")} "$$"').split('|')
    assert value == f'a b{pid}c;'


def test_knob_value_with_control_character_is_refused():
    lam = registry.load(REAL).stacks['lam-7.1']
    with pytest.raises(KeyError, match='control character'):
        lam.launch_command(2, {'tcp_socket_buffer': '1\n2'})


def test_fallback_launch_writes_the_host_file_line_once(tmp_path):
    """su3_rmd's 1-rank baseline and its main launch both go through fallback_launch."""
    from types import SimpleNamespace
    from testbed.launch import fallback_launch
    path = tmp_path / 'stacks.toml'
    path.write_text(GOOD + 'fallback_env = { X_HOSTS = "{hostfile}" }\n'
                           'fallback_hostline = "{host}"\n')
    reg = registry.load(path)
    stack = reg.stacks['x-1.0']
    test = SimpleNamespace(current_partition=SimpleNamespace(extras={'fallback_agent': '/a'}),
                           stagedir=str(tmp_path), env_vars={}, prerun_cmds=['echo first'],
                           knobs={})
    assert fallback_launch(test, reg, stack, 1) == ['mpiexec.x', '-n', '1']
    assert fallback_launch(test, reg, stack, 2) == ['mpiexec.x', '-n', '2']
    assert test.prerun_cmds == [stack.fallback_hostfile_command('fallback-hosts'), 'echo first']
    assert test.env_vars['X_HOSTS'].endswith('fallback-hosts')


def test_an_mpich_abi_stack_gets_imb_and_netpipe_on_its_own_library(tmp_path):
    # a site's MVAPICH2 declared by one entry gets the peers every MPICH-ABI stack runs
    path = tmp_path / 'stacks.toml'
    path.write_text(GOOD.replace('origin = "debian"\npackages = ["x"]',
                                 'origin = "prefix"\nprefix = "/opt/mv2"') +
                    'features = ["mpi", "mpich-abi"]\n')
    stack = registry.load(path).stacks['x-1.0']
    assert stack.peers == {'imb': {'libmpi.so.12': '/opt/mv2/lib/libmpi.so.12'},
                           'NPmpich2': {'libmpich.so.12': '/opt/mv2/lib/libmpi.so.12'}}
    path.write_text(path.read_text() + 'peers = {}\n')          # none, said explicitly
    assert registry.load(path).stacks['x-1.0'].peers == {}
    path.write_text(GOOD)
    assert registry.load(path).stacks['x-1.0'].peers == {}


@pytest.mark.parametrize('block, field, message', [
    ('package = "mpich"\nversion = "4"\nread_from = "x"\nvariants = []\n',
     'spack_build.variants', 'expected a list of ["variant", "why"] pairs'),
    ('package = "mpich"\nversion = "4"\nread_from = "x"\nvariants = [["+slurm"]]\n',
     'spack_build.variants', 'expected a list'),
    ('package = "mpich"\nread_from = "x"\nvariants = [["+slurm", "y"]]\n',
     'spack_build.version', 'expected a non-empty string'),
    ('package = "mpich"\nversion = "4"\nread_from = "x"\nvariants = [["+a", "b"]]\nx = 1\n',
     'spack_build.x', 'unknown field'),
])
def test_a_bad_spack_build_names_its_field(tmp_path, block, field, message):
    path = tmp_path / 'stacks.toml'
    path.write_text(GOOD + '[stacks."x-1.0".spack_build]\n' + block)
    with pytest.raises(registry.RegistryError) as err:
        registry.load(path)
    assert f'stacks.x-1.0.{field}' in str(err.value) and message in str(err.value)
