"""The prototypes of the ways to see a program's raw system calls
(bench/intercept/, docs/design.md "Programs that skip libc"): each runs and
shows what the design's comparison says of it -- which calls it sees, and
that its answers reach the caller. Their costs are for `make
bench-intercept`, not for a test."""
import re

from conftest import BUILD, run

PROTO = BUILD / "bin" / "tdax-proto-"


def test_syscall_user_dispatch_loses_new_threads_and_children():
    p = run(f"{PROTO}sud", "2000", check=0)
    assert p.returncode == 0, p.stderr
    assert "a new thread not trapped, a forked child not trapped" in p.stdout, p.stdout


def test_a_rewritten_site_is_seen_in_every_thread_and_child_but_a_new_site_in_a_new_thread_is_not():
    """zpoline's `call *%rax` through page 0, its sites found lazily by
    Syscall User Dispatch: every call of a rewritten site reaches the hook
    (the program checks the count and each answer), in a new thread and
    a forked child too; a site first called by a new thread escapes."""
    p = run(f"{PROTO}zpoline", "2000", check=0)
    assert p.returncode == 0, p.stderr
    assert ("a new thread trapped, a forked child trapped, "
            "a new thread's first call of a new site not trapped") in p.stdout, p.stdout
    assert re.search(r"rewritten site \d+ ns \(the hook answers itself: \d+ ns\), plain \d+ ns", p.stdout)


def test_a_supervisor_answers_and_continues_calls():
    p = run(f"{PROTO}notif", "2000", check=0, env={"SYNC_WAKE": "1"})
    assert p.returncode == 0, p.stderr
    assert re.search(r"answered \d+ ns; with pidfd_getfd \+ 128 B read \d+ ns; continued \d+ ns", p.stdout)


def test_a_fuse_mount_sees_every_write_and_answers_every_sync(tmp_path):
    """Appends through the mount land in the directory behind it, whole,
    and the daemon answered every fdatasync (its exit status says so)."""
    p = run(f"{PROTO}fuse", "2000", tmp_path, check=0)
    assert p.returncode == 0, p.stderr
    assert "fdatasync answered by the daemon" in p.stdout, p.stdout
    assert list(tmp_path.iterdir()) == []  # mount and directory gone
