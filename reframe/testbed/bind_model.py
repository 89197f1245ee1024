"""The bind model (docs/bind-model.md): ONE image holds the testbed's point-to-point program,
built once against the MPICH ABI (libmpi.so.12) and once against the MPI standard ABI
(libmpi_abi.so.1), and no MPI library; at run time each rank runs in it under ch-run with the
host stack's library bound in. This module is the logic, with no ReFrame in it (ci/
bind_image.sh runs it with the system's python3): which stacks provide which ABI, what is bound
where and which libraries are staged beside the binds, the checks of the image and of what a
bound rank loaded, and the table of bind-model over native time. tests/bind_model.py runs it.

    python3 -m testbed.bind_model check-image ROOTFS   exit 1 naming any MPI library in ROOTFS
    MPICC -show | python3 -m testbed.bind_model wrapper-flags
                                                       the wrapper's compile flags, then its
                                                       link flags, its rpath left out
"""
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass

#: inside the image: where the stack's library directory is bound, and the staged folder
#: (the ABI's soname where the stack's file has another name, and the libraries the stack's
#: library needs that the image lacks)
LIB = '/opt/host-mpi/lib'
SHIM = '/opt/host-mpi/shim'
#: the image's programs, one per ABI
PROGRAM_DIR = '/opt/bind-abi/bin'
#: where make bind-image leaves its record (image, archive, the unpacked copy for ch-run)
STATE = 'bind-abi.json'


@dataclass(frozen=True)
class Abi:
    name: str
    soname: str
    program: str
    what: str


ABIS = {
    'mpich': Abi('mpich', 'libmpi.so.12', f'{PROGRAM_DIR}/p2p-mpich-abi',
                 'the MPICH ABI (MPICH, Intel MPI, MVAPICH2)'),
    'standard': Abi('standard', 'libmpi_abi.so.1', f'{PROGRAM_DIR}/p2p-mpi-abi',
                    'the MPI standard ABI (MPI 5.0)'),
}

#: the image's own library folders (Debian bookworm, merged /usr): never bound over nor put
#: in LD_LIBRARY_PATH, which would load the host's C library into the image
SYSTEM_DIRS = ('/lib', '/lib64', '/usr/lib', '/lib/x86_64-linux-gnu', '/usr/lib/x86_64-linux-gnu',
               '/usr/local/lib')
#: folders of plug-ins a library loads from beside itself (dlopen, so ldd does not list them):
#: UCX's transports beside libucs, libfabric's providers beside libfabric
PLUGIN_DIRS = {'libucs.so.0': 'ucx', 'libfabric.so.1': 'libfabric'}
#: file names of MPI libraries: an image of the bind model holds none of them
MPI_LIBRARY = re.compile(r'^lib(mpi|mpich|mpi_abi|pmpi|open-rte|open-pal|mpl|fmpich)'
                         r'([._][^/]*)?\.so(\.[0-9.]+)?$')


class BindError(Exception):
    """A problem a user can fix, in one line."""


def library_of(stack, abi, exists=os.path.exists):
    """The host file of `stack`'s library for ABI `abi` ('mpich' or 'standard'), or None where
    the stack does not provide it. The MPICH ABI: stacks with the registry feature mpich-abi,
    whose libmpi.so.12 is the file their peers load under that soname (site/stacks.toml: a
    Debian stack's libmpich.so.12); the standard ABI: whichever stack ships libmpi_abi.so.1
    beside that library or in {prefix}/lib (the file decides: no registry field names it)."""
    mpich = None
    if 'mpich-abi' in stack.features:
        mpich = stack.peers.get('imb', {}).get('libmpi.so.12') or \
            os.path.join(stack.prefix, 'lib', 'libmpi.so.12')
    if abi == 'mpich':
        return mpich
    if abi != 'standard':
        raise BindError(f'ABI {abi!r}: expected one of {", ".join(ABIS)}')
    if 'mpi' not in stack.features:
        return None
    dirs = ([os.path.dirname(mpich)] if mpich else []) + \
        ([os.path.join(stack.prefix, 'lib')] if stack.prefix else [])
    for d in dict.fromkeys(dirs):
        if exists(os.path.join(d, ABIS['standard'].soname)):
            return os.path.join(d, ABIS['standard'].soname)
    return None


