# LAM/MPI for the mpi-testbed: Spack's builtin repository has no LAM, the testbed compares
# against it (stack lam-7.1, Debian's lam 7.1.4 on the embedded default). Written for this
# project; not built here (no Spack on the machine it was written on): see
# docs/spack-and-containers.md.
from spack_repo.builtin.build_systems.autotools import AutotoolsPackage

from spack.package import *


class LamMpi(AutotoolsPackage):
    """LAM/MPI 7.1: an MPI-1.2 implementation (with parts of MPI-2) whose ranks talk through a
    per-job daemon universe (lamboot/lamhalt) and a chosen request progression interface."""

    homepage = "https://www.open-mpi.org/software/lam/"
    # The upstream tarball, kept by the Open MPI project since LAM's end of life.
    url = "https://www.open-mpi.org/software/lam/v7.1/downloads/lam-7.1.4.tar.bz2"

    # LEFT: no checksum yet (the tarball could not be fetched where this was written). Fill it
    # with `spack checksum lam-mpi 7.1.4`; until then `spack install --no-checksum`.
    version("7.1.4")

    # The RPI (request progression interface) a run gets when it names none. Every RPI is
    # built either way, and the testbed names one in every run (LAM_MPI_SSI_rpi, the transport knob).
    variant(
        "rpi",
        default="usysv",
        values=("usysv", "sysv", "tcp", "lamd"),
        multi=False,
        description="Default RPI: usysv/sysv shared memory (spin/semaphore), tcp, or lamd",
    )
    # The agent lamboot's rsh boot module uses to reach other nodes. Debian compiled in
    # /usr/bin/rsh; clusters have ssh.
    variant(
        "rsh",
        default="ssh",
        values=("ssh", "rsh"),
        multi=False,
        description="Remote agent of the rsh boot module",
    )
    variant("romio", default=True, description="Build ROMIO (MPI-IO)")
    variant("fortran", default=True, description="Build the Fortran bindings")
    variant("cxx", default=True, description="Build the MPI-2 C++ bindings (mpi2cpp)")
    variant("shared", default=True, description="Shared libraries (as Debian ships them)")
    variant("static", default=True, description="Static libraries too (as Debian ships them)")

    provides("mpi@:1.2")  # mpi.h: MPI_VERSION 1, MPI_SUBVERSION 2

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("fortran", type="build", when="+fortran")

    def flag_handler(self, name, flags):
        # 2007 C with tentative definitions shared between files: GCC >= 10 defaults to
        # -fno-common and the link then fails on duplicate symbols.
        if name == "cflags" and self.spec.satisfies("%gcc@10:"):
            flags.append("-fcommon")
        return (flags, None, None)

    def configure_args(self):
        spec = self.spec
        agent = "ssh -x" if spec.satisfies("rsh=ssh") else "rsh"
        args = [
            f"--with-rpi={spec.variants['rpi'].value}",
            f"--with-rsh={agent}",
        ]
        args += self.enable_or_disable("shared")
        args += self.enable_or_disable("static")
        if spec.satisfies("+romio"):
            # ROMIO's build fails with today's ar ("ar: close.o: file format not recognized",
            # Debian bug #997125) unless configured with -ar_nolocal, as Debian's lam 7.1.4-7.
            args.append("--with-romio-flags=-ar_nolocal")
        else:
            args.append("--without-romio")
        if spec.satisfies("~fortran"):
            args.append("--without-fc")
        if spec.satisfies("~cxx"):
            args.append("--without-mpi2cpp")
        return args

    def setup_run_environment(self, env):
        # lamboot, mpirun and the wrappers find their help files and daemons through LAMHOME.
        env.set("LAMHOME", self.prefix)

    def setup_dependent_build_environment(self, env, dependent_spec):
        # LAM's wrappers call the compiler LAM was configured with, which under Spack was the
        # compiler wrapper of LAM's own build; a dependent's build (mpi-testbed-apps) names its
        # own through the variables the wrappers read first (LAM's hcc.cc: LAMMPICC, then
        # LAMCC, LAMHCC; hf77.cc: LAMMPIF77, then LAMF77).
        module = dependent_spec.package.module
        for var, attr in (("LAMMPICC", "spack_cc"), ("LAMMPIF77", "spack_f77")):
            if getattr(module, attr, None):
                env.set(var, getattr(module, attr))

    def setup_dependent_package(self, module, dependent_spec):
        self.spec.mpicc = join_path(self.prefix.bin, "mpicc")
        self.spec.mpicxx = join_path(self.prefix.bin, "mpic++")
        self.spec.mpif77 = join_path(self.prefix.bin, "mpif77")
        self.spec.mpifc = join_path(self.prefix.bin, "mpif77")
