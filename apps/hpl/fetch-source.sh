#!/bin/bash
# fetch-source.sh DESTDIR [--setup-apt] [--package NAME]
#
# Puts Debian bookworm's hpcc source (.dsc and orig tarball; the orig tarball
# carries HPL 2.0 under hpl/), or with --package the source package NAME (the
# installer's source builds: mpich, lam), into DESTDIR, checked against the checksums that
# Debian publishes. Only Debian's archive is used: the URLs and the .dsc
# checksum come from `apt-get source --print-uris hpcc`, which needs a deb-src
# entry for bookworm/main. --setup-apt writes that entry and runs apt-get update
# (root only). The debian.tar.xz is not fetched (it is not needed, and the
# archive answers 404 for it). Idempotent: a tarball that already matches the
# .dsc in DESTDIR is kept and nothing is downloaded.
set -euo pipefail

die() { echo "fetch-source.sh: $*" >&2; exit 1; }
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }

DEST="" SETUP=0 PKG=hpcc
while [ $# -gt 0 ]; do
    a=$1; shift
    case "$a" in
        -h|--help) usage; exit 0 ;;
        --setup-apt) SETUP=1 ;;
        --package) [ $# -ge 1 ] || { echo "fetch-source.sh: --package needs a name" >&2; exit 2; }
                   PKG=$1; shift ;;
        -*) echo "fetch-source.sh: unknown option '$a'" >&2; exit 2 ;;
        *) [ -z "$DEST" ] || { echo "fetch-source.sh: extra argument '$a'" >&2; exit 2; }
           DEST="$a" ;;
    esac
done
[ -n "$DEST" ] || { echo "fetch-source.sh: missing DESTDIR (see --help)" >&2; exit 2; }
mkdir -p "$DEST"
cd "$DEST"

# SHA256 that FILE.dsc lists for NAME in its Checksums-Sha256 field.
dsc_sha256() {
    awk -v name="$2" '
        /^Checksums-Sha256:/ { inside = 1; next }
        /^[^ ]/              { inside = 0 }
        inside && $3 == name { print $1 }' "$1"
}

# True when a .dsc is here and the orig tarball matches its checksum.
verified() {
    local dsc tar want
    dsc=$(ls "${PKG}"_*.dsc 2>/dev/null | head -n1) || true
    [ -n "$dsc" ] || return 1
    tar=$(awk '/^Checksums-Sha256:/{f=1;next} /^[^ ]/{f=0} f && $3 ~ /\.orig\.tar\./ {print $3}' "$dsc")
    [ -n "$tar" ] && [ -f "$tar" ] || return 1
    want=$(dsc_sha256 "$dsc" "$tar")
    echo "$want  $tar" | sha256sum --check --status
}

if verified; then
    echo "fetch-source.sh: verified tarball already in $DEST: $(ls "${PKG}"_*.orig.tar.*)"
    exit 0
fi

if [ "$SETUP" = 1 ]; then
    [ "$(id -u)" = 0 ] || die "--setup-apt needs root"
    cat > /etc/apt/sources.list.d/debian-bookworm-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt-get update > /dev/null
fi

# From an empty directory: apt-get leaves out files it finds already present.
empty=$(mktemp -d); trap 'rm -rf "$empty"' EXIT
uris=$(cd "$empty" && apt-get source --print-uris "$PKG" 2>/dev/null | grep "^'") ||
    die "apt-get source --print-uris $PKG found nothing: add a deb-src entry for bookworm main (or run with --setup-apt) and apt-get update"

# Lines look like: 'URL' FILE SIZE SHA256:HEX
dsc_line=$(echo "$uris" | awk '$2 ~ /\.dsc$/')
[ -n "$dsc_line" ] || die "no .dsc among the URIs apt-get printed"
read -r dsc_url dsc_name _ dsc_sum <<<"$dsc_line"
dsc_url=${dsc_url//\'/}
dsc_sum=${dsc_sum#SHA256:}

fetch() { curl --fail --silent --show-error --location -o "$2.part" "$1" && mv "$2.part" "$2"; }
command -v curl > /dev/null || die "curl not found (apt-get install curl)"

fetch "$dsc_url" "$dsc_name" || die "download of $dsc_url failed"
echo "$dsc_sum  $dsc_name" | sha256sum --check --status ||
    die "$dsc_name does not match the SHA256 in Debian's Sources index ($dsc_sum)"

tar_name=$(awk '/^Checksums-Sha256:/{f=1;next} /^[^ ]/{f=0} f && $3 ~ /\.orig\.tar\./ {print $3}' "$dsc_name")
[ -n "$tar_name" ] || die "$dsc_name lists no orig tarball in Checksums-Sha256"
want=$(dsc_sha256 "$dsc_name" "$tar_name")
fetch "${dsc_url%/*}/$tar_name" "$tar_name" || die "download of $tar_name failed"
got=$(sha256sum "$tar_name" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
    rm -f "$tar_name"
    die "SHA256 mismatch for $tar_name: got $got, $dsc_name says $want (file removed)"
fi
echo "fetch-source.sh: $tar_name verified (SHA256 $got) in $DEST"
