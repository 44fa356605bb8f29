#!/usr/bin/env bash
# deb.sh BUILD VERSION -- build BUILD/tdax_VERSION_ARCH.deb with dpkg-deb:
# `make install` into a staging root under /usr (the unit in
# /lib/systemd/system, Debian 12's place), the binaries stripped, the man
# page compressed, the copyright file, changelog and md5sums Debian asks for,
# and lintian's overrides for what is so by design (lintian finds no error or
# warning in it: tests/py/test_install.py). Called by `make deb`.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1 version=$2
arch=$(dpkg --print-architecture)
root=$build/deb/root
rm -rf "$build/deb"
make --no-print-directory -s install DESTDIR="$PWD/$root" PREFIX=/usr UNITDIR=/lib/systemd/system >/dev/null
# Stripped as dh_strip does (`make install` keeps the debugging information).
strip --remove-section=.comment --remove-section=.note "$root/usr/bin/tdax"
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$root"/usr/lib/tdax/*.so
gzip -9n "$root/usr/share/man/man1/tdax.1"
# The example configuration is the package's /etc/tdax/tdax.conf (a conffile:
# dpkg keeps the operator's edits across upgrades, purge removes it).
install -D -m 0644 dist/tdax.conf "$root/etc/tdax/tdax.conf"
rm "$root/usr/share/doc/tdax/tdax.conf.example"
install -d "$root/usr/share/doc/tdax" "$root/usr/share/lintian/overrides" "$root/DEBIAN"
# No public contact address has been chosen yet (bogus-mail-host below).
maintainer="tdax authors <tdax@localhost>"
# The date of the commit built (the VERSION file's outside a git clone), and
# the years of the history, for the changelog and the copyright notice.
date=$(git log -1 --format=%aD 2>/dev/null || date -u -R -r VERSION)
years=$(git log --format=%ad --date=format:%Y 2>/dev/null | sort -u |
	awk 'NR == 1 {f = $0} {l = $0} END {print f == l ? f : f "-" l}' || true)
[ -n "$years" ] || years=$(date -u -d "$date" +%Y)
cat >"$root/usr/share/doc/tdax/copyright" <<TXT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: tdax
Source: the tdax source tree (README.md)
Comment: tdax makes fsync cheap for unmodified applications on persistent memory.

Files: *
Copyright: $years the tdax authors
License: none-yet
 No license has been chosen yet; all rights reserved by the authors.
TXT
# tdax is its own Debian packaging (a native package): the changelog is one
# entry, this version and the build `tdax --version` names; the changes are
# the source tree's history. The distribution is bookworm: the Depends below
# are Debian 12's packages.
build_id=$("$build/bin/tdax" --version | sed -n 's/.*(build \(.*\)).*/\1/p')
cat <<TXT | gzip -9n >"$root/usr/share/doc/tdax/changelog.gz"
tdax ($version) bookworm; urgency=medium

  * tdax $version, built from commit ${build_id:-unknown} of its source tree
    by make deb; the changes are that tree's history (git log).

 -- $maintainer  $date
TXT
cat >"$root/usr/share/lintian/overrides/tdax" <<TXT
# No public contact address has been chosen for tdax yet (as no license has:
# see copyright); the package is built from the source tree by make deb, not
# uploaded to an archive. Any address put here would be invented.
tdax: bogus-mail-host Maintainer tdax@localhost
tdax: bogus-mail-host-in-debian-changelog tdax@localhost *
# libtdaxtrack.so is the policy alone (src/policy), loaded by the
# simulator: pure computation that calls no function of any library, so it
# has no library to depend on (a DT_NEEDED on libc would be a false one).
tdax: shared-library-lacks-prerequisites [usr/lib/tdax/libtdaxtrack.so]
TXT
chmod 0644 "$root/usr/share/doc/tdax/changelog.gz" "$root/usr/share/lintian/overrides/tdax"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<TXT
Package: tdax
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: libc6 (>= 2.36), libinih1, libisal2, libpmem2
Recommends: python3
Suggests: python3-matplotlib
Section: admin
Priority: optional
Homepage: https://localhost/tdax
Description: cheap fsync for unmodified applications on persistent memory
 tdax watches which file ranges an application syncs often, copies their
 writes into persistent memory (a CXL hybrid SSD's DRAM, PMem, or an
 emulated region) and answers their syncs with a memory fence, while the
 write-back to flash happens in the background. Run a program under it
 with 'tdax run -- PROGRAM'; tdax-recover.service (the regions of
 /etc/tdax/tdax.conf) or tdax-recover@.service (one region) brings the
 files up to date at boot, before the databases start.
TXT
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
	>"$root/DEBIAN/md5sums"
echo /etc/tdax/tdax.conf >"$root/DEBIAN/conffiles"
out=$build/tdax_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$out" >/dev/null
echo "deb: $out"
