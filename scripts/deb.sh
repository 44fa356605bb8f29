#!/usr/bin/env bash
# deb.sh BUILD VERSION -- build BUILD/tdax_VERSION_ARCH.deb with dpkg-deb:
# `make install` into a staging root under /usr (the unit in
# /lib/systemd/system, Debian 12's place), the man page compressed, the
# copyright file and md5sums Debian asks for. Called by `make deb`.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1 version=$2
arch=$(dpkg --print-architecture)
root=$build/deb/root
rm -rf "$build/deb"
make --no-print-directory -s install DESTDIR="$PWD/$root" PREFIX=/usr UNITDIR=/lib/systemd/system >/dev/null
gzip -9n "$root/usr/share/man/man1/tdax.1"
# The example configuration is the package's /etc/tdax/tdax.conf (a conffile:
# dpkg keeps the operator's edits across upgrades, purge removes it).
install -D -m 0644 dist/tdax.conf "$root/etc/tdax/tdax.conf"
rm "$root/usr/share/doc/tdax/tdax.conf.example"
install -d "$root/usr/share/doc/tdax" "$root/DEBIAN"
cat >"$root/usr/share/doc/tdax/copyright" <<'TXT'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: tdax
Source: the tdax source tree (README.md)
Comment: tdax makes fsync cheap for unmodified applications on persistent memory.

Files: *
Copyright: the tdax authors
License: none-yet
 No license has been chosen yet; all rights reserved by the authors.
TXT
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<TXT
Package: tdax
Version: $version
Architecture: $arch
Maintainer: tdax authors <tdax@localhost>
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
