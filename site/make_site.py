"""make site: a ReFrame configuration for the Slurm cluster this login node belongs to.

    make site [ACCOUNT=a] [QOS=q] [RESERVATION=r] [PARTITIONS=p,q] [OUT=file] [PROVIDE=...]
              [MODULES=stack=module,...] [SIF_DIR=dir] [STAGEDIR=dir] [AGENT=cmd] [NODES=n]

It asks Slurm what the cluster has (sinfo: partitions and nodes up; scontrol: the cluster's
name, accounting, each node's address; srun --mpi=list: the PMI plugins), then runs one probe
job in each partition (salloc on up to two nodes, srun on the first): ReFrame's own host
topology detection, the network the nodes reach each other on (raw TCP's baseline may use it),
whether the stage directory is shared, whether an rsh-style agent reaches the other node (the
fallback launcher of LAM and PVM), and how each stack of the registry (site/stacks.toml) is
provided there: installed as the registry says (its wrapper or prefix on the node), a Spack
environment of spack-envs/ with a view, an Apptainer image, or an environment module.

It writes a configuration file (default site/generated/<cluster>-site.py) that holds what it found
as data and, when ReFrame loads it, builds the environments from the registry through
configuration() below, so that a stack is still declared in one place. What it found and every
partition or stack left out, with the reason, head the file and are printed. Bad input and
faults are named in one line: no Slurm reachable, a partition not in sinfo (the file is written
for the rest), a probe that failed. docs/cluster.md says how to use it and what was verified.
"""
import argparse
import datetime
import getpass
import importlib.util
import ipaddress
import json
import os
import pprint
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from testbed import registry

#: the ways a node can provide a stack, in the default order: the registry's own build first
#: (it is the stack as declared), then builds made from the registry (Spack, images), then a
#: site's module, matched by name and version only
ROUTES = ('installed', 'spack', 'image', 'module')
#: Slurm node states in which a node takes jobs (sinfo %T, without a trailing flag)
UP_STATES = {'idle', 'mixed', 'allocated', 'completing', 'planned', 'reserved'}
#: module names a family's builds go by on sites
MODULE_NAMES = {'mpich': ('mpich',), 'openmpi': ('openmpi', 'open-mpi', 'ompi'),
                'intel-mpi': ('intel-mpi', 'impi', 'intel-oneapi-mpi'), 'lam': ('lam',),
                'pvm': ('pvm', 'pvm3'), 'mvapich2': ('mvapich2', 'mvapich')}
PROBE_TAG = 'MAKE-SITE-PROBE '
#: the program each route compiles with the stack's wrapper: an MPI program, or a PVM one
TEST_PROGRAMS = {
    'mpi': '#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); '
           'MPI_Finalize(); return 0; }\n',
    'pvm': '#include <pvm3.h>\nint main(void) { return pvm_mytid() < -100; }\n',
}


class SiteError(Exception):
    """A fault that stops `make site`; the message is one line naming what and the fix."""


class NoSlurm(SiteError):
    """No Slurm command answers on this machine."""


# -- asking Slurm (login node) -------------------------------------------------------------

def run(argv, timeout=120, env=None, shown=None):
    """stdout of `argv`; a command that is missing, fails or hangs is a SiteError naming it
    (`shown`: the words to name it by, else its first four)."""
    shown = shown or shlex.join(argv[:4])
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except FileNotFoundError:
        raise NoSlurm(f'{argv[0]}: not found: run make site on a login node of a Slurm '
                      f'cluster (Slurm\'s commands on PATH)') from None
    except subprocess.TimeoutExpired:
        raise SiteError(f'{shown}: no answer within {timeout} s') from None
    if out.returncode != 0:
        why = (out.stderr.strip() or out.stdout.strip() or 'no message').splitlines()[-1]
        raise SiteError(f'{shown}: exit {out.returncode}: {why}')
    return out.stdout


def slurm_config():
    """`scontrol show config` as a dict; Slurm that does not answer is NoSlurm."""
    try:
        text = run(['scontrol', 'show', 'config'], timeout=60)
    except NoSlurm:
        raise
    except SiteError as err:
        raise NoSlurm(f'no Slurm controller answers ({err}); on a login node SLURM_CONF or '
                      f'/etc/slurm/slurm.conf must name the cluster') from None
    config = {}
    for line in text.splitlines():
        key, sep, value = line.partition('=')
        if sep and key.strip() and ' ' not in key.strip():
            config[key.strip()] = value.strip()
    return config


def parse_sinfo(text):
    """sinfo -h -N -o '%R|%a|%N|%T|%c' -> {partition: {'avail': .., 'nodes': {name: (state,
    cpus)}}} in sinfo's order."""
    parts = {}
    for line in text.splitlines():
        fields = line.strip().split('|')
        if len(fields) != 5:
            continue
        name, avail, node, state, cpus = fields
        part = parts.setdefault(name, {'avail': avail, 'nodes': {}})
        part['nodes'][node] = (state, int(cpus) if cpus.isdigit() else 0)
    return parts


def node_up(state):
    """A node takes jobs: its state is one of UP_STATES, with no flag (down*, drained~...)."""
    return state in UP_STATES


