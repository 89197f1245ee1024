"""The stack registry (site/stacks.toml): load, validate, and render launch commands.

Every other part of the testbed (installer, ReFrame site configuration, tests, reports) reads
the stacks through this module, so a malformed entry is reported once, here, with the file and
the field that is wrong.
"""
import os
import re
import shlex
import sysconfig
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_FILE = REPO / 'site' / 'stacks.toml'

FAMILIES = {'mpich', 'openmpi', 'lam', 'intel-mpi', 'pvm', 'mvapich2'}
# How this system gets a stack (the library itself is family, version and configure flags).
# Each origin names the fields it needs; a field of another origin is refused, so a mistake
# such as `prefix` on a Debian stack is reported rather than ignored.
ORIGIN_FIELDS = {
    'debian': {'required': ('packages',), 'allowed': ()},
    'pypi': {'required': ('packages',), 'allowed': ()},
    # built by the installer (testbed/source_build.py) from Debian's orig tarball of the
    # source package `source`, with `configure` and the project's `patches`; `packages` are
    # extra Debian packages the build needs
    'source': {'required': ('source', 'configure'), 'allowed': ('patches', 'packages')},
    # installed by a site under `prefix`: the installer only checks it
    'prefix': {'required': ('prefix',), 'allowed': ('packages',)},
    'spack': {'required': ('packages',), 'allowed': ()},          # packages: the Spack spec
    'container': {'required': ('packages',), 'allowed': ()},      # packages: the image
}
ORIGINS = set(ORIGIN_FIELDS)
# Fields that belong to some origins only (see ORIGIN_FIELDS).
ORIGIN_ONLY = ('packages', 'source', 'patches', 'prefix')
# The test families of reframe/tests: each selects '+mpi -no-<family>', so a stack leaves one
# out with the feature no-<family> (a misspelt one would silently opt out of nothing).
TEST_FAMILIES = ('hpl', 'knobs', 'p2p', 'peers', 'startup', 'su3')


class RegistryError(ValueError):
    """A registry file that cannot be used; the message names the file and the field."""


# What {job} becomes: the job script's PID, left for the shell to expand.
JOB_PID = '$$'


def shell_word(text):
    """`text` as one shell word for a job script (env values, launcher arguments): quoted,
    except each '$$' ({job}), which must stay live for the shell to expand."""
    return JOB_PID.join(shlex.quote(part) if part else '' for part in text.split(JOB_PID)) \
        or "''"


def shell_join(argv):
    """An argv as one job-script command line (shell_word for each argument)."""
    return ' '.join(shell_word(a) for a in argv)


# Control characters (newline, NUL, ESC, DEL, ...) have no safe place in a job script line.
_CONTROL = re.compile(r'[\x00-\x1f\x7f]')
_ENV_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')


@dataclass(frozen=True)
class Knob:
    name: str
    default: str | None = None
    unit: str | None = None
    values: dict = field(default_factory=dict)   # NAME -> {'env': {}, 'launcher_options': []}
    env: dict = field(default_factory=dict)      # numeric knob: templates with {value}
    launcher_options: tuple = ()

    def settings(self, value):
        """Return (env, launcher_options) that set this knob to `value`."""
        if self.values:
            if value not in self.values:
                raise KeyError(f'knob {self.name!r} has no value {value!r} '
                               f'(choose from {", ".join(sorted(self.values))})')
            chosen = self.values[value]
            return dict(chosen.get('env', {})), list(chosen.get('launcher_options', []))
        text = str(value)
        if _CONTROL.search(text):
            raise KeyError(f'knob {self.name!r}: value {text!r} holds a control character')
        return ({k: v.replace('{value}', text) for k, v in self.env.items()},
                [o.replace('{value}', text) for o in self.launcher_options])


