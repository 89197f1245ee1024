#!/bin/bash
# build.sh --cc WRAPPER --out DIR [--extra-src FILE] [--src-dir DIR] [--work DIR] [--keep]
#
# Builds HPL 2.0 (the copy in Debian's hpcc source) for one MPI stack and puts
# the program at DIR/xhpl, with DIR/build-info.json beside it, and
# DIR/dgemm_rate (the same BLAS's single-core DGEMM rate, see dgemm_rate.c).
#   --cc WRAPPER     MPI compile wrapper, used as compiler and linker
#   --out DIR        where xhpl goes (created if missing)
#   --extra-src FILE a C file compiled into xhpl (LAM: ../common/lam_iovec_fix.c)
#   --src-dir DIR    where fetch-source.sh keeps the verified tarball
#                    (default /var/tmp/mpi-testbed-hpl/src, outside the repo)
#   --work DIR       build tree (default: a new temporary directory, removed
#                    after a good build unless --keep)
# Builds are cached by their inputs (the source tarball, this script, the
# patches, our C sources, the extra source, the wrapper, its compiler and the
# BLAS) under TESTBED_BUILD_CACHE (default /var/tmp/mpi-testbed-hpl/cache;
# "off" disables): the same inputs give the same programs, so a second
# build of a stack copies them (the record then says "cached":true).
# Prints one record: HPL-BUILD {"cc":...,"blas":...,"build_s":...,...}
# BLAS: Debian's single-threaded OpenBLAS (libopenblas0-serial) when it is
# installed, linked by path with an rpath so the system-wide alternative
# (often the pthread build) is not used; otherwise -lopenblas, and then runs
# must set OPENBLAS_NUM_THREADS=1 (build-info.json says which: "blas").
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
bad() { echo "build.sh: $*" >&2; exit 2; }
die() { echo "build.sh: $*" >&2; exit 1; }

CC_W="" OUT="" EXTRA="" SRC_DIR=/var/tmp/mpi-testbed-hpl/src WORK="" KEEP=0
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --cc|--out|--extra-src|--src-dir|--work)
            [ $# -ge 2 ] || bad "option '$1' needs a value"
            case "$1" in
                --cc) CC_W=$2 ;; --out) OUT=$2 ;; --extra-src) EXTRA=$2 ;;
                --src-dir) SRC_DIR=$2 ;; --work) WORK=$2 ;;
            esac
            shift 2 ;;
        --keep) KEEP=1; shift ;;
        *) bad "unknown option '$1' (see --help)" ;;
    esac
done
[ -n "$CC_W" ] || bad "missing --cc WRAPPER"
[ -n "$OUT" ] || bad "missing --out DIR"
command -v "$CC_W" > /dev/null || bad "--cc '$CC_W' is not an executable"
CC_W=$(command -v "$CC_W")
if [ -n "$EXTRA" ]; then
    [ -f "$EXTRA" ] || bad "--extra-src '$EXTRA' is not a file"
    EXTRA=$(cd "$(dirname "$EXTRA")" && pwd)/$(basename "$EXTRA")
fi
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)

t0=$(date +%s.%N)
"$HERE/fetch-source.sh" "$SRC_DIR" > /dev/null
TARBALL=$(ls "$SRC_DIR"/hpcc_*.orig.tar.gz)

SERIAL_DIR=/usr/lib/x86_64-linux-gnu/openblas-serial
if [ -e "$SERIAL_DIR/libopenblas.so.0" ]; then
    BLAS_LIBS="$SERIAL_DIR/libopenblas.so.0 -Wl,-rpath,$SERIAL_DIR"; BLAS=openblas-serial
else
    echo "build.sh: libopenblas0-serial not installed; linking -lopenblas: run with OPENBLAS_NUM_THREADS=1" >&2
    BLAS_LIBS="-lopenblas"; BLAS=openblas-default-set-OPENBLAS_NUM_THREADS=1
fi