def parse_mpi_list(text):
    """The plugin names of `srun --mpi=list` (22.05: 'srun: pmi2' lines; 23.x and later: a
    heading, then one name per indented line, then the PMIx versions)."""
    names = []
    for line in text.splitlines():
        word = line.strip()
        if word.startswith('srun:'):
            word = word[len('srun:'):].strip()
        if not word or ' ' in word or word.endswith(':') or word.endswith('...'):
            continue
        names.append(word)
    return names


def parse_node_addr(text):
    """NodeAddr of `scontrol -o show node NAME`, '' if absent."""
    found = re.search(r'(?:^|\s)NodeAddr=(\S+)', text)
    return found.group(1) if found else ''


# -- the probe (runs on a node, as the job account) ----------------------------------------

def sh(argv, timeout=120, env=None):
    """(exit code, stdout, stderr) of argv; a missing program is exit 127."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except FileNotFoundError:
        return 127, '', f'{argv[0]}: not found'
    except subprocess.TimeoutExpired:
        return 124, '', f'no answer within {timeout} s'
    return out.returncode, out.stdout, out.stderr


def last_line(text, default='no message'):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:200] if lines else default


def detect_topology(reframe):
    """ReFrame's host topology of this node (reframe --detect-host-topology), or a reason."""
    env = {k: v for k, v in os.environ.items() if k != 'RFM_CONFIG_FILES'}
    code, out, err = sh([reframe, '--detect-host-topology'], env=env)
    start = out.find('{')
    if code != 0 or start < 0:
        return None, f'{reframe} --detect-host-topology: exit {code}: {last_line(err + out)}'
    try:
        return json.loads(out[start:]), ''
    except json.JSONDecodeError as e:
        return None, f'{reframe} --detect-host-topology: not JSON ({e})'


def own_networks():
    """This node's IPv4 interfaces as ip_interface objects (ip -o -4 addr show)."""
    code, out, _ = sh(['ip', '-o', '-4', 'addr', 'show'])
    if code != 0:
        return []
    return [ipaddress.ip_interface(m) for m in re.findall(r'\binet (\S+/\d+)', out)]


def tcp_network(target):
    """The network of this node's interface on the route to `target` (the other node's
    address, or this node's own): where raw TCP between nodes goes. (network, reason)."""
    try:
        addr = socket.getaddrinfo(target, None, socket.AF_INET)[0][4][0]
    except (socket.gaierror, IndexError):
        return None, f'{target}: no IPv4 address'
    code, out, err = sh(['ip', '-o', 'route', 'get', addr])
    src = re.search(r'\bsrc (\S+)', out)
    if code != 0 or not src:
        return None, f'ip route get {addr}: {last_line(err + out, "no source address")}'
    for iface in own_networks():
        if str(iface.ip) == src.group(1):
            if iface.ip.is_loopback:
                return None, f'{addr} is reached over loopback'
            return str(iface.network), ''
    return None, f'no interface holds {src.group(1)}'


def job_nodes():
    """The nodes of this job (SLURM_JOB_NODELIST), as the fallback's host file names them."""
    code, out, _ = sh(['scontrol', 'show', 'hostnames', os.environ.get('SLURM_JOB_NODELIST', '')])
    return out.split() if code == 0 else []


def node_address(node):
    """Slurm's address of `node` (NodeAddr), else its name."""
    code, out, _ = sh(['scontrol', '-o', 'show', 'node', node])
    return (parse_node_addr(out) if code == 0 else '') or node


def try_agent(agent, other):
    """Does `agent other hostname` run on the other node, as the fallback launchers call it?"""
    argv = shlex.split(agent)
    if os.path.basename(argv[0]) == 'ssh':       # never wait for a password or a host key
        argv += ['-o', 'BatchMode=yes', '-o', 'ConnectTimeout=10']
    code, out, err = sh(argv + [other, 'hostname'], timeout=60)
    if code == 0 and out.strip():
        return ''
    return f'{agent}: exit {code}: {last_line(err + out)}'


def bash(script, env=None):
    """(exit code, stdout, stderr) of a bash script."""
    return sh(['bash', '-c', script], env=env)


def compile_check(cc, family, prefix='', shell=bash, env=None):
    """Compile and link the family's test program with `cc`, in `shell` after `prefix`
    (commands that provide the stack, e.g. a module load); '' or why it failed."""
    kind = 'pvm' if family == 'pvm' else 'mpi'
    with tempfile.TemporaryDirectory(prefix='make-site-') as tmp:
        src = os.path.join(tmp, 't.c')
        with open(src, 'w') as fh:
            fh.write(TEST_PROGRAMS[kind])
        link = ' -lpvm3' if kind == 'pvm' else ''
        word = shlex.split(cc)[0]
        script = (f'{prefix}command -v {shlex.quote(word)} >/dev/null || '
                  f'{{ echo "{word}: not on PATH" >&2; exit 1; }}; '
                  f'{cc} -o {shlex.quote(tmp)}/t {shlex.quote(src)}{link}')
        code, out, err = shell(script, env=env)
    return '' if code == 0 else f'{cc}: {last_line(err + out)}'


def stack_env(stack):
    """This process's environment with the registry's variables of `stack` ({job}: a number)."""
    env = dict(os.environ)
    env.update({k: v.replace(registry.JOB_PID, str(os.getpid()))
                for k, v in stack.environment.items()})
    return env


def wrapper_name(stack):
    """The registry's compiler wrapper as a command name (for routes with their own PATH)."""
    return os.path.basename(shlex.split(stack.compiler)[0])


