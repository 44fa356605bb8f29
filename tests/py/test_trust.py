"""Hostile input from other local users, and the hygiene of the command line:
who may use a region (SPEC §3 rules 7 and 8, docs/durability.md "Trust
model"). Runs as root with two unprivileged test users: tdaxtest1 plays the
attacker, tdaxtest2 the victim."""
import hashlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import uuid

import pytest

from conftest import PY, TDAX, TDAX_ENV, info, run, tdax_run

SYSPY = "/usr/bin/python3"  # an application any user can run
APP = "import os; print('app ran, preload=' + repr(os.environ.get('LD_PRELOAD', '')))"


def ensure_user(name):
    try:
        return pwd.getpwnam(name)
    except KeyError:  # another test run may add it at the same time: exit 9, "exists"
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        name], capture_output=True)
        return pwd.getpwnam(name)


@pytest.fixture(scope="module")
def users():
    return ensure_user("tdaxtest1"), ensure_user("tdaxtest2")


def default_of(uid):
    return f"/dev/shm/tdax-{uid}"


@pytest.fixture
def defaults(users):
    """The default regions of both test users, absent before and after."""
    paths = [default_of(u.pw_uid) for u in users]

    def clean():
        for p in paths:
            if os.path.lexists(p):
                os.unlink(p)
    clean()
    yield paths
    clean()


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def one_line_about(stderr, *words):
    lines = [line for line in stderr.splitlines() if "without tdax" in line]
    assert len(lines) == 1, stderr
    for w in words:
        assert w in lines[0], stderr
    return lines[0]


def test_default_region_is_per_user(users, defaults):
    attacker, _ = users
    assert "/dev/shm/tdax-UID" in run(TDAX, "--help", check=0).stdout
    p = run(TDAX, "run", "--", SYSPY, "-c", APP, user=attacker.pw_uid, check=0)
    assert "libtdax.so" in p.stdout and "created the default device " + defaults[0] in p.stderr
    st = os.stat(defaults[0])
    assert st.st_uid == attacker.pw_uid and (st.st_mode & 0o777) == 0o600
    assert not os.path.exists(defaults[1])


def test_a_command_that_cannot_run_makes_no_default_region(users, defaults, tmp_path):
    """A mistyped command fails as the shell's would (127 not found, 126 not
    runnable), before tdax touches a device: no default region is left
    behind by a typo."""
    user, _ = users
    noexec = tmp_path / "noexec"
    noexec.write_text("#!/bin/sh\n")
    os.chmod(tmp_path, 0o755)
    noexec.chmod(0o644)
    for cmd, status, why in (("/nonexistent/cmd", 127, "No such file or directory"),
                             ("tdax-no-such-command", 127, "No such file or directory"),
                             (str(noexec), 126, "Permission denied")):
        p = run(TDAX, "run", "--", cmd, user=user.pw_uid, check=status)
        assert p.stderr == f"tdax: cannot run {cmd}: {why}\n", p.stderr
        assert not os.path.lexists(defaults[0])


def test_squatted_default_region_is_refused_and_the_application_runs(users, defaults):
    attacker, victim = users
    squat = defaults[1]  # the victim's default path, made first by the attacker
    run(TDAX, "device", "create", "--device", squat, "--size", "16M", user=attacker.pw_uid, check=0)
    run("chmod", "0666", squat, user=attacker.pw_uid, check=0)
    before = digest(squat)
    p = run(TDAX, "run", "--", SYSPY, "-c", APP, user=victim.pw_uid, check=0)
    assert "app ran, preload=''" in p.stdout
    one_line_about(p.stderr, squat, f"belongs to user {attacker.pw_uid}", "--allow-shared")
    assert digest(squat) == before
    # the preload alone refuses it too when the program first writes a file
    # (it attaches then, start.h), and passes every call through
    lib = TDAX.parent.parent / "lib" / "libtdax.so"
    writes = ("import os; p = '/var/tmp/tdax-trust-%d' % os.getpid(); open(p, 'w').close(); "
              "os.unlink(p); print('ok')")
    p = run(SYSPY, "-c", writes, user=victim.pw_uid,
            env={"LD_PRELOAD": str(lib), "TDAX_DEVICE": squat}, check=0)
    assert p.stdout.strip() == "ok" and f"belongs to user {attacker.pw_uid}" in p.stderr
    assert digest(squat) == before
    # root's application is not the attacker's either (a region named explicitly)
    p = run(TDAX, "run", "--device", squat, "--", SYSPY, "-c", APP, check=0)
    assert "app ran, preload=''" in p.stdout
    one_line_about(p.stderr, squat, "belongs to user")
    # trusting the other user is explicit
    p = run(TDAX, "run", "--allow-shared", "--", SYSPY, "-c", APP, user=victim.pw_uid, check=0)
    assert "libtdax.so" in p.stdout and "without tdax" not in p.stderr


