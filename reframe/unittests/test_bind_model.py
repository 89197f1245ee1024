"""The bind model (testbed/bind_model.py, tests/bind_model.py): which stacks serve which ABI,
what is bound where and staged beside the binds, the checks of the image and of what a bound
rank loads, and the table of bound over native time."""
import os

import pytest

from testbed import bind_model as bm
from testbed import registry

MULTIARCH = registry.MULTIARCH_LIB
IMAGE_HAS = {'libc.so.6', 'libm.so.6', 'libdl.so.2', 'librt.so.1', 'libpthread.so.0',
             'libudev.so.1'}

DEBIAN_MPICH_LDD = '''\
\tlinux-vdso.so.1 (0x00007f74921f9000)
\tlibhwloc.so.15 => /lib/x86_64-linux-gnu/libhwloc.so.15 (0x00007f748f998000)
\tlibucp.so.0 => /lib/x86_64-linux-gnu/libucp.so.0 (0x00007f748f88b000)
\tlibucs.so.0 => /lib/x86_64-linux-gnu/libucs.so.0 (0x00007f748f82f000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f748f64d000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f74921fb000)
\tlibudev.so.1 => /lib/x86_64-linux-gnu/libudev.so.1 (0x00007f748f53f000)
'''


def merged_usr(path):
    """os.path.realpath of a merged-/usr Debian host, without touching this one's disk."""
    return '/usr' + path if path.startswith('/lib/') or path == '/lib' else path


@pytest.fixture(scope='module')
def reg():
    return registry.load()


def test_the_mpich_abi_is_every_mpich_abi_stack_debians_under_its_own_name(reg):
    got = {s.name: lib for s, lib in bm.stacks_for(reg.stacks.values(), 'mpich')}
    assert set(got) == {'mpich-4.0', 'mpich-5.0', 'intel-mpi-2021', 'mpich-4.0-ch3sock'}
    assert got['mpich-4.0'] == f'{MULTIARCH}/libmpich.so.12'
    assert got['mpich-5.0'] == f'{reg.stacks["mpich-5.0"].prefix}/lib/libmpi.so.12'


def test_the_standard_abi_is_whichever_stack_ships_the_file(reg):
    ships = {f'{reg.stacks[s].prefix}/lib/libmpi_abi.so.1' for s in ('mpich-5.0',
                                                                      'intel-mpi-2021')}
    got = [s.name for s, _ in bm.stacks_for(reg.stacks.values(), 'standard', ships.__contains__)]
    assert sorted(got) == ['intel-mpi-2021', 'mpich-5.0']
    assert bm.stacks_for(reg.stacks.values(), 'standard', lambda p: False) == []
    # where it is looked for: beside the MPICH-ABI library, and in {prefix}/lib; PVM has no MPI
    asked = []
    bm.stacks_for(reg.stacks.values(), 'standard', lambda p: asked.append(p))
    assert f'{MULTIARCH}/libmpi_abi.so.1' in asked
    assert f'{reg.stacks["openmpi-5.0"].prefix}/lib/libmpi_abi.so.1' in asked
    assert not [p for p in asked if 'pvm' in p]
    with pytest.raises(bm.BindError, match="ABI 'ilp64': expected one of mpich, standard"):
        bm.library_of(reg.stacks['mpich-5.0'], 'ilp64')


def test_a_debian_stack_is_reached_through_the_shim_never_its_system_folder():
    lib = '/usr/lib/x86_64-linux-gnu/libmpich.so.12'
    plan = bm.bind_plan(lib, 'mpich', bm.parse_ldd(DEBIAN_MPICH_LDD), IMAGE_HAS,
                        isdir=lambda d: d.endswith('/ucx'), real=merged_usr)
    assert plan.libdir == '/usr/lib/x86_64-linux-gnu'
    # the host's system folder holds its C library: bound, but not searched
    assert plan.ld_library_path == bm.SHIM
    assert plan.links == {'libmpi.so.12': f'{bm.LIB}/libmpich.so.12',
                          'libhwloc.so.15': f'{bm.LIB}/libhwloc.so.15',
                          'libucp.so.0': f'{bm.LIB}/libucp.so.0',
                          'libucs.so.0': f'{bm.LIB}/libucs.so.0',
                          'ucx': f'{bm.LIB}/ucx'}
    assert plan.copies == {}        # libudev and libc: the image has them
    assert plan.binds('/stage/shim') == [('/usr/lib/x86_64-linux-gnu', bm.LIB),
                                         ('/stage/shim', bm.SHIM)]


def test_a_venv_stack_is_searched_in_its_folder_and_outside_libraries_are_copied():
    lib = '/opt/s/mpich-4.0-ch3sock/lib/libmpi.so.12'
    ldd = ('\tlibhwloc.so.15 => /lib/x86_64-linux-gnu/libhwloc.so.15 (0x1)\n'
           '\tlibfabric.so.1 => /opt/s/mpich-4.0-ch3sock/lib/mpich/libfabric.so.1 (0x2)\n'
           '\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x3)\n')
    plan = bm.bind_plan(lib, 'mpich', bm.parse_ldd(ldd), IMAGE_HAS, real=merged_usr)
    assert plan.ld_library_path == f'{bm.SHIM}:{bm.LIB}'
    assert plan.links == {}         # its own folder (and $ORIGIN/mpich) is bound as it is
    assert plan.copies == {'libhwloc.so.15': '/usr/lib/x86_64-linux-gnu/libhwloc.so.15'}