def route_installed(stack, spec):
    """The registry's own build on this node: its wrapper compiles, its launcher and daemons
    (for a stack srun cannot start) are there."""
    env = stack_env(stack)
    why = compile_check(stack.compiler, stack.family, env=env)
    if why:
        return None, why
    if not stack.srun_mpi:
        for cmd in (stack.launch_command(2)[0], *stack.boot[:1]):
            if not cmd.startswith('./') and not shutil.which(cmd, path=env.get('PATH')):
                return None, f'{cmd}: not on PATH'
    return {}, ''


def where(name, prefix, shell):
    """The path `name` resolves to in `shell` after `prefix`, '' if it does not."""
    code, out, _ = shell(f'{prefix}command -v {shlex.quote(name)}')
    return out.strip() if code == 0 else ''


def check_provided(prefix, stack, shell):
    """The stack in `shell` after `prefix` (module load, spack env activate): the first of
    the registry's wrapper name and the family's usual one that `prefix` puts on PATH (not one
    found there already) compiles; for a stack srun cannot start, the registry's launcher is
    there. (cc, '') or (None, why)."""
    names = [wrapper_name(stack), 'mpicc']
    cc = 'cc' if stack.family == 'pvm' else next(      # PVM: plain cc and the library
        (n for n in names if where(n, prefix, shell) not in ('', where(n, '', shell))), None)
    if cc is None:
        return None, f'puts none of {", ".join(dict.fromkeys(names))} on PATH'
    why = compile_check(cc, stack.family, prefix, shell)
    if not why and not stack.srun_mpi and not where(os.path.basename(stack.launcher[0]),
                                                    prefix, shell):
        why = f'{os.path.basename(stack.launcher[0])} (the registry\'s launcher) is not on PATH'
    return (None, why) if why else (cc, '')


def spack_setup():
    """Spack's shell set-up script on this node: $SPACK_ROOT's, or that of `spack` on PATH."""
    root = os.environ.get('SPACK_ROOT')
    if not root and shutil.which('spack'):
        root = os.path.dirname(os.path.dirname(os.path.realpath(shutil.which('spack'))))
    setup = os.path.join(root, 'share', 'spack', 'setup-env.sh') if root else ''
    return setup if setup and os.path.isfile(setup) else ''


def route_spack(stack, spec):
    """spack-envs/<stack>/ activated with its view (the generator gives every environment
    one, so activation puts the stack's wrapper on PATH)."""
    env_dir = os.path.join(spec['repo'], 'spack-envs', stack.name)
    if not os.path.isfile(os.path.join(env_dir, 'spack.yaml')):
        return None, f'no {env_dir}/spack.yaml'
    setup = spack_setup()
    if not setup:
        return None, 'no Spack on the node (SPACK_ROOT or spack on PATH)'
    prefix = f'. {shlex.quote(setup)} && spack env activate -d {shlex.quote(env_dir)} && '
    cc, why = check_provided(prefix, stack, bash)
    if why:
        return None, f'spack env activate -d {env_dir}: {why}'
    return {'setup': setup, 'env_dir': env_dir, 'cc': cc}, ''


def module_shell(script, env=None):
    """Run `script` in a login shell (where sites define `module`), PATH kept as the job's."""
    env = dict(env or os.environ, TB_MAKE_SITE_PATH=os.environ.get('PATH', ''))
    return sh(['bash', '-l', '-c', 'export PATH="$TB_MAKE_SITE_PATH"; ' + script], env=env)


def available_modules():
    """`module -t avail` names (no headers, no '(default)' marks), or None without modules."""
    code, out, err = module_shell('type module >/dev/null 2>&1 || exit 90; module -t avail')
    if code == 90:
        return None
    names = []
    for line in (out + '\n' + err).splitlines():
        name = re.sub(r'\(.*\)$', '', line.strip())
        if name and not name.endswith(':') and ' ' not in name:
            names.append(name)
    return names


def module_for(stack, modules, chosen):
    """The module of `stack`: MODULES names it, else the one module named after its family
    whose version begins with the stack's (only for a stack without configure flags: a
    module's flags are unknown). (module, how) or (None, why)."""
    if stack.name in chosen:
        return chosen[stack.name], 'MODULES'
    if stack.configure:
        return None, (f'its configure flags ({" ".join(stack.configure)}) cannot be matched '
                      f'to a module by name: MODULES={stack.name}=<module>')
    version = stack.version or stack.name[len(stack.family) + 1:].split('-')[0]
    found = [m for m in modules if '/' in m and m.split('/')[0].lower() in
             MODULE_NAMES.get(stack.family, ()) and
             re.match(re.escape(version) + r'(\b|$)', m.split('/', 1)[1])]
    if not found:
        return None, f'no module {"|".join(MODULE_NAMES.get(stack.family, ()))}/{version}*'
    return sorted(found)[-1], f'{len(found)} matched, the last taken'


def route_module(stack, spec):
    """An environment module of the site (MODULES=stack=module, or matched by name)."""
    if spec['available_modules'] is None:
        return None, 'no module command on the node'
    module, how = module_for(stack, spec['available_modules'], spec.get('modules', {}))
    if not module:
        return None, how
    prefix = f'module load {shlex.quote(module)} && '
    code, out, err = module_shell(f'{prefix}true')
    if code != 0:
        return None, f'module load {module}: {last_line(err + out)}'
    cc, why = check_provided(prefix, stack, module_shell)
    if why:
        return None, f'module load {module}: {why}'
    return {'module': module, 'cc': cc, 'how': how}, ''