def test_junk_at_the_default_path_does_not_stop_the_application(users, defaults):
    attacker, victim = users
    for owner in (attacker, victim):  # planted by someone else, or the victim's own leftover
        with open(defaults[1], "wb") as f:
            f.write(b"junk" * 5000)
        os.chown(defaults[1], owner.pw_uid, owner.pw_gid)
        p = run(TDAX, "run", "--", SYSPY, "-c", APP, user=victim.pw_uid, check=0)
        assert "app ran, preload=''" in p.stdout
        one_line_about(p.stderr, defaults[1])
        assert open(defaults[1], "rb").read() == b"junk" * 5000
        os.unlink(defaults[1])


def test_symbolic_links_are_never_followed(users, defaults, device):
    attacker, victim = users
    target = device  # a tmpfs file of the victim's, where a region could live
    with open(target, "w") as f:
        f.write("precious")
    os.chown(target, victim.pw_uid, victim.pw_gid)
    link = defaults[1]
    run("ln", "-s", target, link, user=attacker.pw_uid, check=0)
    for args in (["device", "info"], ["device", "create"], ["device", "create", "--force"],
                 ["device", "destroy", "--force"], ["recover"], ["status"]):
        for who in (victim.pw_uid, 0):
            p = run(TDAX, *args, "--device", link, user=who, check=1)
            assert "symbolic link" in p.stderr and link in p.stderr, (args, p.stderr)
    p = run(TDAX, "run", "--", SYSPY, "-c", APP, user=victim.pw_uid, check=0)
    one_line_about(p.stderr, "symbolic link")
    assert open(target).read() == "precious" and os.path.islink(link)
    # a dangling link: the victim's region is not created where it points
    os.unlink(link)
    elsewhere = target + "-elsewhere"
    run("ln", "-s", elsewhere, link, user=attacker.pw_uid, check=0)
    p = run(TDAX, "run", "--", SYSPY, "-c", APP, user=victim.pw_uid, check=0)
    assert "app ran" in p.stdout
    one_line_about(p.stderr, "symbolic link")
    for who in (victim.pw_uid, 0):
        run(TDAX, "device", "create", "--device", link, "--force", user=who, check=1)
    assert not os.path.exists(elsewhere)


def test_force_never_overwrites_another_users_file(users, device):
    attacker, _ = users
    run(TDAX, "device", "create", "--device", device, "--size", "16M", check=0)
    os.chown(device, attacker.pw_uid, attacker.pw_gid)
    before = digest(device)
    p = run(TDAX, "device", "create", "--device", device, "--force", check=1)
    assert f"belongs to user {attacker.pw_uid}" in p.stderr and device in p.stderr
    assert digest(device) == before


def test_another_users_region_is_refused_unless_allowed(users, device):
    attacker, victim = users
    run(TDAX, "device", "create", "--device", device, "--size", "16M", "--owner", "tdaxtest1",
        "--mode", "0660", check=0)
    os.chmod(device, 0o666)
    p = run(TDAX, "device", "info", "--device", device, user=victim.pw_uid, check=1)
    assert f"belongs to user {attacker.pw_uid}" in p.stderr and "--allow-shared" in p.stderr
    run(TDAX, "device", "info", "--device", device, "--allow-shared", user=victim.pw_uid, check=0)
    run(TDAX, "device", "info", "--device", device, env={"TDAX_ALLOW_SHARED": "1"},
        user=victim.pw_uid, check=0)
    os.chmod(device, 0o660)
    run(TDAX, "device", "info", "--device", device, user=attacker.pw_uid, check=0)  # its owner
    run(TDAX, "device", "info", "--device", device, check=0)  # root, naming it


