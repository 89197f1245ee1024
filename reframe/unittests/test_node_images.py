"""A node's pull of a stack's image from the emulated cluster's registry
(site/cluster/node_images.py): pulled, unpacked once per manifest, a failure named with the
image and its cause; and the registry's access log counted per node."""
import json
import os
from types import SimpleNamespace

from testbed_site.cluster import node_images as ni

LOG = '''\
198.18.0.11 - - [28/Nov/2026:22:00:05 +0000] "GET /v2/ HTTP/1.1" 200 2 "" "skopeo/1.9.3"
198.18.0.11 - - [28/Nov/2026:22:00:05 +0000] "GET /v2/mpi-testbed/mpich-4.0/manifests/current HTTP/1.1" 200 928 "" "skopeo/1.9.3"
198.18.0.11 - - [28/Nov/2026:22:00:06 +0000] "GET /v2/mpi-testbed/mpich-4.0/blobs/sha256:aa HTTP/1.1" 200 386771967 "" "skopeo/1.9.3"
198.18.0.12 - - [28/Nov/2026:22:00:06 +0000] "GET /v2/mpi-testbed/mpich-4.0/manifests/current HTTP/1.1" 200 928 "" "skopeo/1.9.3"
198.18.0.12 - - [28/Nov/2026:22:00:07 +0000] "GET /v2/mpi-testbed/lam-7.1/manifests/current HTTP/1.1" 404 90 "" "skopeo/1.9.3"
time="2026-11-28T22:00:07Z" level=info msg="response completed" http.request.method=GET
'''


def test_the_access_log_is_counted_per_node_and_repository():
    got = ni.count(LOG.splitlines())
    assert got == {
        ('198.18.0.11', 'mpi-testbed/mpich-4.0'): {'manifests': 1, 'blobs': 1,
                                                  'bytes': 928 + 386771967},
        ('198.18.0.12', 'mpi-testbed/mpich-4.0'): {'manifests': 1, 'blobs': 0, 'bytes': 928}}


def test_a_tool_failure_is_one_line():
    r = SimpleNamespace(returncode=1, stderr='time="x" level=fatal msg="initializing source '
                        'docker://tbreg:5000/mpi-testbed/x:current: reading manifest current '
                        'in tbreg:5000/mpi-testbed/x: manifest unknown"\n')
    assert ni.cause(r) == ('initializing source docker://tbreg:5000/mpi-testbed/x:current: '
                           'reading manifest current in tbreg:5000/mpi-testbed/x: manifest '
                           'unknown')
    assert ni.cause(SimpleNamespace(returncode=3, stderr='')) == 'exit 3'


def fake_tools(monkeypatch, store, pull_rc=0, unpack_rc=0, digest='sha256:11', label=None):
    calls = []

    def run(argv):
        calls.append(argv[0])
        if argv[0] == 'skopeo':
            layout, ref = argv[-1].split(':')[1:]
            os.makedirs(os.path.join(layout, 'blobs', 'sha256'), exist_ok=True)
            with open(os.path.join(layout, 'index.json'), 'w') as fh:
                json.dump({'manifests': [{'digest': digest, 'annotations': {
                    'org.opencontainers.image.ref.name': ref}}]}, fh)
            blobs = {digest: {'config': {'digest': 'sha256:c0'}},
                     'sha256:c0': {'config': {'Labels': {'mpi-testbed.stack': label or ref}}}}
            for d, content in blobs.items():
                with open(os.path.join(layout, 'blobs', 'sha256', d.split(':')[1]), 'w') as fh:
                    json.dump(content, fh)
            return SimpleNamespace(returncode=pull_rc, stderr='msg="pinging container '
                                   'registry tbreg:5000: connection refused"')
        os.makedirs(os.path.join(argv[-1], 'rootfs', 'usr'), exist_ok=True)
        os.chmod(os.path.join(argv[-1], 'rootfs', 'usr'), 0o555)    # as images have them
        return SimpleNamespace(returncode=unpack_rc, stderr='unpack: layer digest mismatch')
    monkeypatch.setattr(ni, 'run', run)
    return calls


def test_unpacked_once_per_manifest(tmp_path, monkeypatch):
    calls = fake_tools(monkeypatch, tmp_path)
    rec = ni.pull('mpich-4.0', 'tbreg:5000', store=str(tmp_path))
    assert rec['unpacked'] and rec['digest'] == 'sha256:11' and calls == ['skopeo', 'umoci']
    assert rec['image'] == 'tbreg:5000/mpi-testbed/mpich-4.0:current'
    calls.clear()
    rec = ni.pull('mpich-4.0', 'tbreg:5000', store=str(tmp_path))
    assert rec['unpacked'] is False and calls == ['skopeo']
    # a new manifest: the old tree (read-only folders and all) goes, the new one is unpacked
    calls = fake_tools(monkeypatch, tmp_path, digest='sha256:22')
    rec = ni.pull('mpich-4.0', 'tbreg:5000', store=str(tmp_path))
    assert rec['unpacked'] and calls == ['skopeo', 'umoci']
    assert (tmp_path / 'mpich-4.0' / 'unpacked-from').read_text() == 'sha256:22\n'


def test_a_failed_pull_or_unpack_names_the_image_and_the_cause(tmp_path, monkeypatch):
    fake_tools(monkeypatch, tmp_path, pull_rc=1)
    rec = ni.pull('mpich-4.0', 'tbreg:5000', store=str(tmp_path))
    assert rec['error'] == ('pull of tbreg:5000/mpi-testbed/mpich-4.0:current failed: pinging '
                            'container registry tbreg:5000: connection refused')
    fake_tools(monkeypatch, tmp_path, unpack_rc=1)
    rec = ni.pull('mpich-4.0', 'tbreg:5000', store=str(tmp_path))
    assert rec['error'] == ('unpack of tbreg:5000/mpi-testbed/mpich-4.0:current (sha256:11) '
                            'failed: unpack: layer digest mismatch')
    assert not (tmp_path / 'mpich-4.0' / 'unpacked-from').exists()


def test_the_rootfs_is_one_path_on_every_node():
    assert ni.rootfs('mpich-4.0') == os.path.join(ni.STORE, 'this-node', 'mpich-4.0', 'rootfs')


def test_an_image_of_another_stack_is_refused_before_it_is_unpacked(tmp_path, monkeypatch):
    calls = fake_tools(monkeypatch, tmp_path, label='openmpi-4.1')
    rec = ni.pull('mpich-4.0', 'tbreg:5000', store=str(tmp_path))
    assert rec['error'] == ("tbreg:5000/mpi-testbed/mpich-4.0:current (sha256:11) holds stack "
                            "'openmpi-4.1', not 'mpich-4.0' (its label mpi-testbed.stack): push "
                            "the right image (make images STACKS=mpich-4.0)")
    assert calls == ['skopeo']