def route_image(stack, spec):
    """An Apptainer image <SIF_DIR>/<stack>.sif (make pull-images), every rank in it: for a
    stack srun starts (the hybrid model). The fallback's launcher and daemons run on the node
    with each rank in the image (as on the emulated cluster), so the node needs the stack by
    another route."""
    if not stack.srun_mpi:
        return None, ('the fallback launcher and its daemons run on the node, not in the image '
                      '(only the ranks do): another route must provide the stack there')
    sif = os.path.join(spec.get('sif_dir') or '', f'{stack.name}.sif')
    if not spec.get('sif_dir') or not os.path.isfile(sif):
        return None, f'no image {sif}' if spec.get('sif_dir') else 'no SIF_DIR given'
    cc = shlex.split(stack.compiler)[0]
    code, out, err = sh(['apptainer', 'exec', sif, 'sh', '-c', f'command -v {shlex.quote(cc)}'])
    if code != 0:
        return None, f'apptainer exec {sif}: {cc}: {last_line(err + out)}'
    return {'sif': sif}, ''


ROUTE_PROBES = {'installed': route_installed, 'spack': route_spack, 'image': route_image,
                'module': route_module}


def module_system():
    """ReFrame's name of the node's module system (lmod, tmod4 or tmod)."""
    code, out, err = module_shell('[ -n "${LMOD_CMD:-}" ] && echo LMOD; module --version 2>&1')
    text = out + err
    if 'LMOD' in text or 'Lmod' in text:
        return 'lmod'
    return 'tmod4' if re.search(r'Modules Release [45]', text) else 'tmod'


def probe(spec):
    """Everything make site needs to know from a node of the partition (spec: what to try)."""
    reg = registry.load(spec.get('registry'))
    found = {'host': socket.gethostname(), 'stacks': {}}
    found['topology'], found['topology_error'] = detect_topology(spec['reframe'])
    found['stage_visible'] = os.path.isfile(spec['marker'])
    me = os.environ.get('SLURMD_NODENAME') or found['host']
    other = next((n for n in job_nodes() if n != me), '')
    found['tcp_network'], found['tcp_error'] = tcp_network(node_address(other or me))
    found['agents'] = {}
    for agent in spec['agents'] if other else []:
        found['agents'][agent] = try_agent(agent, other)
        if not found['agents'][agent]:
            break
    spec['available_modules'] = available_modules() if 'module' in spec['routes'] else None
    if spec['available_modules'] is not None:
        found['modules_system'] = module_system()
    for name in spec['stacks']:
        stack = reg.stacks[name]
        tried = {}
        for route in spec['routes']:
            detail, why = ROUTE_PROBES[route](stack, spec)
            tried[route] = {'ok': detail is not None, 'detail': detail or {}, 'why': why}
            if detail is not None:
                break
        found['stacks'][name] = tried
    return found


# -- the plan: what the file will hold ------------------------------------------------------

def knob_problem(stack, knobs):
    """Why the partition's knob values cannot be set on `stack`, or ''."""
    try:
        stack.knob_settings({k: v for k, v in knobs.items() if k in stack.knobs})
        return ''
    except KeyError as err:
        return f'{err.args[0]} (site/stacks.toml; the partition sets {knobs})'


def launch_problem(stack, plugins, agent, agent_why):
    """Why neither srun nor the fallback launcher can start `stack` here, or ''."""
    if stack.srun_mpi:
        if stack.srun_mpi in plugins:
            return ''
        return (f'srun_mpi {stack.srun_mpi}: not among srun --mpi=list '
                f'({", ".join(plugins) or "none"})')
    if not stack.fallback_env:
        return 'neither srun_mpi nor fallback_env in site/stacks.toml'
    return '' if agent else f'fallback launcher: {agent_why}'


def chosen_route(tried):
    """(route, detail) of the first route that worked, or (None, why of every route)."""
    for route, result in tried.items():
        if result['ok']:
            return route, result['detail']
    return None, '; '.join(f'{r}: {res["why"]}' for r, res in tried.items())


def with_image_fix(name, tried, settings):
    """The routes tried for stack `name`; where the image route found no image of it in
    SIF_DIR, its reason names the pull that puts one there (make pull-images)."""
    image = tried.get('image', {})
    if image.get('ok') or not image.get('why', '').startswith('no image '):
        return tried
    fix = (f' (pull it: make pull-images REGISTRY_URL=docker://HOST:PORT|oras://HOST/ORG '
           f'SIF_DIR={settings["sif_dir"]} STACKS={name}; docs/apptainer.md)')
    return {**tried, 'image': {**image, 'why': image['why'] + fix}}