CACHE_ROOT=${TESTBED_BUILD_CACHE:-/var/tmp/mpi-testbed-hpl/cache}
KEY=$( { sha256sum "$TARBALL" "$0" "$HERE"/*.patch "$HERE"/*.[ch] "$HERE"/../common/*.[ch] \
             ${EXTRA:+"$EXTRA"} | cut -d' ' -f1
         echo "$CC_W $BLAS_LIBS"; sha256sum "$CC_W" | cut -d' ' -f1
         "$CC_W" --version 2>&1 | sed -n 1p; true; } | sha256sum | cut -c1-20)
if [ "$CACHE_ROOT" != off ] && [ -x "$CACHE_ROOT/$KEY/xhpl" ]; then
    cp "$CACHE_ROOT/$KEY/xhpl" "$CACHE_ROOT/$KEY/dgemm_rate" "$CACHE_ROOT/$KEY/build-info.json" "$OUT/"
    echo "HPL-BUILD $(sed 's/}$/,"cached":true,"cache_key":"'"$KEY"'"}/' "$OUT/build-info.json")"
    exit 0
fi

if [ -z "$WORK" ]; then WORK=$(mktemp -d "${TMPDIR:-/tmp}/hpl-build.XXXXXX"); else KEEP=1; fi
mkdir -p "$WORK"; WORK=$(cd "$WORK" && pwd)
rm -rf "$WORK/hpl"
tar xzf "$TARBALL" -C "$WORK" --strip-components=1 hpcc-1.5.0/hpl
for p in mpi2.patch standalone.patch; do
    patch -d "$WORK" -p1 --quiet --forward < "$HERE/$p" || die "$p does not apply"
done

# Our own Make.<arch>: the variables HPL's makes/Make.* expect, nothing more.
# gcc 12 needs no extra flag: HPL 2.0 has no tentative definitions shared
# between objects, so it builds and links under gcc's -fno-common default
# (tried: no -fcommon, no warnings at -O2).
ARCH=testbed
cat > "$WORK/hpl/Make.$ARCH" <<MK
SHELL     = /bin/sh
CD        = cd
CP        = cp
LN_S      = ln -sf
MKDIR     = mkdir -p
RM        = /bin/rm -f
TOUCH     = touch
ARCH      = $ARCH
TOPdir    = $WORK/hpl
INCdir    = \$(TOPdir)/include
BINdir    = \$(TOPdir)/bin/\$(ARCH)
LIBdir    = \$(TOPdir)/lib/\$(ARCH)
HPLlib    = \$(LIBdir)/libhpl.a
# MPI comes from the wrapper; BLAS through its C interface (cblas_*).
MPinc     =
MPlib     =
LAinc     =
LAlib     = $BLAS_LIBS
F2CDEFS   =
HPL_INCLUDES = -I\$(INCdir) -I\$(INCdir)/\$(ARCH)
HPL_LIBS  = \$(HPLlib) \$(LAlib) -lm
HPL_OPTS  = -DHPL_CALL_CBLAS
HPL_DEFS  = \$(F2CDEFS) \$(HPL_OPTS) \$(HPL_INCLUDES)
CC        = $CC_W
CCNOOPT   = \$(HPL_DEFS)
CCFLAGS   = \$(HPL_DEFS) -O2
LINKER    = $CC_W
LINKFLAGS = -O2
ARCHIVER  = ar
ARFLAGS   = r
RANLIB    = ranlib
MK

t1=$(date +%s.%N)
# HPL's top Makefile copies its per-folder Makefiles in steps that race under -j: those steps
# one at a time, then each folder's objects compiled on every core.
( cd "$WORK/hpl" && MAKEFLAGS= make arch=$ARCH startup &&
  make -j"$(nproc)" arch=$ARCH build ) > "$WORK/make.log" 2>&1 ||
    { tail -n 30 "$WORK/make.log" >&2; die "make failed (log: $WORK/make.log)"; }
# HPCC's Make.ptest only archives the driver into libhpl.a; link xhpl here.
INC="-I$WORK/hpl/include -I$WORK/hpl/include/$ARCH -I$HERE/../common -DHPL_CALL_CBLAS"
"$CC_W" -std=c99 -O2 -Wall -Wextra $INC -c "$HERE/xhpl_main.c" -o "$WORK/xhpl_main.o"
# The library version and self-binding every program of apps/ shares.
for c in tb_version tb_bind; do
    "$CC_W" -std=c99 -O2 -Wall -Wextra -c "$HERE/../common/$c.c" -o "$WORK/$c.o"
done
# The panels' time inside MPI (panel_time.c): HPL's MPI_Iprobe and MPI_Recv are wrapped.
"$CC_W" -std=c11 -O2 -Wall -Wextra -c "$HERE/panel_time.c" -o "$WORK/panel_time.o"
# panel_time.c's statistics, its raw copies (tb_raw: memcpy, the pipe between the cores and
# the pair's shared segment) and kernel copy; the hang watchdog (its beats: --wrap below)
for c in tb_median tb_raw tb_raw_pair tb_cma tb_watchdog; do
    "$CC_W" -std=c99 -O2 -Wall -Wextra -c "$HERE/../common/$c.c" -o "$WORK/$c.o"
done
objs="$WORK/xhpl_main.o $WORK/panel_time.o $WORK/tb_version.o $WORK/tb_bind.o"
objs="$objs $WORK/tb_median.o $WORK/tb_raw.o $WORK/tb_raw_pair.o $WORK/tb_cma.o $WORK/tb_watchdog.o"
if [ -n "$EXTRA" ]; then
    "$CC_W" -std=c99 -O2 -Wall -Wextra -c "$EXTRA" -o "$WORK/extra.o"
    objs="$objs $WORK/extra.o"
fi
"$CC_W" -O2 -Wl,--wrap=MPI_Iprobe,--wrap=MPI_Recv,--wrap=HPL_pdmatgen,--wrap=HPL_pdpanel_init \
    -o "$WORK/xhpl" $objs "$WORK/hpl/lib/$ARCH/libhpl.a" $BLAS_LIBS -lm -pthread ||
    die "link failed"
# Not an MPI program: the plain C compiler, xhpl's BLAS.
cc -std=c99 -O2 -Wall -Wextra -o "$WORK/dgemm_rate" "$HERE/dgemm_rate.c" $BLAS_LIBS ||
    die "dgemm_rate: build failed"
t2=$(date +%s.%N)

cp "$WORK/xhpl" "$WORK/dgemm_rate" "$OUT/"
# build_s: make + link; total_s: also source check, extraction and patching.
info=$(awk -v cc="$CC_W" -v ex="$EXTRA" -v blas="$BLAS" -v src="$(basename "$TARBALL")" \
           -v t0="$t0" -v t1="$t1" -v t2="$t2" 'BEGIN {
    printf "{\"cc\":\"%s\",\"extra_src\":\"%s\",\"blas\":\"%s\",\"build_s\":%.2f,\"total_s\":%.2f,\"source\":\"%s\"}",
           cc, ex, blas, t2 - t1, t2 - t0, src }')
echo "$info" > "$OUT/build-info.json"
if [ "$CACHE_ROOT" != off ]; then
    # Filled under a temporary name and renamed: a half-written entry is never used.
    mkdir -p "$CACHE_ROOT"
    tmp=$(mktemp -d "$CACHE_ROOT/.new.XXXXXX")
    cp "$OUT/xhpl" "$OUT/dgemm_rate" "$OUT/build-info.json" "$tmp/" &&
        { mv -T "$tmp" "$CACHE_ROOT/$KEY" 2> /dev/null || rm -rf "$tmp"; }
fi
echo "HPL-BUILD $info"
[ "$KEEP" = 1 ] || rm -rf "$WORK"
