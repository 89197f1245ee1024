#!/usr/bin/env python3
"""The stacks' images on the emulated cluster's nodes: each node pulls from the cluster's
registry into its own storage, and srun starts ranks inside them with Charliecloud's ch-run.

    node_images.py pull REGISTRY STACK...   on a node, as the job account (ci/cluster_pull.sh
                                            runs it on every node through srun, REGISTRY the
                                            cluster's host:port): one JSON line per stack
    node_images.py count LOG         the registry's access log: pulls and bytes per node
    node_images.py unpack STORE STACK ARCHIVE
                                     on this host, as the job account (ci/images.sh): an
                                     image's OCI archive unpacked into STORE/STACK/rootfs

A node's storage is STORE/<node> on the host, which every node sees at THIS_NODE (cluster.py
binds it in the node's mount namespace), so that one srun line names the same path on every
node and each node reads its own copy. A pull is skopeo (`copy docker://... oci:...`: blobs
the node has are not fetched again), then umoci (`unpack --rootless`) into a directory that
ch-run runs: three unprivileged tools from Debian, no daemon. The unpack is skipped when the
node's directory was unpacked from the same manifest. Only the standard library: a node needs
no venv. Docs: docs/spack-and-containers.md.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections import defaultdict

STORE = os.environ.get('TESTBED_NODE_IMAGES', '/var/tmp/mpi-testbed-node-images')
THIS_NODE = os.path.join(STORE, 'this-node')
TAG = 'current'


def rootfs(stack):
    """The directory ch-run runs for `stack`, the same path on every node."""
    return os.path.join(THIS_NODE, stack, 'rootfs')


def run(argv):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=1800)


def cause(r):
    """The last line a failed tool printed, without skopeo's log-line wrapping."""
    line = (r.stderr.strip().splitlines() or [f'exit {r.returncode}'])[-1]
    m = re.search(r'msg="(.*)"', line)
    return (m.group(1) if m else line).replace('\\n', ' ').replace('\\t', ' ').strip()


def manifest_digest(layout, ref):
    """The manifest digest that the OCI layout's index.json names for `ref`."""
    with open(os.path.join(layout, 'index.json')) as fh:
        index = json.load(fh)
    for m in index.get('manifests', []):
        if m.get('annotations', {}).get('org.opencontainers.image.ref.name') == ref:
            return m['digest']
    return None


def blob(layout, digest):
    algo, hexa = digest.split(':', 1)
    with open(os.path.join(layout, 'blobs', algo, hexa)) as fh:
        return json.load(fh)


def labelled_stack(layout, digest):
    """The stack the image says it holds: the label mpi-testbed.stack of its configuration
    (containers/<stack>/Containerfile sets it), None where it has none."""
    config = blob(layout, blob(layout, digest)['config']['digest'])
    return (config.get('config', {}).get('Labels') or {}).get('mpi-testbed.stack')


def pull(stack, registry, store=THIS_NODE):
    """Pull and unpack one stack's image from `registry` (host:port) on this node; a dict for
    the JSON line."""
    image = f'{registry}/mpi-testbed/{stack}:{TAG}'
    return take(stack, image, ['--src-no-creds', '--src-tls-verify=false', f'docker://{image}'],
                store)


def from_archive(stack, archive, store):
    """Unpack one stack's image from its OCI archive (make images) into `store` on this host,
    for ranks that ch-run starts here (the system testbed-local-images); a dict as pull's."""
    return take(stack, archive, [f'oci-archive:{archive}'], store)


def take(stack, image, source, store):
    """skopeo copies `source` (its options, then its reference) into the OCI layout of `store`,
    the label is checked, and umoci unpacks it unless `store` has that manifest unpacked."""
    rec = {'node': socket.gethostname(), 'stack': stack, 'image': image}
    layout = os.path.join(store, 'oci')
    os.makedirs(layout, exist_ok=True)
    t0 = time.monotonic()
    r = run(['skopeo', 'copy', '--quiet', *source, f'oci:{layout}:{stack}'])
    rec['pull_s'] = round(time.monotonic() - t0, 3)
    if r.returncode:
        return {**rec, 'error': f'pull of {rec["image"]} failed: {cause(r)}'}
    digest = manifest_digest(layout, stack)
    rec['digest'] = digest
    holds = labelled_stack(layout, digest)
    if holds != stack:
        return {**rec, 'error': f'{rec["image"]} ({digest}) holds stack {holds!r}, not '
                                f'{stack!r} (its label mpi-testbed.stack): push the right '
                                f'image (make images STACKS={stack})'}
    bundle = os.path.join(store, stack)
    stamp = os.path.join(bundle, 'unpacked-from')
    try:
        with open(stamp) as fh:
            have = fh.read().strip()
    except OSError:
        have = None
    if have == digest and os.path.isdir(os.path.join(bundle, 'rootfs')):
        return {**rec, 'unpack_s': 0.0, 'unpacked': False}
    if os.path.exists(bundle):
        remove_tree(bundle)
    t0 = time.monotonic()
    r = run(['umoci', 'unpack', '--rootless', '--image', f'{layout}:{stack}', bundle])
    rec['unpack_s'] = round(time.monotonic() - t0, 3)
    if r.returncode:
        return {**rec, 'error': f'unpack of {rec["image"]} ({digest}) failed: {cause(r)}'}
    with open(stamp, 'w') as fh:
        fh.write(f'{digest}\n')
    return {**rec, 'unpacked': True}


def remove_tree(path):
    """rm -rf of an unpacked image, whose directories may be read-only to their owner."""
    for root, dirs, _ in os.walk(path):
        for d in dirs:
            p = os.path.join(root, d)
            if not os.path.islink(p):
                os.chmod(p, 0o700)
    shutil.rmtree(path)


ACCESS = re.compile(r'^(\S+) \S+ \S+ \[[^]]+\] "GET /v2/(\S+)/(manifests|blobs)/(\S+) '
                    r'HTTP/[\d.]+" (\d+) (\d+)')


def count(log_lines):
    """{(client address, repository): {'manifests': n, 'blobs': n, 'bytes': n}} of the
    successful GETs in the registry's access log (its combined-format lines)."""
    out = defaultdict(lambda: {'manifests': 0, 'blobs': 0, 'bytes': 0})
    for line in log_lines:
        m = ACCESS.match(line)
        if not m or m.group(5) not in ('200', '206'):
            continue
        c = out[(m.group(1), m.group(2))]
        c[m.group(3)] += 1
        c['bytes'] += int(m.group(6))
    return dict(out)


def main(argv):
    if argv[:1] == ['pull'] and len(argv) > 2:
        failed = 0
        for stack in argv[2:]:
            rec = pull(stack, argv[1])
            failed += 'error' in rec
            print(json.dumps(rec), flush=True)
        return 1 if failed else 0
    if argv[:1] == ['unpack'] and len(argv) == 4:
        rec = from_archive(argv[2], argv[3], argv[1])
        print(json.dumps(rec), flush=True)
        return 1 if 'error' in rec else 0
    if argv[:1] == ['count'] and len(argv) == 2:
        try:
            with open(argv[1], errors='replace') as fh:
                counts = count(fh)
        except OSError as err:
            print(f'error: {argv[1]}: {err.strerror}: is the cluster up (make cluster-up)?',
                  file=sys.stderr)
            return 2
        for (client, repo), c in sorted(counts.items()):
            print(json.dumps({'client': client, 'repository': repo, **c}))
        return 0
    print(__doc__.split('\n\n')[1], file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