def plan_partition(part, found, plugins, settings, reg):
    """The ReFrame partition(s) of one Slurm partition from its probe; skips are
    (what, reason) pairs for the file's head."""
    skips, notes = [], []
    if not found['stage_visible']:
        return None, [(f'partition {part["name"]}',
                       f'the stage directory {settings["stagedir"]} is not visible on '
                       f'{found["host"]}: give one on a file system the nodes share '
                       f'(make site STAGEDIR=...)')], notes
    agent, agent_why = None, 'no second node up to try an agent on'
    for candidate, why in found['agents'].items():
        if not why:
            agent = candidate
    if found['agents'] and not agent:
        agent_why = 'no agent reached the other node: ' + '; '.join(found['agents'].values())
    elif not found['agents']:
        agent = settings['agents'][0]
        notes.append(f'{part["name"]}: one node up, the agent {agent} not tried')
    stacks = {}
    for name, tried in found['stacks'].items():
        stack = reg.stacks[name]
        why = knob_problem(stack, settings['knobs']) or \
            launch_problem(stack, plugins, agent, agent_why)
        route, detail = chosen_route(with_image_fix(name, tried, settings)) if not why \
            else (None, why)
        if route is None:
            skips.append((f'stack {name} on partition {part["name"]}', detail))
            continue
        stacks[name] = {'route': route, **detail}
    if not stacks:
        return None, skips + [(f'partition {part["name"]}', 'no stack of the registry runs '
                               'there (the stacks\' reasons above)')], notes
    return {**part, 'stacks': stacks, 'fallback_agent': agent,
            'processor': processor(found, part, notes),
            'tcp_networks': [found['tcp_network']] if found['tcp_network'] else [],
            'mpi_plugins': plugins, 'probed_node': found['host']}, skips, notes + (
        [] if found['tcp_network'] else
        [f'{part["name"]}: raw TCP baseline left out: {found["tcp_error"]}'])


def processor(found, part, notes):
    """ReFrame's processor entry: the detected topology, its CPU count held to what Slurm
    gives a job on the node (a node Slurm gives fewer CPUs than it has: the emulated
    cluster's, or one that keeps cores for the system)."""
    topo = found['topology']
    if not topo:
        notes.append(f'{part["name"]}: no processor topology: {found["topology_error"]}; '
                     f'num_cpus from sinfo')
        return {'num_cpus': part['cpus']}
    if part['cpus'] and topo.get('num_cpus', 0) > part['cpus']:
        notes.append(f'{part["name"]}: {found["host"]} has {topo["num_cpus"]} CPUs, Slurm '
                     f'gives a job {part["cpus"]}: num_cpus {part["cpus"]}, topology left out')
        return {k: topo[k] for k in ('arch', 'vendor', 'model', 'platform') if k in topo} | \
            {'num_cpus': part['cpus']}
    return topo


# -- the generated file and what ReFrame builds from it --------------------------------------

def reframe_name(text):
    """A ReFrame system or partition name (letters, digits, _ and -; a letter first)."""
    name = re.sub(r'[^A-Za-z0-9_-]', '_', text)
    return name if name[:1].isalpha() else f'p_{name}'


def render(site, lines):
    """The configuration file's text: the findings as comments, the data, the call."""
    head = '\n'.join(f'#   {line}' for line in lines)
    return f'''# ReFrame configuration for the Slurm cluster {site["cluster"]!r}, written by `make site`
# (site/make_site.py) on {site["made"]} from {site["login_host"]}. Do not edit: run make site
# again (ACCOUNT, QOS, RESERVATION, PARTITIONS, ... as variables). At run time TESTBED_ACCOUNT,
# TESTBED_QOS and TESTBED_RESERVATION override the values below, TESTBED_STACKS limits the
# stacks, TESTBED_STAGEDIR moves the stage. Use it alone:
#   RFM_CONFIG_FILES={site["out"]} reframe -c tests -r ...
# Found, and left out:
{head}
from testbed_site import make_site     # the testbed package (pip install -e {site["repo"]})

SITE = {pprint.pformat(site, width=96, sort_dicts=True)}

site_configuration = make_site.configuration(SITE, __file__)
'''