def stacks_for(stacks, abi, exists=os.path.exists):
    """[(stack, its library)] of the registry's `stacks` that provide `abi`."""
    return [(s, lib) for s in stacks if (lib := library_of(s, abi, exists))]


def parse_ldd(text):
    """[(soname, host file)] of ldd's output; the vDSO and the loader left out. A library ldd
    did not find stops with one line: the host stack itself cannot load."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r'^(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$', line)
        if not m:
            continue
        name, where = m.groups()
        if where == 'not found':
            raise BindError(f'ldd: {name} not found: the library cannot load on the host '
                            f'either (reinstall the stack: make setup)')
        if where and os.path.isabs(where):
            out.append((name, where))
    return out


def image_sonames(rootfs):
    """The file names of the image's own library folders (what its loader finds by itself)."""
    names = set()
    for d in SYSTEM_DIRS:
        try:
            names.update(os.listdir(os.path.join(rootfs, d.lstrip('/'))))
        except OSError:
            pass
    return names


def mpi_libraries_in(rootfs):
    """Every MPI library file in the image (paths inside it): none in a bind-model image."""
    found = []
    for root, dirs, files in os.walk(rootfs):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        found += ['/' + os.path.relpath(os.path.join(root, f), rootfs)
                  for f in files if MPI_LIBRARY.match(f)]
    return sorted(found)


@dataclass
class BindPlan:
    """What one bound rank needs: the stack's library folder bound at LIB, the staged folder
    at SHIM with `links` (name -> target inside the image) and `copies` (name -> host file),
    and LD_LIBRARY_PATH."""
    libdir: str
    links: dict
    copies: dict
    ld_library_path: str

    def binds(self, shim_host):
        return [(self.libdir, LIB), (shim_host, SHIM)]


def bind_plan(library, abi, ldd_deps, in_image, isdir=os.path.isdir, real=os.path.realpath):
    """The binds for `library` (a host file) to serve ABI `abi` in the image.

    - its folder is bound at LIB; a folder of the image's own kind (SYSTEM_DIRS: a Debian
      stack's /usr/lib/x86_64-linux-gnu) is bound too but never put in LD_LIBRARY_PATH, since
      it holds the host's C library;
    - the shim (SHIM, first in LD_LIBRARY_PATH) links the ABI's soname to the file when its
      name differs (Debian's libmpich.so.12 as libmpi.so.12) or its folder is a system one;
      once the library is reached through the shim, its $ORIGIN is the shim, so every library
      it needs from its own folder that the image lacks is linked there too, with the
      plug-in folders beside them (UCX's transports);
    - a needed library from elsewhere on the host that the image lacks (ldd on the host:
      `ldd_deps`; `in_image`: the image's own file names) is copied into the shim."""
    soname = ABIS[abi].soname
    libdir = os.path.dirname(library)
    system = os.path.normpath(libdir) in SYSTEM_DIRS
    through_shim = system or os.path.basename(library) != soname
    links, copies = {}, {}
    if through_shim:
        links[soname] = f'{LIB}/{os.path.basename(library)}'
    for name, path in ldd_deps:
        if name in in_image or name == soname:
            continue
        path = os.path.join(real(os.path.dirname(path)), os.path.basename(path))
        inside = path.startswith(libdir.rstrip('/') + '/')
        if inside and through_shim:
            rel = os.path.relpath(path, libdir)
            links[name] = f'{LIB}/{rel}'
            plugins = PLUGIN_DIRS.get(name)
            if plugins and isdir(os.path.join(os.path.dirname(path), plugins)):
                links[plugins] = f'{LIB}/{os.path.join(os.path.dirname(rel), plugins)}' \
                    .replace('/./', '/')
        elif not inside:
            copies[name] = path
    path = SHIM if system else f'{SHIM}:{LIB}'
    return BindPlan(libdir, links, copies, path)


def stage_shim(shim, plan):
    """Write the plan's shim folder on the host: its links (to paths inside the image) and
    copies (of host files); world-readable, for the job account."""
    if os.path.isdir(shim):
        shutil.rmtree(shim)
    os.makedirs(shim)
    for name, target in plan.links.items():
        os.symlink(target, os.path.join(shim, name))
    for name, host in plan.copies.items():
        shutil.copy(host, os.path.join(shim, name))
        os.chmod(os.path.join(shim, name), 0o755)
    os.chmod(shim, 0o755)


