#!/usr/bin/env python3
"""The emulated cluster's OCI registry: Debian's docker-registry (the CNCF distribution server)
on the cluster's bridge, where `make images` pushes every stack's image and the nodes pull it.

    oci_registry.py address              host:port of the running registry (exit 1: none)
    oci_registry.py tag STACK            the tag of STACK's image: a hash of its inputs
    oci_registry.py has STACK            exit 0 when the registry holds that tag of STACK
    oci_registry.py current STACK        point STACK's :current at that tag (the registry has it)
    oci_registry.py push STACK ARCHIVE   push an OCI archive as mpi-testbed/STACK:<tag> (and
                                         :current), unless the registry has that tag already

cluster.py starts it at every `up` in a namespace of its own (address REGISTRY['addr'], name
REGISTRY['name'] in the nodes' hosts file; `make setup` installs it), as the account the
package made, with its storage in STORAGE: outside the cluster's folder, so that
`cluster.py down --keep-registry` can keep the images for the next `up`; a plain `down`
removes it. Plain HTTP on a private bridge: every client is told so (--tls-verify=false).
Docs: docs/spack-and-containers.md (Containers).
"""
import hashlib
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REGISTRY = {'name': 'tbreg', 'ns': 'tbc-reg', 'veth': 'tbc-vr', 'addr': '198.18.0.3'}
PORT = 5000
ACCOUNT = 'docker-registry'          # made by the Debian package
STORAGE = os.environ.get('TESTBED_REGISTRY_DIR', '/var/lib/mpi-testbed-registry')
#: what every stack's image is made from, besides its own Containerfile and the files its
#: registry entry names (patches, extra sources: inputs()): the base image's Containerfile,
#: the registry of stacks and the installer that reads it (install.py --image, its modules)
INPUTS = ['containers/base/Containerfile', 'site/stacks.toml', 'site/versions.toml',
          'reframe/testbed/install.py', 'reframe/testbed/origins.py',
          'reframe/testbed/registry.py', 'apps/hpl/fetch-source.sh']


class RegistryError(Exception):
    pass


def config():
    """The registry's configuration (YAML, written by hand: five keys need no library)."""
    return (f'# Written by site/cluster/oci_registry.py at cluster up.\n'
            f'version: 0.1\n'
            f'log:\n  level: info\n  accesslog:\n    disabled: false\n'
            f'storage:\n  filesystem:\n    rootdirectory: {STORAGE}\n'
            f'  delete:\n    enabled: true\n'
            f'http:\n  addr: {REGISTRY["addr"]}:{PORT}\n'
            f'  secret: {os.urandom(16).hex()}\n')


def address(state_file=None):
    """host:port of the registry of the cluster that is up, else None."""
    import json
    state_file = state_file or os.path.join(
        os.environ.get('TESTBED_CLUSTER_DIR', '/run/mpi-testbed-cluster'), 'state.json')
    try:
        with open(state_file) as fh:
            reg = json.load(fh).get('registry')
    except (OSError, ValueError):
        return None
    return f"{reg['addr']}:{reg['port']}" if reg else None


def _files(path):
    p = REPO / path
    if p.is_file():
        return [p]
    return sorted(f for f in p.rglob('*') if f.is_file() and '__pycache__' not in f.parts)


def inputs(stack):
    """The files `stack`'s image is made from: INPUTS, its Containerfile, and the patches and
    extra sources its registry entry names (a source build applies and compiles them)."""
    own = REPO / 'containers' / stack / 'Containerfile'
    if not own.is_file():
        raise RegistryError(f'{own}: no Containerfile for stack {stack!r} (make generate)')
    paths = list(INPUTS)
    from testbed import registry
    try:
        entry = registry.load(REPO / 'site' / 'stacks.toml').stacks.get(stack)
    except registry.RegistryError as err:      # it names the file and the field
        raise RegistryError(str(err)) from None
    if entry is not None:
        paths += list(getattr(entry, 'patches', ()) or ())
        paths += [f'apps/{p}' for p in getattr(entry, 'extra_sources', ()) or ()]
    return [own] + [f for p in paths for f in _files(p)]


def tag(stack):
    """A hash of the image's inputs (inputs()): an image built from the same inputs gets the
    same tag, so a push of it can be skipped."""
    h = hashlib.sha256()
    for path in inputs(stack):
        h.update(str(path.relative_to(REPO)).encode() + b'\0' + path.read_bytes() + b'\0')
    return 'in-' + h.hexdigest()[:16]


def reference(stack, tag_, where=None):
    return f'{where or address()}/mpi-testbed/{stack}:{tag_}'


def skopeo(*argv):
    return subprocess.run(['skopeo', *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=1800)


def _cause(r):
    return (r.stderr.strip().splitlines() or [f'skopeo exited {r.returncode}'])[-1]


def has(stack):
    """True when the registry holds `stack`'s image of the inputs it has now (its tag())."""
    where = address()
    if where is None:
        raise RegistryError('no registry: the emulated cluster is not up (make cluster-up)')
    ref = reference(stack, tag(stack), where)
    return skopeo('inspect', '--tls-verify=false', '--raw', f'docker://{ref}').returncode == 0


def point_current(stack):
    """Set `stack`'s :current to the image of its inputs, which the registry has (it may name
    another push since): a manifest moves, no layer."""
    where = address()
    ref, current = reference(stack, tag(stack), where), reference(stack, 'current', where)
    r = skopeo('copy', '--quiet', '--src-tls-verify=false', '--dest-tls-verify=false',
               f'docker://{ref}', f'docker://{current}')
    if r.returncode:
        raise RegistryError(f'{stack}: {current} could not be set to {ref}: {_cause(r)}')


def push(stack, archive):
    """Push `archive` (podman save --format oci-archive) as STACK's image, tagged by its inputs
    and as `current`; skipped when the registry has the input tag already. Returns a line."""
    where = address()
    if where is None:
        raise RegistryError('no registry: the emulated cluster is not up (make cluster-up)')
    want = tag(stack)
    ref = reference(stack, want, where)
    if has(stack):
        point_current(stack)
        return (f'{stack}: {ref} is in the registry already (same inputs): not pushed; '
                f':current names it')
    for t in (want, 'current'):
        r = skopeo('copy', '--quiet', '--dest-tls-verify=false', f'oci-archive:{archive}',
                   f'docker://{reference(stack, t, where)}')
        if r.returncode:
            raise RegistryError(f'{stack}: push of {archive} to {reference(stack, t, where)} '
                                f'failed: {_cause(r)}')
    return f'{stack}: pushed {ref} (and :current)'


def main(argv):
    try:
        if argv[:1] == ['address'] and len(argv) == 1:
            where = address()
            if where is None:
                return 1
            print(where)
        elif argv[:1] == ['tag'] and len(argv) == 2:
            print(tag(argv[1]))
        elif argv[:1] == ['has'] and len(argv) == 2:
            return 0 if has(argv[1]) else 1
        elif argv[:1] == ['current'] and len(argv) == 2:
            point_current(argv[1])
        elif argv[:1] == ['push'] and len(argv) == 3:
            print(push(argv[1], argv[2]))
        else:
            print(__doc__.split('\n\n')[1], file=sys.stderr)
            return 2
    except RegistryError as err:
        print(f'error: {err}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