@dataclass(frozen=True)
class Stack:
    name: str
    family: str
    origin: str
    packages: tuple
    cc: str
    launcher: tuple
    prefix: str
    launcher_options: tuple = ()
    env: dict = field(default_factory=dict)
    features: tuple = ()
    boot: tuple = ()
    halt: tuple = ()
    wipe: tuple = ()
    extra_sources: tuple = ()
    self_bind: bool = False
    knobs: dict = field(default_factory=dict)
    #: how srun starts this stack's ranks on a Slurm partition (pmi2 | pmix), as measured by
    #: site/cluster/launcher_table.py; empty: srun cannot, the stack runs on local partitions
    srun_mpi: str = ''
    #: the fallback where srun cannot start the ranks: the stack's own launcher reaches the
    #: job's other nodes through an rsh-style agent (site/cluster/agent here, ssh on a site).
    #: Environment variables that make it do so: {agent} is the agent, {hostfile} a file the
    #: job writes with one fallback_hostline per node ({host} its name)
    fallback_env: dict = field(default_factory=dict)
    fallback_hostline: str = '{host}'
    #: the library's configure flags: what a source build passes to ./configure; for other
    #: origins what the packager used, when known. Recorded with every result.
    configure: tuple = ()
    #: the library's version as declared ('' if not): a source build checks its tarball
    #: against it, the Spack environment pins it; results carry what the library reports
    version: str = ''
    #: origin source: the Debian source package whose orig tarball is built
    source: str = ''
    #: origin source: the project's patches (paths relative to the repository), in order
    patches: tuple = ()
    #: peer benchmarks that run on this stack (PEER_PROGRAMS), in the order tests prefer
    #: them: {peer: {soname the peer asks for: this stack's file}} (tests/peers.py)
    peers: dict = field(default_factory=dict)
    #: MPI calls this stack must not be asked to make (SKIPPABLE_CALLS): {call: why}
    skip_calls: dict = field(default_factory=dict)
    #: what the generated Spack environment asks for (site/generate.py), when the flags of the
    #: build were read: {package, version, read_from, variants: ((variant, why), ...)}
    spack_build: dict = field(default_factory=dict)

    @property
    def environ(self):
        """ReFrame's name for this stack's environment (ReFrame names allow no dots)."""
        return self.name.replace('.', '_')

    def fallback_settings(self, agent, hostfile):
        """The fallback launch's environment: the agent and the job's host file filled in."""
        return {k: self._expand(v).replace('{agent}', agent).replace('{hostfile}', hostfile)
                for k, v in self.fallback_env.items()}

    def fallback_hostfile_command(self, path):
        """The job-script line that writes the fallback's host file at `path` (relative to the
        job's directory): one fallback_hostline per node of the Slurm job. The line holds plain
        words only (checked when the registry loads), so it goes into sed as it is."""
        line = self.fallback_hostline.replace('{host}', '&')
        return f'scontrol show hostnames "$SLURM_JOB_NODELIST" | sed \'s/.*/{line}/\' > {path}'

    def _expand(self, text):
        # {job} becomes the job script's PID: unique per job, for per-job daemon sessions.
        return text.replace('{prefix}', self.prefix).replace('{job}', JOB_PID)

    @property
    def compiler(self):
        return self._expand(self.cc)

    @property
    def environment(self):
        return {k: self._expand(v) for k, v in self.env.items()}

    def knob_settings(self, chosen=None):
        """Env and launcher options for every knob: its default unless `chosen` names a value."""
        chosen = dict(chosen or {})
        unknown = set(chosen) - set(self.knobs)
        if unknown:
            raise KeyError(f'stack {self.name!r} has no knob {sorted(unknown)[0]!r} '
                           f'(knobs: {", ".join(sorted(self.knobs)) or "none"})')
        env, opts = {}, []
        for name, knob in sorted(self.knobs.items()):
            value = chosen.get(name, knob.default)
            if value is None:
                continue
            e, o = knob.settings(value)
            env.update(e)
            opts += o
        return env, opts

    def launch_command(self, ntasks, knobs=None, options=True):
        """The full launcher argv (without the program) for `ntasks` ranks; `options`
        False leaves out launcher_options (binding to this machine's cores), not the knobs'."""
        _, knob_opts = self.knob_settings(knobs)
        argv = [self._expand(a).replace('{ntasks}', str(ntasks)) for a in self.launcher]
        mine = [self._expand(a) for a in self.launcher_options] if options else []
        return argv + mine + knob_opts


def _fail(path, where, message):
    raise RegistryError(f'{path}: {where}: {message}')


def _text(path, where, value):
    """Every registry string ends up in a shell script: quoted there, but no quoting makes a
    control character safe, so it is refused here."""
    bad = _CONTROL.search(value)
    if bad:
        _fail(path, where, f'{value!r} holds the control character {bad.group()!r} '
              f'(not allowed in a value written into a job script)')
    return value


def _str(path, where, value):
    if not isinstance(value, str) or not value:
        _fail(path, where, f'expected a non-empty string, got {value!r}')
    return _text(path, where, value)