def rank_words(rootfs, plan, shim_host, join=None, bind=True):
    """The words before a program that run it in the image with the stack's library bound:
    ch-run with the two binds, LD_LIBRARY_PATH set inside the image only (ch-run passes the
    rest of the job's environment: the stack's variables reach the library). `join`: (ranks
    on this host, a tag of the launch): the ranks share one container (ch-run --join), as
    ranks of a node do under srun; each in a user namespace of its own, UCX's shared memory
    cannot open its peer's /proc/PID/fd ("mm_posix.c ... Permission denied"). `bind` false
    leaves the binds out (the proof that the test's sanity catches an image without them)."""
    words = ['ch-run']
    if join:
        words += [f'--join-ct={join[0]}', f'--join-tag={join[1]}']
    for src, dst in plan.binds(shim_host) if bind else []:
        words += ['-b', f'{src}:{dst}']
    return words + [rootfs, '--', 'env', f'LD_LIBRARY_PATH={plan.ld_library_path}']


def resolved(ldd_text, soname):
    """Where ldd run inside the image resolved `soname` ('not found' or a path), None if it
    did not list it."""
    for line in ldd_text.splitlines():
        m = re.match(rf'^\s*{re.escape(soname)} => (.*?)(?: \(0x[0-9a-f]+\))?\s*$', line)
        if m:
            return m.group(1)
    return None


def load_problem(ldd_text, abi):
    """Why the bound program would not load the stack's library through the bind (ldd of it
    inside the image, with the bind and LD_LIBRARY_PATH of the run), or None."""
    soname = ABIS[abi].soname
    where = resolved(ldd_text, soname)
    if where is None:
        return f'ldd in the image does not list {soname}: {ldd_text.strip()[:200]!r}'
    if where == 'not found':
        return f'{soname} not found in the image: the bind of the stack\'s library is missing'
    if not where.startswith(('/opt/host-mpi/', LIB, SHIM)):
        return (f'{soname} resolved to {where} in the image, not through the bind '
                f'({SHIM}, {LIB}): the image lacks the bind')
    missing = re.findall(r'^\s*(\S+) => not found', ldd_text, re.M)
    if missing:
        return f'in the image {", ".join(missing)} not found: the bind lacks them'
    return None


def format_table(rows):
    """The bind-model table as markdown: rows of (stack, abi, size, bind us, native us, ratio)."""
    lines = ['| stack | ABI | size B | bind us | native us | bind/native |',
             '|---|---|---:|---:|---:|---:|']
    for stack, abi, size, b, n, r in rows:
        lines.append(f'| {stack} | {abi} | {size} | {b:.2f} | {n:.2f} | {r:.3f} |')
    return '\n'.join(lines)


def wrapper_flags(show):
    """(compile flags, link flags) of an MPI compiler wrapper's -show line, without its rpath
    (-Wl,-rpath DIR and --enable-new-dtags): a program for an image names no host folder."""
    words, out, skip = shlex.split(show)[1:], [], False
    for w in words:
        if skip:
            skip = False
        elif w in ('-Wl,-rpath', '-rpath'):
            skip = True
        elif w.startswith(('-Wl,-rpath,', '-Wl,--enable-new-dtags', '-Wl,-rpath=')):
            continue
        else:
            out.append(w)
    return ([w for w in out if w.startswith(('-I', '-D'))],
            [w for w in out if w.startswith(('-L', '-l'))])


def main(argv):
    if argv[:1] == ['check-image'] and len(argv) == 2:
        if not os.path.isdir(argv[1]):
            print(f'error: {argv[1]}: no unpacked image (make bind-image)', file=sys.stderr)
            return 2
        found = mpi_libraries_in(argv[1])
        if found:
            print(f'error: {argv[1]}: the bind-model image holds MPI libraries of its own '
                  f'({", ".join(found[:3])}): containers/bind-abi/Containerfile must add none',
                  file=sys.stderr)
            return 1
        print(f'{argv[1]}: no MPI library in the image')
        return 0
    if argv == ['wrapper-flags']:
        cflags, libs = wrapper_flags(sys.stdin.read())
        print(' '.join(cflags))
        print(' '.join(libs))
        return 0
    print(__doc__.split('\n\n')[1], file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
