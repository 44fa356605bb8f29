"""Never slower, counted: the system calls a process makes under tdax in
the loops a program without syncs runs -- a journal made, written and
removed per transaction (SQLite's rollback journal), appends to a log, a
file read and stat'ed -- against the same loop without tdax. Counted by
strace over n and 2n iterations (the difference is one iteration's n
times over: start-up cancels), so the test is exact where a timing would
drown in this machine's noise. The product build, the default policy."""
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import PY, TDAX_PRODUCT, run

LOOPS = {
    # SQLite's rollback journal with synchronous=OFF, one transaction.
    "journal": r"""
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
db = os.open(os.path.join(d, "db"), os.O_RDWR | os.O_CREAT, 0o644)
if len(sys.argv) > 3:  # a directory sync first: the log may answer the next ones
    dfd = os.open(d, os.O_RDONLY); os.fsync(dfd); os.close(dfd)
for i in range(n):
    j = os.open(os.path.join(d, "db-journal"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    os.pwrite(j, b"h" * 512, 0)
    os.pwrite(j, b"p" * 4096, 512)
    os.pwrite(db, b"d" * 4096, 4096 * (i % 8))
    os.close(j)
    os.unlink(os.path.join(d, "db-journal"))
""",
    # A log appended to and never synced.
    "appends": r"""
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
fd = os.open(os.path.join(d, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(n):
    os.write(fd, b"x" * 128)
""",
    # Files read and looked at, none written.
    "reads": r"""
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
with open(os.path.join(d, "conf"), "wb") as f:
    f.write(b"c" * 1000)
for i in range(n):
    fd = os.open(os.path.join(d, "conf"), os.O_RDONLY)
    os.read(fd, 4096)
    os.fstat(fd)
    os.close(fd)
    os.stat(os.path.join(d, "conf"))
""",
}


# The same call by another number (libc's unlink is unlinkat's; tdax makes
# the at-form itself).
SAME = {"unlink": "unlinkat", "open": "openat", "stat": "newfstatat", "lstat": "newfstatat"}


def calls(prefix, loop, n, extra=()):
    """System calls by name of the loop's process tree, n iterations."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d, \
         tempfile.NamedTemporaryFile(dir="/dev/shm", suffix=".strace") as out:
        p = subprocess.run(prefix + ["strace", "-f", "-c", "-U", "name,calls", "-o", out.name,
                                     PY, "-c", LOOPS[loop], d, str(n), *extra],
                           capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, TDAX_QUIET="1"))
        assert p.returncode == 0, p.stderr
        counts = {}
        for line in Path(out.name).read_text().splitlines():
            m = re.match(r"(\w+)\s+(\d+)$", line)
            if m and m.group(1) != "total":
                name = SAME.get(m.group(1), m.group(1))
                counts[name] = counts.get(name, 0) + int(m.group(2))
        return counts


def per_iteration(prefix, loop, n=1000, extra=()):
    a, b = calls(prefix, loop, n, extra), calls(prefix, loop, 2 * n, extra)
    return {k: round((b.get(k, 0) - a.get(k, 0)) / n, 2) for k in set(a) | set(b)
            if b.get(k, 0) != a.get(k, 0)}


def under(dev):
    return [str(TDAX_PRODUCT), "run", "--device", dev, "--"]


@pytest.fixture
def fresh(device):
    run(TDAX_PRODUCT, "device", "create", "--device", device, "--size", "64M", check=0)
    return device


def extra_calls(dev, loop, extra=()):
    without = per_iteration([], loop, extra=extra)
    with_tdax = per_iteration(under(dev), loop, extra=extra)
    return {k: round(with_tdax.get(k, 0) - without.get(k, 0), 2)
            for k in set(without) | set(with_tdax) if with_tdax.get(k, 0) != without.get(k, 0)}


def test_appends_and_reads_make_the_calls_they_make_without_tdax(fresh):
    assert extra_calls(fresh, "appends") == {}
    assert extra_calls(fresh, "reads") == {}


def test_a_journal_per_transaction_costs_one_statx_more(fresh):
    """Made, written, closed and removed each transaction: the statx that
    qualifies the new descriptor (a regular file, on a file system tdax
    manages; no times asked for, which would make the next write take a
    fine-grained one: manage.c look_fd) is all tdax adds. Before: a stat of the path at each unlink
    (does it name a registered file? -- none is) and, once anything on the
    device had synced a directory, two statx of the directory per create
    and per unlink, for good."""
    assert extra_calls(fresh, "journal") == {"statx": 1.0}


def test_a_directory_sync_is_watched_for_a_while_then_costs_nothing(fresh):
    """After a directory sync, tdax looks at the directory around each
    change of names (so that the next directory sync may be answered from
    the log) -- for TDAX_DIRSYNC_WATCH changes, then no more until the next
    directory sync: the journal loop after one pays what it pays without."""
    assert extra_calls(fresh, "journal", extra=("dirsync",)) == {"statx": 1.0}