def test_destroy_force_removes_only_tdax_regions(device):
    data = os.urandom(1 << 16)
    with open(device, "wb") as f:
        f.write(data)
    for force in ([], ["--force"]):
        p = run(TDAX, "device", "destroy", "--device", device, *force, check=1)
        assert "not a tdax" in p.stderr and device in p.stderr
        assert open(device, "rb").read() == data


def test_a_failed_create_leaves_nothing(device):
    p = run(TDAX, "device", "create", "--device", device, "--size", "16M", "--segment-size", "8M",
            check=1)
    assert "cannot hold 4 segments" in p.stderr and not os.path.lexists(device)
    p = run(TDAX, "device", "create", "--device", device, "--size", "1M", check=1)
    assert "too small" in p.stderr and not os.path.lexists(device)


def test_a_refused_create_force_keeps_what_was_there(device, diskdir):
    run(TDAX, "device", "create", "--device", device, "--size", "16M", check=0)
    region = diskdir / "region"  # a region file, copied to a file system it cannot live on
    shutil.copyfile(device, region)
    p = run(TDAX, "device", "create", "--device", region, "--force", check=1)
    assert "tmpfs" in p.stderr and digest(region) == digest(device)


def test_create_force_and_destroy_refuse_a_region_in_use(dev, diskdir):
    code = ("import os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)\n"
            "os.write(fd, b'x' * 100); os.fsync(fd)\n"
            "print('ready', flush=True); time.sleep(60)\n")
    e = dict(os.environ, **TDAX_ENV)
    app = subprocess.Popen([str(TDAX), "run", "--device", dev, "--policy", "always", "--", PY, "-c",
                            code, str(diskdir / "f")], stdout=subprocess.PIPE, text=True, env=e)
    try:
        assert app.stdout.readline().strip() == "ready"
        uid = info(dev)["uuid"]
        p = run(TDAX, "device", "create", "--device", dev, "--force", check=1)
        assert f"process {app.pid} is using" in p.stderr and dev in p.stderr
        p = run(TDAX, "device", "destroy", "--device", dev, "--force", check=1)
        assert f"process {app.pid} is using" in p.stderr
        assert info(dev)["uuid"] == uid
    finally:
        app.send_signal(signal.SIGKILL)
        app.wait()
    run(TDAX, "device", "create", "--device", dev, "--force", "--size", "16M", check=0)


def test_set_applies_all_pairs_or_none(dev):
    def get(key):
        return int(run(TDAX, "get", "--device", dev, key, check=0).stdout)
    assert get("upgrade_threshold") == 60
    p = run(TDAX, "set", "--device", dev, "upgrade_threshold=70", "write_threshold=x", check=1)
    assert "nothing was changed" in p.stderr and get("upgrade_threshold") == 60
    p = run(TDAX, "set", "--device", dev, "upgrade_threshold=70", "nonsense=1", check=1)
    assert "unknown tunable" in p.stderr and get("upgrade_threshold") == 60
    run(TDAX, "set", "--device", dev, "upgrade_threshold=70", "granularity_order=99", check=1)
    assert get("upgrade_threshold") == 60 and get("granularity_order") != 99
    # validated as a whole: D=65 is only valid together with U=80
    run(TDAX, "set", "--device", dev, "downgrade_threshold=65", "upgrade_threshold=80", check=0)
    assert get("downgrade_threshold") == 65 and get("upgrade_threshold") == 80