def _str_list(path, where, value):
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        _fail(path, where, f'expected a list of non-empty strings, got {value!r}')
    for i, v in enumerate(value):
        _text(path, f'{where}[{i}]', v)
    return tuple(value)


def _bool(path, where, value):
    if not isinstance(value, bool):
        _fail(path, where, f'expected true or false, got {value!r}')
    return value


def _str_table(path, where, value):
    """A table of environment variables: NAME = "value"."""
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        _fail(path, where, f'expected a table of strings, got {value!r}')
    for k, v in value.items():
        if not _ENV_NAME.fullmatch(k):
            _fail(path, f'{where}.{k}', 'not a valid environment variable name '
                  '(letters, digits and _, not starting with a digit)')
        _text(path, f'{where}.{k}', v)
    return dict(value)


_SONAME = re.compile(r'lib[A-Za-z0-9_+-]+\.so(\.[0-9]+)*')


def _libraries(path, where, value, prefix):
    """A peer's libraries: "libmpi.so.12" = "{prefix}/lib/libmpi.so.12", an absolute file
    once {prefix} (the stack's) and {multiarch} (Debian's library directory) are set."""
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        _fail(path, where, f'expected a table "soname" = "file", got {value!r}')
    out = {}
    for soname, file in value.items():
        if not _SONAME.fullmatch(soname):
            _fail(path, f'{where}.{soname}', 'not a shared library name (e.g. libmpi.so.12)')
        file = _text(path, f'{where}.{soname}', file).replace('{prefix}', prefix) \
            .replace('{multiarch}', MULTIARCH_LIB)
        if not os.path.isabs(file):
            _fail(path, f'{where}.{soname}', f'{file!r} is not an absolute path (use {{prefix}} '
                  'or {multiarch})')
        out[soname] = file
    return out


def _spack_build(path, where, raw):
    if not isinstance(raw, dict):
        _fail(path, where, f'expected a table, got {raw!r}')
    for key in raw:
        if key not in ('package', 'version', 'read_from', 'variants'):
            _fail(path, f'{where}.{key}', 'unknown field (package, version, read_from, variants)')
    out = {key: _str(path, f'{where}.{key}', raw.get(key))
           for key in ('package', 'version', 'read_from')}
    variants = raw.get('variants')
    if not isinstance(variants, list) or not variants or not all(
            isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) and x for x in v)
            for v in variants):
        _fail(path, f'{where}.variants', 'expected a list of ["variant", "why"] pairs')
    out['variants'] = tuple((_text(path, f'{where}.variants', v),
                             _text(path, f'{where}.variants', w)) for v, w in variants)
    return out


def _knob(path, where, name, raw):
    if not isinstance(raw, dict):
        _fail(path, where, f'expected a table, got {raw!r}')
    allowed = {'default', 'unit', 'values', 'env', 'launcher_options'}
    extra = set(raw) - allowed
    if extra:
        _fail(path, f'{where}.{sorted(extra)[0]}', 'unknown field '
              f'(allowed: {", ".join(sorted(allowed))})')
    values = {}
    for vname, setting in raw.get('values', {}).items():
        vwhere = f'{where}.values.{vname}'
        if not isinstance(setting, dict) or set(setting) - {'env', 'launcher_options'}:
            _fail(path, vwhere, 'expected a table with env and/or launcher_options')
        values[vname] = {
            'env': _str_table(path, f'{vwhere}.env', setting.get('env', {})),
            'launcher_options': list(_str_list(path, f'{vwhere}.launcher_options',
                                               setting.get('launcher_options', []))),
        }
    env = _str_table(path, f'{where}.env', raw.get('env', {}))
    opts = _str_list(path, f'{where}.launcher_options', raw.get('launcher_options', []))
    if values and (env or opts):
        _fail(path, where, 'a knob has either named values or {value} templates, not both')
    if not values and not any('{value}' in t for t in [*env.values(), *opts]):
        _fail(path, where, 'a numeric knob needs {value} in its env or launcher_options')
    default = raw.get('default')
    if default is not None:
        default = _str(path, f'{where}.default', default) if values else str(default)
        if values and default not in values:
            _fail(path, f'{where}.default', f'{default!r} is not one of its values '
                  f'({", ".join(sorted(values))})')
    return Knob(name, default, raw.get('unit'), values, env, opts)


