#!/usr/bin/env bash
# deps.sh -- install what building and testing tdax needs on Debian 12:
# Debian packages (when missing) and a Python virtual environment with the
# pinned versions of requirements.txt in build/venv. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

# build, and the real applications the tests run under tdax
pkgs=(build-essential pkg-config libpmem2-dev libisal-dev libinih-dev python3 python3-venv sqlite3 util-linux
      redis-server redis-tools rocksdb-tools librocksdb-dev postgresql postgresql-contrib etcd-server
      libfuse3-dev fuse3 e2fsprogs mount clang-14 libclang-rt-14-dev
      qemu-system-x86 ndctl busybox-static cpio kmod)  # the last line: make vmtest's guests
pkgs+=(libpython3.11-testsuite)  # make test-cpython: CPython's suites, for /usr/bin/python3.11
pkgs+=(groff-base bash-completion systemd)  # checks of the man page, completion and unit (make install)
pkgs+=(lintian)  # the check of the Debian package (make deb)
pkgs+=(liburing-dev)  # tests/py/test_uring.py: writes and syncs through io_uring under tdax
pkgs+=(libaio-dev)  # tests/py/test_aio.py: writes through the kernel's AIO (libaio, io_submit) under tdax
pkgs+=(xfsprogs)  # tests/py/test_clone.py: a clone of blocks (FICLONE) into a file, on XFS, under tdax
pkgs+=(strace)  # tests/py/test_syscalls.py: the system calls tdax adds, counted
pkgs+=(stress-ng)  # tests/py/test_stressng.py: another project's file stressors, verified, under tdax
pkgs+=(python3-lmdb lmdb-utils)  # tests/py/test_views.py: LMDB (a read-only mapping of its data file), mdb_stat
pkgs+=(golang-go)  # tests/py/test_rewrite.py: a Go program (Debian's Go 1.19, as etcd's) under --intercept rewrite
pkgs+=("$@")
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	if [ "$(id -u)" != 0 ]; then
		echo "tdax: missing Debian packages: ${missing[*]}" >&2
		echo "      install them with: sudo apt-get install -y ${missing[*]}" >&2
		exit 1
	fi
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# Servers are started by the tests, on loopback, never as system services.
	made_policy=
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod +x /usr/sbin/policy-rc.d
		made_policy=1
	fi
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	[ -z "$made_policy" ] || rm -f /usr/sbin/policy-rc.d
fi

venv=build/venv
stamp=$venv/.requirements
if [ ! -x $venv/bin/python ] || ! cmp -s requirements.txt "$stamp"; then
	echo "deps: creating $venv"
	/usr/bin/python3 -m venv --clear $venv
	$venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
	cp requirements.txt "$stamp"
fi

# tests/py/test_lmdb_suite.py: py-lmdb's own tests, from the sdist of the
# version Debian's python3-lmdb is (PyPI; checked against its sha256).
lmdb_tests=build/py-lmdb-1.4.0
if [ ! -d $lmdb_tests/tests ]; then
	echo "deps: fetching py-lmdb 1.4.0's tests"
	rm -rf build/dl && mkdir -p build/dl
	$venv/bin/pip download -q --disable-pip-version-check --no-deps --no-binary :all: lmdb==1.4.0 -d build/dl
	echo "39f6c4ee145d28d17025d350720abb6f95db816514e868db57444fdef51cbb47  build/dl/lmdb-1.4.0.tar.gz" |
		sha256sum -c --quiet -
	tar -xzf build/dl/lmdb-1.4.0.tar.gz -C build/dl
	rm -rf $lmdb_tests && mv build/dl/lmdb-1.4.0 $lmdb_tests && rm -rf build/dl
fi