def load_local(repo):
    """site/local.py, for the logging, report and storage settings the generated file
    shares with the embedded default (one place for them)."""
    spec = importlib.util.spec_from_file_location('testbed_local_config',
                                                  os.path.join(repo, 'site', 'local.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.site_configuration


def config_error(message):
    """ReFrame prints a ConfigError raised by a configuration file as one line."""
    from reframe.core.exceptions import ConfigError
    return ConfigError(message)


def environment(stack, entry, targets):
    """The ReFrame environment of `stack` as the partitions `targets` provide it."""
    route = entry['route']
    env = {'name': stack.environ, 'cc': entry.get('cc') or stack.compiler,
           'features': list(stack.features), 'target_systems': targets,
           'env_vars': [[k, registry.shell_word(v)] for k, v in stack.environment.items()],
           'extras': {'stack': stack.name, 'family': stack.family, 'origin': stack.origin,
                      'provided_by': {'module': 'modules'}.get(route, route)}}
    if route == 'module':
        env['modules'] = [entry['module']]
    if route == 'spack':
        env['prepare_cmds'] = [f'. {shlex.quote(entry["setup"])}',
                               f'spack env activate -d {shlex.quote(entry["env_dir"])}']
    if route in ('installed', 'image'):
        env['cc'] = stack.compiler
    return env


def partition_entries(site, part, stacks):
    """One ReFrame partition for the stacks provided on the nodes, one (<name>_image) for
    those run in Apptainer images: a partition's images apply to all its environments."""
    access = ['--partition=' + part['slurm'], '--exclusive'] + [
        f'--{flag}={value}' for flag, var in (('account', 'ACCOUNT'), ('qos', 'QOS'),
                                              ('reservation', 'RESERVATION'))
        for value in [os.environ.get(f'TESTBED_{var}', site['access'][flag])] if value]
    if os.geteuid() == 0:       # jobs run as the job account, never root (site/local.py)
        access += [f'--uid={registry.load().run_as}', f'--gid={registry.load().run_as}']
    extras = {'nodes': part['nodes'], 'knobs': site['knobs'],
              'fallback_agent': part['fallback_agent'] or 'ssh',
              'tcp_networks': part['tcp_networks'],
              'p2p_baselines': 'memcpy,tcp,tcp_poll' if part['tcp_networks'] else 'memcpy',
              'slurm_partition': part['slurm'], 'mpi_plugins': part['mpi_plugins'],
              'probed_node': part['probed_node']}
    base = {'scheduler': site['scheduler'], 'launcher': 'srun', 'access': access,
            'max_jobs': site['max_jobs'], 'processor': part['processor']}
    on_nodes = [s for s in stacks if part['stacks'][s.name]['route'] != 'image']
    images = {s.name: part['stacks'][s.name]['sif'] for s in stacks
              if part['stacks'][s.name]['route'] == 'image'}
    out = []
    if on_nodes:
        out.append({**base, 'name': part['name'], 'environs': [s.environ for s in on_nodes],
                    'descr': f'Slurm partition {part["slurm"]}: srun with each stack\'s PMI, '
                             f'or its own launcher through {extras["fallback_agent"]}',
                    'extras': extras})
    if images:
        out.append({**base, 'name': part['name'] + '_image',
                    'environs': [s.environ for s in stacks if s.name in images],
                    'descr': f'Slurm partition {part["slurm"]}: each rank in its stack\'s '
                             f'Apptainer image',
                    'extras': {**extras, 'container_engine': 'apptainer',
                               'container_images': images}})
    return out


def configuration(site, path):
    """The ReFrame configuration of a generated site file (`path`), stacks from the
    registry; a stack the registry no longer has is a one-line ConfigError."""
    try:
        reg = registry.load()
        wanted = {s.name for s in reg.select(os.environ.get('TESTBED_STACKS'))}
    except registry.RegistryError as err:
        raise config_error(str(err)) from None
    if site.get('slurm_conf'):      # sbatch and squeue, run by ReFrame, find the cluster
        os.environ.setdefault('SLURM_CONF', site['slurm_conf'])
    partitions, environments = [], {}
    for part in site['partitions']:
        for name, entry in part['stacks'].items():
            if name not in reg.stacks:
                raise config_error(
                    f'{path}: partitions[{part["name"]}].stacks: {name!r} is not a stack of '
                    f'{reg.path} (stacks: {", ".join(reg.stacks)}): run make site again')
            if entry.get('route') not in ROUTES:
                raise config_error(f'{path}: partitions[{part["name"]}].stacks.{name}.route: '
                                   f'{entry.get("route")!r} is not one of {", ".join(ROUTES)}: '
                                   f'run make site again')
        stacks = [reg.stacks[n] for n in part['stacks'] if n in wanted]
        for entry in partition_entries(site, part, stacks):
            partitions.append(entry)
            for environ in entry['environs']:
                stack = reg.by_environ(environ)
                key = (stack.name, json.dumps(part['stacks'][stack.name], sort_keys=True))
                environments.setdefault(key, (stack, part['stacks'][stack.name], []))[2].append(
                    f'{site["cluster"]}:{entry["name"]}')
    local = load_local(site['repo'])
    system = {'name': site['cluster'], 'descr': f'Slurm cluster {site["cluster"]} '
              f'(make site, {site["made"]})',
              # the file describes one cluster and is used alone (RFM_CONFIG_FILES)
              'hostnames': ['.*'],
              'stagedir': os.environ.get('TESTBED_STAGEDIR', site['stagedir']),
              'outputdir': os.path.join(site['repo'], 'reframe', 'output'),
              'partitions': partitions}
    if site.get('modules_system'):
        system['modules_system'] = site['modules_system']
    return {'systems': [system],
            'environments': [environment(*v) for v in environments.values()],
            **{k: local[k] for k in ('logging', 'general', 'storage') if k in local}}


# -- make site ------------------------------------------------------------------------------

def parse_pairs(text, what):
    """'a=b,c=d' -> {'a': 'b', 'c': 'd'}; a malformed item is a SiteError naming `what`."""
    pairs = {}
    for item in filter(None, (i.strip() for i in (text or '').split(','))):
        key, sep, value = item.partition('=')
        if not sep or not key or not value:
            raise SiteError(f'{what}: {item!r} is not NAME=VALUE (e.g. {what}=mpich-4.0=mpich/4.0.2)')
        pairs[key] = value
    return pairs


def account_prefix(reg):
    """Run the probe jobs as the job account when root (MPI jobs never run as root)."""
    from testbed.launch import drop_privileges
    return drop_privileges(reg)


def probe_partition(part, spec, settings, reg):
    """Run the probe on a node of `part` (salloc on up to two of its nodes, srun on the
    first); its findings, or a SiteError."""
    alloc = ['salloc', f'--partition={part["slurm"]}', f'--nodes={min(2, part["nodes"])}',
             '--time=15', '--job-name=make-site', f'--immediate={settings["wait"]}'] + [
        f'--{flag}={settings[flag]}' for flag in ('account', 'qos', 'reservation')
        if settings[flag]]
    step = ['srun', '--nodes=1', '--ntasks=1', f'--chdir={os.path.dirname(spec["marker"])}',
            sys.executable, os.path.abspath(__file__), 'probe', json.dumps(spec)]
    argv = account_prefix(reg) + alloc + step
    try:
        out = run(argv, timeout=settings['wait'] + 900, shown=shlex.join(alloc[:3]))
    except SiteError as err:
        raise SiteError(f'partition {part["slurm"]}: the probe job failed: {err}') from None
    for line in out.splitlines():
        if line.startswith(PROBE_TAG):
            return json.loads(line[len(PROBE_TAG):])
    raise SiteError(f'partition {part["slurm"]}: the probe printed no {PROBE_TAG.strip()} '
                    f'line: {last_line(out)}')


def select_partitions(sinfo, names, cap):
    """Partitions to probe (PARTITIONS, else all) with their up nodes; (chosen, errors,
    skips)."""
    errors, skips, chosen = [], [], []
    for name in names or list(sinfo):
        if name not in sinfo:
            errors.append(f'PARTITIONS: no partition {name!r} in sinfo (partitions: '
                          f'{", ".join(sinfo) or "none"})')
            continue
        info = sinfo[name]
        up = [n for n, (state, _) in info['nodes'].items() if node_up(state)]
        if info['avail'] != 'up':
            skips.append((f'partition {name}', f'its state is {info["avail"]} (sinfo %a)'))
        elif not up:
            states = ', '.join(f'{n} {s}' for n, (s, _) in info['nodes'].items())
            skips.append((f'partition {name}', f'no node is up ({states})'))
        else:
            chosen.append({'slurm': name, 'name': reframe_name(name),
                           'nodes': min(len(up), cap), 'up': up,
                           'cpus': min(info['nodes'][n][1] for n in up)})
    return chosen, errors, skips


def probe_dir(stagedir):
    """A folder beside the stage with a marker the probe looks for (is the stage shared
    with the nodes?); the probe job runs in it. Removed when make site ends."""
    path = os.path.join(os.path.dirname(stagedir.rstrip('/')) or '/', 'make-site-probe')
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o755)
    with open(os.path.join(path, 'marker'), 'w') as fh:
        fh.write('written by make site on the login node\n')
    os.chmod(os.path.join(path, 'marker'), 0o644)
    return os.path.join(path, 'marker')


def settings_of(args, reg, config):
    """The checked variables as one dict; a bad one is a SiteError naming it."""
    routes = [r.strip() for r in args.provide.split(',') if r.strip()]
    bad = [r for r in routes if r not in ROUTES]
    if bad or not routes:
        raise SiteError(f'PROVIDE: {bad[0] if bad else args.provide!r} is not one of '
                        f'{", ".join(ROUTES)} (a comma list, tried in its order)')
    modules = parse_pairs(args.modules, 'MODULES')
    unknown = [s for s in modules if s not in reg.stacks]
    if unknown:
        raise SiteError(f'MODULES: {unknown[0]!r} is not a stack of {reg.path}')
    # the site's agent (AGENT), else ssh, else an agent kept beside the Slurm configuration
    # (the emulated cluster keeps site/cluster/agent there): each is tried on a node
    conf_dir = os.path.dirname(config.get('SLURM_CONF', ''))
    beside = os.path.join(conf_dir, 'agent') if conf_dir else ''
    agents = [args.agent] if args.agent else \
        ['ssh'] + ([beside] if beside and os.access(beside, os.X_OK) else [])
    return {'stacks': [s.name for s in reg.select(args.stacks, source='STACKS')],
            'routes': routes, 'modules': modules, 'knobs': parse_pairs(args.knobs, 'KNOBS'),
            'agents': agents, 'account': args.account, 'qos': args.qos,
            'reservation': args.reservation, 'wait': args.wait,
            # absolute: the probe runs in another folder, on a node
            'sif_dir': os.path.abspath(os.path.expanduser(args.sif_dir)) if args.sif_dir
            else '',
            'stagedir': args.stagedir or f'/var/tmp/mpi-testbed-{getpass.getuser()}/stage'}


def probe_all(chosen, plugins, settings, reg):
    """Probe and plan every chosen partition: (partitions, skips, notes, errors, module
    system)."""
    parts, skips, notes, errors, modules_system = [], [], [], [], ''
    marker = probe_dir(settings['stagedir'])
    spec = {'repo': REPO, 'registry': str(reg.path), 'marker': marker,
            'reframe': os.path.join(os.path.dirname(sys.executable), 'reframe'),
            **{k: settings[k] for k in ('stacks', 'routes', 'agents', 'modules', 'sif_dir')}}
    try:
        for part in chosen:
            print(f'make site: probing partition {part["slurm"]} ({len(part["up"])} nodes '
                  f'up)', flush=True)
            try:
                found = probe_partition(part, spec, settings, reg)
            except SiteError as err:
                errors.append(str(err))
                continue
            planned, more, said = plan_partition(part, found, plugins, settings, reg)
            skips, notes = skips + more, notes + said
            if planned:
                parts.append({k: v for k, v in planned.items() if k != 'up'})
                modules_system = found.get('modules_system') or modules_system
    finally:
        shutil.rmtree(os.path.dirname(marker), ignore_errors=True)
    return parts, skips, notes, errors, modules_system


def summary(parts, plugins, notes, skips, errors):
    """What was found and left out, one line each: printed, and the file's head."""
    lines = ['partitions: ' + (', '.join(f'{p["name"]} ({p["nodes"]} nodes, probed on '
                                        f'{p["probed_node"]})' for p in parts) or 'none'),
             f'srun --mpi=list: {", ".join(plugins) or "none"}']
    for p in parts:
        lines.append(f'{p["name"]}: ' + ', '.join(f'{s} ({e["route"]})'
                                                   for s, e in p['stacks'].items()))
        lines.append(f'{p["name"]}: fallback agent {p["fallback_agent"]}; raw TCP on '
                     f'{", ".join(p["tcp_networks"]) or "no network"}; processor '
                     f'{p["processor"].get("arch", "?")}, num_cpus {p["processor"]["num_cpus"]}')
    return lines + notes + [f'skip {what}: {why}' for what, why in skips] + \
        [f'error: {e}' for e in errors]


def make_site(args):
    """Ask Slurm, probe each partition, write the file; returns (path or None, lines, rc)."""
    reg = registry.load()
    config = slurm_config()
    settings = settings_of(args, reg, config)
    sinfo = parse_sinfo(run(['sinfo', '-h', '-N', '-o', '%R|%a|%N|%T|%c']))
    plugins = parse_mpi_list(run(['srun', '--mpi=list']))
    names = [p.strip() for p in (args.partitions or '').split(',') if p.strip()]
    chosen, errors, skips = select_partitions(sinfo, names, args.nodes)
    parts, more, notes, failed, modules_system = \
        probe_all(chosen, plugins, settings, reg) if chosen else ([], [], [], [], '')
    provided = {s for p in parts for s in p['stacks']}
    skips += more + [(f'stack {s}', 'no partition provides it (the reasons above)')
                     for s in settings['stacks'] if s not in provided]
    lines = summary(parts, plugins, notes, skips, errors + failed)
    if not parts:
        return None, lines + ['error: no partition to write: nothing written'], 1
    cluster = reframe_name(config.get('ClusterName') or 'slurm')
    # '-site': ReFrame puts the file's folder first on sys.path while it loads it, so a file
    # named like a module (testbed.py for the cluster 'testbed') would shadow that module
    out = os.path.abspath(args.out or os.path.join(REPO, 'site', 'generated',
                                                   f'{cluster}-site.py'))
    site = {'cluster': cluster, 'repo': REPO, 'out': out, 'stagedir': settings['stagedir'],
            'made': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'),
            'login_host': socket.gethostname(), 'slurm_conf': os.environ.get('SLURM_CONF', ''),
            # ReFrame's slurm scheduler asks sacct, which needs accounting
            'scheduler': 'squeue' if config.get('AccountingStorageType', '').endswith('/none')
            else 'slurm',
            'access': {k: settings[k] for k in ('account', 'qos', 'reservation')},
            'knobs': settings['knobs'], 'max_jobs': args.max_jobs, 'partitions': parts,
            'modules_system': modules_system}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, 'w') as fh:
        fh.write(render(site, lines))
    return out, lines, 1 if errors or failed else 0