REQUIRED = ('family', 'origin', 'cc', 'launcher')
OPTIONAL = ('launcher_options', 'env', 'features', 'boot', 'halt', 'wipe', 'extra_sources',
            'self_bind', 'knobs', 'srun_mpi', 'fallback_env', 'fallback_hostline', 'configure',
            'version', 'peers', 'skip_calls', 'spack_build', *ORIGIN_ONLY)
SRUN_MPI = ('pmi2', 'pmix')
# The peer benchmarks, each with its kind (how tests/peers.py runs and reads it): IMB-MPI1 (the
# Intel MPI wheel's) and Debian's NetPIPE modules.
PEER_PROGRAMS = {'imb': 'imb', 'NPmpich2': 'netpipe', 'NPopenmpi': 'netpipe', 'NPlam': 'netpipe'}
# A stack with the MPICH ABI and no peers field runs IMB and NetPIPE's MPICH module on its own
# libmpi.so.12 (the MPICH ABI shared by MPICH, Intel MPI and MVAPICH2).
MPICH_ABI_PEERS = {'imb': {'libmpi.so.12': '{prefix}/lib/libmpi.so.12'},
                   'NPmpich2': {'libmpich.so.12': '{prefix}/lib/libmpi.so.12'}}
# Calls a test asks of a stack that a stack may decline (tests/one_sided.py's flush mode).
SKIPPABLE_CALLS = ('MPI_Win_flush',)
# {multiarch}: Debian's library directory (/usr/lib/x86_64-linux-gnu), for Debian stacks' peers
MULTIARCH_LIB = f"/usr/lib/{sysconfig.get_config_var('MULTIARCH') or 'x86_64-linux-gnu'}"


