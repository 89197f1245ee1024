"""The emulated cluster's OCI registry as seen by `make images` (site/cluster/oci_registry.py):
the tag is a hash of the image's inputs, a push of an image the registry has is skipped, and
a registry that is not there or refuses is named in one line."""
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from testbed_site.cluster import oci_registry as reg

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A copy of the files an image is made from, for tags to be taken of."""
    for path in reg.INPUTS + ['containers/mpich-4.0/Containerfile']:
        src, dst = REPO / path, tmp_path / path
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)
    (tmp_path / 'docs').mkdir()
    (tmp_path / 'docs' / 'x.md').write_text('a page')
    monkeypatch.setattr(reg, 'REPO', tmp_path)
    return tmp_path


def test_the_tag_changes_with_the_inputs_and_only_with_them(repo):
    first = reg.tag('mpich-4.0')
    assert first.startswith('in-') and len(first) == 19 and reg.tag('mpich-4.0') == first
    (repo / 'docs' / 'x.md').write_text('another page')        # not an input
    assert reg.tag('mpich-4.0') == first
    (repo / 'reframe' / 'testbed' / 'launch.py').write_text('# not what the image installs')
    assert reg.tag('mpich-4.0') == first
    for path in ('containers/mpich-4.0/Containerfile', 'site/stacks.toml',
                 'reframe/testbed/install.py', 'containers/base/Containerfile'):
        before = reg.tag('mpich-4.0')
        with open(repo / path, 'a') as fh:
            fh.write('\n# changed\n')
        assert reg.tag('mpich-4.0') != before, path


def test_a_stack_without_a_containerfile_is_named(repo):
    with pytest.raises(reg.RegistryError, match=r'no Containerfile for stack .nope. '
                                                r'\(make generate\)'):
        reg.tag('nope')


def test_the_address_comes_from_the_state_of_the_cluster_that_is_up(tmp_path):
    state = tmp_path / 'state.json'
    assert reg.address(str(state)) is None
    state.write_text(json.dumps({'registry': {'addr': '198.18.0.3', 'port': 5000}}))
    assert reg.address(str(state)) == '198.18.0.3:5000'
    state.write_text('{')
    assert reg.address(str(state)) is None


def test_the_configuration_serves_on_the_bridge_from_the_storage():
    text = reg.config()
    assert f"rootdirectory: {reg.STORAGE}\n" in text
    assert f"addr: {reg.REGISTRY['addr']}:{reg.PORT}\n" in text
    assert reg.REGISTRY['addr'].startswith('198.18.')      # the testbed's range only


def fake_skopeo(monkeypatch, have=False, copy_rc=0):
    calls = []

    def run(*argv):
        calls.append(argv)
        if argv[0] == 'inspect':
            return SimpleNamespace(returncode=0 if have else 1, stdout='', stderr='')
        return SimpleNamespace(returncode=copy_rc, stdout='',
                               stderr='time="x" level=fatal msg="writing blob: connection '
                                      'refused"')
    monkeypatch.setattr(reg, 'skopeo', run)
    monkeypatch.setattr(reg, 'address', lambda state_file=None: '198.18.0.3:5000')
    return calls


def test_a_push_of_new_inputs_copies_both_tags(repo, monkeypatch):
    calls = fake_skopeo(monkeypatch)
    t = reg.tag('mpich-4.0')
    line = reg.push('mpich-4.0', '/x/mpich-4.0.tar')
    assert line == f'mpich-4.0: pushed 198.18.0.3:5000/mpi-testbed/mpich-4.0:{t} (and :current)'
    assert [c[0] for c in calls] == ['inspect', 'copy', 'copy']
    assert calls[1][-2:] == ('oci-archive:/x/mpich-4.0.tar',
                             f'docker://198.18.0.3:5000/mpi-testbed/mpich-4.0:{t}')
    assert calls[2][-1] == 'docker://198.18.0.3:5000/mpi-testbed/mpich-4.0:current'


def test_an_image_the_registry_has_is_not_pushed_again(repo, monkeypatch):
    calls = fake_skopeo(monkeypatch, have=True)
    assert reg.push('mpich-4.0', '/x/a.tar').endswith('is in the registry already (same '
                                                      'inputs): not pushed; :current names it')
    # :current moved back to it from the registry's own copy: no archive read, no layer sent
    assert [c[0] for c in calls] == ['inspect', 'copy']
    assert calls[1][-2:] == (f"docker://198.18.0.3:5000/mpi-testbed/mpich-4.0:{reg.tag('mpich-4.0')}",
                             'docker://198.18.0.3:5000/mpi-testbed/mpich-4.0:current')


def test_a_refused_push_names_the_archive_the_image_and_the_cause(repo, monkeypatch):
    fake_skopeo(monkeypatch, copy_rc=1)
    with pytest.raises(reg.RegistryError, match=r'mpich-4.0: push of /x/a.tar to '
                                                r'198.18.0.3:5000/mpi-testbed/mpich-4.0:in-'
                                                r'.* failed: .*connection refused'):
        reg.push('mpich-4.0', '/x/a.tar')


def test_no_cluster_no_push(repo, monkeypatch):
    monkeypatch.setattr(reg, 'address', lambda state_file=None: None)
    with pytest.raises(reg.RegistryError, match=r'no registry: the emulated cluster is not up '
                                                r'\(make cluster-up\)'):
        reg.push('mpich-4.0', '/x/a.tar')
    assert reg.main(['push', 'mpich-4.0', '/x/a.tar']) == 1
    assert reg.main(['bogus']) == 2


def test_the_files_a_stack_entry_names_are_inputs(repo):
    """lam-7.1's entry names an extra source (apps/common/lam_iovec_fix.c): an input of its
    image, not of mpich-4.0's."""
    for path in ('containers/lam-7.1/Containerfile', 'apps/common/lam_iovec_fix.c'):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / path, repo / path)
    assert repo / 'apps/common/lam_iovec_fix.c' in reg.inputs('lam-7.1')
    assert repo / 'apps/common/lam_iovec_fix.c' not in reg.inputs('mpich-4.0')


def test_has_answers_for_the_inputs_tag_alone(repo, monkeypatch):
    """`has` (make cluster-images: an image the registry holds is not built again) asks the
    registry for the tag of the inputs as they are now; exit 0 or 1."""
    calls = fake_skopeo(monkeypatch, have=True)
    assert reg.main(['has', 'mpich-4.0']) == 0
    assert calls[0][-1] == f"docker://198.18.0.3:5000/mpi-testbed/mpich-4.0:{reg.tag('mpich-4.0')}"
    fake_skopeo(monkeypatch, have=False)
    assert reg.main(['has', 'mpich-4.0']) == 1


def test_current_points_at_the_inputs_tag_without_an_archive(repo, monkeypatch):
    """`current` (make cluster-images, an image not built again): one copy of a manifest."""
    calls = fake_skopeo(monkeypatch, have=True)
    assert reg.main(['current', 'mpich-4.0']) == 0
    assert [c[0] for c in calls] == ['copy']
    assert calls[0][-2:] == (f"docker://198.18.0.3:5000/mpi-testbed/mpich-4.0:{reg.tag('mpich-4.0')}",
                             'docker://198.18.0.3:5000/mpi-testbed/mpich-4.0:current')