def test_a_library_of_another_name_outside_a_system_folder_is_linked_with_its_own_needs():
    plan = bm.bind_plan('/opt/x/lib/libmpich.so.12', 'mpich',
                        [('libucs.so.0', '/opt/x/lib/sub/libucs.so.0')], IMAGE_HAS,
                        isdir=lambda d: True, real=lambda p: p)
    assert plan.links == {'libmpi.so.12': f'{bm.LIB}/libmpich.so.12',
                          'libucs.so.0': f'{bm.LIB}/sub/libucs.so.0',
                          'ucx': f'{bm.LIB}/sub/ucx'}
    assert plan.ld_library_path == f'{bm.SHIM}:{bm.LIB}'


def test_a_library_the_host_cannot_find_stops_in_one_line():
    with pytest.raises(bm.BindError, match=r'^ldd: libucp.so.0 not found: the library cannot '
                                           r'load on the host either \(reinstall the stack'):
        bm.parse_ldd('\tlibucp.so.0 => not found\n')


def test_the_shim_is_staged_and_the_rank_words_bind_both_folders(tmp_path):
    host_lib = tmp_path / 'libhwloc.so.15'
    host_lib.write_bytes(b'\x7fELF')
    plan = bm.BindPlan('/usr/lib/x86_64-linux-gnu', {'libmpi.so.12': f'{bm.LIB}/libmpich.so.12'},
                       {'libhwloc.so.15': str(host_lib)}, bm.SHIM)
    shim = tmp_path / 'shim'
    bm.stage_shim(str(shim), plan)
    assert os.readlink(shim / 'libmpi.so.12') == f'{bm.LIB}/libmpich.so.12'
    assert (shim / 'libhwloc.so.15').read_bytes() == b'\x7fELF'
    words = bm.rank_words('/img/rootfs', plan, str(shim), join=(2, 'tb-x-r1'))
    assert words == ['ch-run', '--join-ct=2', '--join-tag=tb-x-r1',
                     '-b', f'/usr/lib/x86_64-linux-gnu:{bm.LIB}', '-b', f'{shim}:{bm.SHIM}',
                     '/img/rootfs', '--', 'env', f'LD_LIBRARY_PATH={bm.SHIM}']
    assert '-b' not in bm.rank_words('/img/rootfs', plan, str(shim), bind=False)
    bm.stage_shim(str(shim), plan)          # staged again: the same folder, no error


def test_an_image_with_an_mpi_library_of_its_own_is_found(tmp_path):
    (tmp_path / 'usr/lib/x86_64-linux-gnu').mkdir(parents=True)
    (tmp_path / 'usr/lib/x86_64-linux-gnu/libc.so.6').write_text('')
    (tmp_path / 'opt/bind-abi/bin').mkdir(parents=True)
    (tmp_path / 'opt/bind-abi/bin/p2p-mpich-abi').write_text('')
    assert bm.mpi_libraries_in(str(tmp_path)) == []
    assert 'libc.so.6' in bm.image_sonames(str(tmp_path))
    for name in ('libmpich.so.12', 'libmpi_abi.so.1', 'libmpi.so.40.30.0'):
        (tmp_path / 'usr/lib/x86_64-linux-gnu' / name).write_text('')
    assert bm.mpi_libraries_in(str(tmp_path)) == [
        '/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.0', '/usr/lib/x86_64-linux-gnu/libmpi_abi.so.1',
        '/usr/lib/x86_64-linux-gnu/libmpich.so.12']
    assert bm.main(['check-image', str(tmp_path)]) == 1


def test_what_the_bound_program_loaded_is_judged_from_ldd_in_the_image():
    good = ('\tlibmpi.so.12 => /opt/host-mpi/shim/libmpi.so.12 (0x1)\n'
            '\tlibucs.so.0 => /opt/host-mpi/shim/libucs.so.0 (0x2)\n')
    assert bm.load_problem(good, 'mpich') is None
    assert bm.load_problem('\tlibmpi.so.12 => not found\n', 'mpich') == (
        "libmpi.so.12 not found in the image: the bind of the stack's library is missing")
    assert 'resolved to /usr/lib/x86_64-linux-gnu/libmpi.so.12 in the image, not through the ' \
        'bind' in bm.load_problem('\tlibmpi.so.12 => /usr/lib/x86_64-linux-gnu/libmpi.so.12 '
                                  '(0x1)\n', 'mpich')
    assert bm.load_problem(good + '\tlibhwloc.so.15 => not found\n', 'mpich') == (
        'in the image libhwloc.so.15 not found: the bind lacks them')
    assert 'does not list libmpi_abi.so.1' in bm.load_problem(good, 'standard')


def test_the_table_is_written_as_markdown():
    table = bm.format_table([('mpich-5.0', 'mpich', 8, 1.5, 1.0, 1.1)])
    assert table.splitlines()[-1] == '| mpich-5.0 | mpich | 8 | 1.50 | 1.00 | 1.100 |'


def test_the_wrappers_flags_lose_their_rpath():
    show = ('cc -DMPI_ABI -I/opt/w/include -L/opt/w/lib -Wl,-rpath -Wl,/opt/w/lib '
            '-Wl,--enable-new-dtags -lmpi_abi')
    assert bm.wrapper_flags(show) == (['-DMPI_ABI', '-I/opt/w/include'],
                                      ['-L/opt/w/lib', '-lmpi_abi'])