def _stack(path, name, raw, prefix_root):
    where = f'stacks.{name}'
    if not isinstance(raw, dict):
        _fail(path, where, f'expected a table, got {raw!r}')
    for key in REQUIRED:
        if key not in raw:
            _fail(path, f'{where}.{key}', 'missing (required: ' + ', '.join(REQUIRED) + ')')
    for key in raw:
        if key not in REQUIRED + OPTIONAL:
            _fail(path, f'{where}.{key}', 'unknown field')
    family = _str(path, f'{where}.family', raw['family'])
    if family not in FAMILIES:
        _fail(path, f'{where}.family', f'{family!r} is not one of {", ".join(sorted(FAMILIES))}')
    origin = _str(path, f'{where}.origin', raw['origin'])
    if origin not in ORIGINS:
        _fail(path, f'{where}.origin', f'{origin!r} is not one of {", ".join(sorted(ORIGINS))}')
    fields = ORIGIN_FIELDS[origin]
    for key in fields['required']:
        if key not in raw:
            _fail(path, f'{where}.{key}', f'missing (origin {origin!r} needs: '
                  f'{", ".join(fields["required"])})')
    for key in ORIGIN_ONLY:
        if key in raw and key not in fields['required'] + fields['allowed']:
            users = sorted(o for o, f in ORIGIN_FIELDS.items()
                           if key in f['required'] + f['allowed'])
            _fail(path, f'{where}.{key}', f'not a field of origin {origin!r} '
                  f'(only of: {", ".join(users)})')
    prefix = os.path.join(prefix_root, name)
    if origin == 'prefix':
        prefix = _str(path, f'{where}.prefix', raw['prefix'])
        if not os.path.isabs(prefix):
            _fail(path, f'{where}.prefix', f'{prefix!r} is not an absolute path')
    patches = _str_list(path, f'{where}.patches', raw.get('patches', []))
    for i, patch in enumerate(patches):
        if not (REPO / patch).is_file():
            _fail(path, f'{where}.patches[{i}]', f'no file {patch!r} in {REPO}')
    launcher = _str_list(path, f'{where}.launcher', raw['launcher'])
    if not any('{ntasks}' in a for a in launcher):
        _fail(path, f'{where}.launcher', 'must contain {ntasks} (the rank-count argument)')
    if bool(raw.get('boot')) != bool(raw.get('halt')):
        _fail(path, f'{where}.halt' if raw.get('boot') else f'{where}.boot',
              'boot and halt go together: a daemon that is started must be stopped')
    srun_mpi = raw.get('srun_mpi', '')
    if srun_mpi and srun_mpi not in SRUN_MPI:
        _fail(path, f'{where}.srun_mpi', f'{srun_mpi!r} is not one of {", ".join(SRUN_MPI)}')
    fallback_env = _str_table(path, f'{where}.fallback_env', raw.get('fallback_env', {}))
    hostline = _str(path, f'{where}.fallback_hostline', raw.get('fallback_hostline', '{host}'))
    # written into the job script through sed: the node's name and plain words only
    if '{host}' not in hostline or not re.fullmatch(r'[A-Za-z0-9 =:_.-]*',
                                                    hostline.replace('{host}', '')):
        _fail(path, f'{where}.fallback_hostline', f'{hostline!r} must contain {{host}} and '
              f'otherwise only letters, digits, spaces and = : _ . -')
    if fallback_env and not any('{hostfile}' in v for v in fallback_env.values()):
        _fail(path, f'{where}.fallback_env', 'no variable names {hostfile}: the launcher would '
              'not know the job\'s nodes')
    features = _str_list(path, f'{where}.features', raw.get('features', []))
    for i, feature in enumerate(features):
        if feature.startswith('no-') and feature[3:] not in TEST_FAMILIES:
            _fail(path, f'{where}.features[{i}]', f'{feature!r} opts out of no test family '
                  f'(no-FAMILY, FAMILY one of {", ".join(TEST_FAMILIES)})')
    peers_raw = raw.get('peers', MPICH_ABI_PEERS if 'mpich-abi' in features else {})
    if not isinstance(peers_raw, dict):
        _fail(path, f'{where}.peers', f'expected a table of peers, got {peers_raw!r}')
    peers = {}
    for peer, libs in peers_raw.items():
        if peer not in PEER_PROGRAMS:
            _fail(path, f'{where}.peers.{peer}', f'unknown peer (one of '
                  f'{", ".join(PEER_PROGRAMS)})')
        peers[peer] = _libraries(path, f'{where}.peers.{peer}', libs, prefix)
    skip_calls = _str_table(path, f'{where}.skip_calls', raw.get('skip_calls', {}))
    for call, why in skip_calls.items():
        if call not in SKIPPABLE_CALLS:
            _fail(path, f'{where}.skip_calls.{call}', f'not a call any test skips (one of '
                  f'{", ".join(SKIPPABLE_CALLS)})')
        if not why.strip():
            _fail(path, f'{where}.skip_calls.{call}', 'say why the stack skips it')
    spack_build = _spack_build(path, f'{where}.spack_build', raw['spack_build']) \
        if 'spack_build' in raw else {}
    knobs_raw = raw.get('knobs', {})
    if not isinstance(knobs_raw, dict):
        _fail(path, f'{where}.knobs', f'expected a table, got {knobs_raw!r}')
    # daemons of a stack built into its own prefix are that prefix's ({prefix}/bin/lamboot)
    def daemon(key):
        return tuple(a.replace('{prefix}', prefix)
                     for a in _str_list(path, f'{where}.{key}', raw.get(key, [])))
    return Stack(
        name=name, family=family, origin=origin,
        packages=_str_list(path, f'{where}.packages', raw.get('packages', [])),
        cc=_str(path, f'{where}.cc', raw['cc']),
        launcher=launcher,
        prefix=prefix,
        launcher_options=_str_list(path, f'{where}.launcher_options',
                                   raw.get('launcher_options', [])),
        env=_str_table(path, f'{where}.env', raw.get('env', {})),
        features=features,
        boot=daemon('boot'), halt=daemon('halt'), wipe=daemon('wipe'),
        extra_sources=_str_list(path, f'{where}.extra_sources', raw.get('extra_sources', [])),
        self_bind=_bool(path, f'{where}.self_bind', raw.get('self_bind', False)),
        knobs={k: _knob(path, f'{where}.knobs.{k}', k, v) for k, v in knobs_raw.items()},
        srun_mpi=_str(path, f'{where}.srun_mpi', srun_mpi) if srun_mpi else '',
        fallback_env=fallback_env, fallback_hostline=hostline,
        # one ./configure argument per item ("--with-rsh=ssh -x" stays one word)
        configure=_str_list(path, f'{where}.configure', raw.get('configure', [])),
        version=_str(path, f'{where}.version', raw['version']) if 'version' in raw else '',
        source=_str(path, f'{where}.source', raw['source']) if 'source' in raw else '',
        patches=patches, peers=peers, skip_calls=skip_calls, spack_build=spack_build,
    )


@dataclass(frozen=True)
class SpackVariants:
    """[spack_variants.FAMILY]: the family's Spack package and, for each configure flag a stack
    may declare, its variants ('~romio') or, where the package has none, why ('', reason)."""
    package: str
    flags: dict          # flag -> (variants, reason when there is no variant)