def test_file_names_are_escaped_in_text_output(diskdir):
    nasty = "a\x1b[2J\x1b]0;pwned\x07b\\x"
    path = diskdir / nasty
    dev = f"/dev/shm/tdax-pytest-{uuid.uuid4().hex[:8]}\x1b[H"
    try:
        run(TDAX, "device", "create", "--device", dev, "--size", "16M", check=0)
        code = ("import os, sys\n"
                "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)\n"
                "os.fsync(fd); os.write(fd, b'y' * 100); os.fsync(fd)\n"
                "os.kill(os.getpid(), 9)\n")
        tdax_run(dev, code, path, check=None)
        outs = [run(TDAX, "status", "--device", dev, check=0).stdout,
                run(TDAX, "top", "--device", dev, "--count", "1", check=0).stdout,
                run(TDAX, "device", "info", "--device", dev, check=0).stdout,
                run(TDAX, "recover", "--device", dev, check=0).stdout]
        for out in outs[:2] + outs[3:]:
            assert "a\\x1b[2J\\x1b]0;pwned\\x07b\\\\x" in out, out
        for out in outs:
            assert "\x1b" not in out and "\x07" not in out, out
            assert "\\x1b[H" in out
        st = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
        assert st["device"] == dev and [f["path"] for f in st["files"]] == [str(path)]
    finally:
        if os.path.exists(dev):
            os.unlink(dev)


def test_mode_is_checked(device):
    p = run(TDAX, "device", "create", "--device", device, "--mode", "0666", check=2)
    assert "any user write" in p.stderr and not os.path.lexists(device)
    run(TDAX, "device", "create", "--device", device, "--mode", "0602", check=2)
    p = run(TDAX, "device", "create", "--device", device, "--size", "16M", "--mode", "0664",
            check=0)
    assert "group write" in p.stderr and "any user read" in p.stderr
    assert (os.stat(device).st_mode & 0o7777) == 0o664
    run(TDAX, "device", "create", "--device", device, "--size", "16M", "--mode", "04640",
        "--force", check=0)
    assert (os.stat(device).st_mode & 0o7777) == 0o640


def test_numeric_owner(users, device):
    attacker, _ = users
    run(TDAX, "device", "create", "--device", device, "--size", "16M", "--owner",
        str(attacker.pw_uid), check=0)
    st = os.stat(device)
    assert (st.st_uid, st.st_gid) == (attacker.pw_uid, attacker.pw_gid)
    os.unlink(device)
    run(TDAX, "device", "create", "--device", device, "--size", "16M", "--owner", "54321:54322",
        check=0)
    st = os.stat(device)
    assert (st.st_uid, st.st_gid) == (54321, 54322)
    os.unlink(device)
    run(TDAX, "device", "create", "--device", device, "--size", "16M", "--owner", "54321",
        check=0)
    st = os.stat(device)
    assert (st.st_uid, st.st_gid) == (54321, 0)
    assert run(TDAX, "device", "create", "--device", device, "--owner", "nosuchuser-x",
               check=2).returncode == 2


def test_a_unicode_file_name_is_shown_as_it_is_and_marks_that_hide_are_escaped(dev, diskdir):
    """Text output prints a name's well-formed UTF-8 as it is (café), but
    escapes what a terminal acts on or what hides the name: a C1 control
    (U+009B, an 8-bit CSI), a right-to-left override (U+202E), a
    zero-width space -- and bytes that are not UTF-8."""
    name = "café-\u009b2J-\u202eexe.txt-\u200b-".encode() + b"\xff"
    code = ("import os, sys\n"
            "fd = os.open(os.fsencode(sys.argv[1]), os.O_WRONLY | os.O_CREAT, 0o644)\n"
            "for i in range(3):\n    os.write(fd, b'y'); os.fsync(fd)\n")
    tdax_run(dev, code, os.fsdecode(os.fsencode(str(diskdir)) + b"/" + name))
    out = run(TDAX, "status", "--device", dev, check=0).stdout
    assert "café-\\xc2\\x9b2J-\\xe2\\x80\\xaeexe.txt-\\xe2\\x80\\x8b-\\xff" in out, out
    assert "\u009b" not in out and "\u202e" not in out and "\u200b" not in out