def arguments(argv):
    p = argparse.ArgumentParser(prog='make site', description=__doc__.split('\n\n')[0])
    p.add_argument('--out', default='',
                   help='the file (default site/generated/<cluster>-site.py)')
    p.add_argument('--account', default='')
    p.add_argument('--qos', default='')
    p.add_argument('--reservation', default='')
    p.add_argument('--partitions', default='', help='comma list (default: every partition)')
    p.add_argument('--provide', default=','.join(ROUTES),
                   help='routes to try, in order (installed, spack, image, module)')
    p.add_argument('--modules', default='', help='stack=module,... for the module route')
    p.add_argument('--sif-dir', default='', help='folder of <stack>.sif images')
    p.add_argument('--stagedir', default='', help='stage on a file system the nodes share')
    p.add_argument('--agent', default='', help='the fallback launcher\'s rsh-style agent')
    p.add_argument('--nodes', type=int, default=4, help='nodes a test may use (default 4)')
    p.add_argument('--stacks', default='', help='registry stacks to consider (default all)')
    p.add_argument('--knobs', default='transport=tcp',
                   help='knob values between nodes (default transport=tcp)')
    p.add_argument('--max-jobs', type=int, default=1, help='jobs at once (default 1)')
    p.add_argument('--wait', type=int, default=600,
                   help='seconds a probe job may wait for nodes (default 600)')
    args = p.parse_args(argv)
    if args.out and os.path.splitext(os.path.basename(args.out))[0].isidentifier():
        raise SiteError(f'OUT: {args.out}: name it with a - (e.g. mycluster-site.py): ReFrame '
                        f'puts its folder first on sys.path, so a file named like a module '
                        f'would shadow that module')
    if args.nodes < 1 or args.max_jobs < 1 or args.wait < 1:
        raise SiteError('NODES, --max-jobs and --wait: whole numbers of at least 1')
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ['probe']:       # on a node, in the probe job
        print(PROBE_TAG + json.dumps(probe(json.loads(argv[1]))), flush=True)
        return 0
    try:
        path, lines, rc = make_site(arguments(argv))
    except (SiteError, registry.RegistryError) as err:
        print(f'make site: error: {err}', file=sys.stderr)
        return 2
    for line in lines:
        print(f'make site: {line}', file=sys.stderr if line.startswith('error:') else
              sys.stdout)
    if path:
        print(f'make site: wrote {path}\n  use it: RFM_CONFIG_FILES={path} reframe -c tests '
              f'-r  (from reframe/)')
    return rc


if __name__ == '__main__':
    sys.exit(main())