def _spack_variants(path, raw):
    if not isinstance(raw, dict):
        _fail(path, 'spack_variants', f'expected a table of families, got {raw!r}')
    tables = {}
    for family, entry in raw.items():
        where = f'spack_variants.{family}'
        if family not in FAMILIES:
            _fail(path, where, f'{family!r} is not one of {", ".join(sorted(FAMILIES))}')
        if not isinstance(entry, dict) or set(entry) - {'package', 'flags'}:
            _fail(path, where, 'expected a table with package and flags')
        flags = entry.get('flags', {})
        if not isinstance(flags, dict):
            _fail(path, f'{where}.flags', f'expected a table of flags, got {flags!r}')
        table = {}
        for flag, value in flags.items():
            fwhere = f'{where}.flags."{flag}"'
            if isinstance(value, str) and value:
                table[flag] = (_text(path, fwhere, value), '')
            elif isinstance(value, dict) and set(value) == {'none'}:
                table[flag] = ('', _str(path, f'{fwhere}.none', value['none']))
            else:
                _fail(path, fwhere, f'expected the variants ("~romio") or {{ none = "why the '
                      f'package has no variant for it" }}, got {value!r}')
        tables[family] = SpackVariants(_str(path, f'{where}.package', entry.get('package')),
                                       table)
    return tables


@dataclass(frozen=True)
class Registry:
    path: Path
    stacks: dict
    run_as: str
    prefix_root: str
    spack_variants: dict = field(default_factory=dict)   # family -> SpackVariants

    def spack_flags(self, stack):
        """(the family's Spack package, [(flag, variants, reason)]) for the stack's configure
        flags, in order; a flag its family's table lacks is an error saying where to add it."""
        table = self.spack_variants.get(stack.family)
        if table is None:
            raise RegistryError(
                f'{self.path}: stacks.{stack.name}.configure: family {stack.family!r} has no '
                f'[spack_variants.{stack.family}] table (add one: package = "<its Spack '
                'package>" and a flags table)')
        found = []
        for i, flag in enumerate(stack.configure):
            if flag not in table.flags:
                raise RegistryError(
                    f'{self.path}: stacks.{stack.name}.configure[{i}]: {flag!r} is not in '
                    f'spack_variants.{stack.family}.flags (add "{flag}" = "<variants of '
                    f'{table.package}>" there, or {{ none = "<why>" }} if it has none)')
            found.append((flag, *table.flags[flag]))
        return table.package, found

    def by_environ(self, environ):
        for stack in self.stacks.values():
            if stack.environ == environ:
                return stack
        raise RegistryError(f'{self.path}: no stack for ReFrame environment {environ!r}')

    def select(self, names=None, source='TESTBED_STACKS'):
        """The stacks named in `names` (a list or comma-separated text), all when empty."""
        if isinstance(names, str):
            names = [n.strip() for n in names.split(',') if n.strip()]
        if not names:
            return list(self.stacks.values())
        unknown = [n for n in names if n not in self.stacks]
        if unknown:
            raise RegistryError(f'{source}: unknown stack {unknown[0]!r} '
                                f'(stacks in {self.path}: {", ".join(self.stacks)})')
        return [self.stacks[n] for n in names]


def load(path=None):
    path = Path(path or os.environ.get('TESTBED_REGISTRY') or DEFAULT_FILE)
    try:
        with open(path, 'rb') as fh:
            raw = tomllib.load(fh)
    except FileNotFoundError:
        raise RegistryError(f'{path}: no such file') from None
    except tomllib.TOMLDecodeError as err:
        raise RegistryError(f'{path}: not valid TOML: {err}') from None
    defaults = raw.get('defaults', {})
    if not isinstance(defaults, dict):
        _fail(path, 'defaults', 'expected a table')
    prefix_root = os.environ.get('TESTBED_PREFIX') or _str(
        path, 'defaults.prefix_root', defaults.get('prefix_root', '/opt/mpi-testbed/stacks'))
    run_as = _str(path, 'defaults.run_as', defaults.get('run_as', 'mpirun-user'))
    stacks_raw = raw.get('stacks')
    if not isinstance(stacks_raw, dict) or not stacks_raw:
        _fail(path, 'stacks', 'no [stacks.NAME] entries')
    stacks = {name: _stack(path, name, entry, prefix_root) for name, entry in stacks_raw.items()}
    return Registry(path, stacks, run_as, prefix_root,
                    _spack_variants(path, raw.get('spack_variants', {})))
