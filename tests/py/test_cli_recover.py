"""tdax recover from the command line: replay, checkpoint, damage, identity,
interrupted recovery."""
import json
import os
import struct

import pytest

from conftest import LOGWRITER, TDAX, run

REC_HDR = 64
MAGIC = b"TDXR"


def pattern(i, size):
    return bytes(ord("a") + (i * 7 + k) % 26 for k in range(size))


def expected(count, size, skip=()):
    out = bytearray()
    for i in range(count):
        out += bytes(size) if i in skip else pattern(i, size)
    return bytes(out)


def recover(device, *flags, check=0):
    p = run(TDAX, "recover", "--device", device, "--json", *flags, check=check)
    return json.loads(p.stdout) if p.stdout else None


def make(device, diskdir, count=50, size=100, write_file=False, name="data"):
    run(TDAX, "device", "create", "--device", device, check=0)
    path = diskdir / name
    args = [LOGWRITER, device, path, count, size] + (["--write-file"] if write_file else [])
    seqs = run(*args, check=0).stdout.split()
    assert len(seqs) == count
    return path


def record_offsets(device):
    """Byte offsets of record headers in the region file, in file order."""
    data = open(device, "rb").read()
    offs, at = [], data.find(MAGIC)
    while at >= 0:
        if at % 64 == 0:
            offs.append(at)
        at = data.find(MAGIC, at + 1)
    return offs


def test_power_failure_replays_every_record(device, diskdir):
    path = make(device, diskdir)
    assert os.path.getsize(path) == 0  # the "page cache" never reached the file
    rep = recover(device, "--power-failure")
    assert rep["mode"] == "replay" and rep["applied"] == 50 and rep["corrupt"] == 0
    assert rep["files"][0]["outcome"] == "recovered" and rep["files"][0]["path"] == str(path)
    assert path.read_bytes() == expected(50, 100)
    assert json.loads(run(TDAX, "device", "info", "--device", device, "--json").stdout)[
        "live_records"] == 0
    assert recover(device, "--power-failure")["records"] == 0  # idempotent


def test_flipped_bit_loses_only_that_record_and_reports_it(device, diskdir):
    path = make(device, diskdir)
    offs = record_offsets(device)
    assert len(offs) == 50
    with open(device, "r+b") as f:
        f.seek(offs[17] + REC_HDR + 42)
        b = f.read(1)
        f.seek(offs[17] + REC_HDR + 42)
        f.write(bytes([b[0] ^ 0x08]))
    rep = recover(device, "--power-failure")
    assert rep["applied"] == 49 and rep["corrupt"] == 1 and rep["torn"] == 0
    dmg = rep["damaged"][0]
    assert dmg["kind"] == "corrupt" and dmg["offset"] == 1700 and dmg["length"] == 100
    assert path.read_bytes() == expected(50, 100, skip={17})
    text = run(TDAX, "recover", "--device", device, check=0).stdout
    assert "0 corrupt" in text  # nothing left: the damaged record was in a reclaimed segment


def test_boot_change_means_replay(device, diskdir):
    path = make(device, diskdir)
    with open(device, "r+b") as f:  # the boot id of last use, as after a reboot
        f.seek(256)
        f.write(b"11111111-2222-3333-4444-555555555555")
    info = json.loads(run(TDAX, "device", "info", "--device", device, "--json").stdout)
    assert info["boot_changed"] is True
    rep = recover(device)
    assert rep["mode"] == "replay" and rep["applied"] == 50
    assert path.read_bytes() == expected(50, 100)
    info = json.loads(run(TDAX, "device", "info", "--device", device, "--json").stdout)
    assert info["boot_changed"] is False and info["state"] == "clean"


def test_same_boot_only_syncs(device, diskdir):
    path = make(device, diskdir, write_file=True)
    with open(path, "r+b") as f:  # newer data the log never saw must survive
        f.write(b"NEWER")
    rep = recover(device)
    assert rep["mode"] == "checkpoint" and rep["applied"] == 0 and rep["records"] == 50
    assert path.read_bytes()[:5] == b"NEWER"


def test_replaced_file_is_reported_not_written(device, diskdir):
    path = make(device, diskdir)
    os.unlink(path)
    path.write_bytes(b"a different file")
    p = run(TDAX, "recover", "--device", device, "--power-failure", check=3)
    assert "unmatched" in p.stdout and "another file" in p.stdout
    assert path.read_bytes() == b"a different file"
    rep = recover(device, "--power-failure", "--discard-unmatched")
    assert rep["files"][0]["outcome"] == "discarded"
    assert path.read_bytes() == b"a different file"


def test_missing_file_is_reported(device, diskdir):
    path = make(device, diskdir)
    os.unlink(path)
    rep = recover(device, "--power-failure", check=3)
    assert rep["files"][0]["outcome"] == "unmatched" and "No such file" in rep["files"][0]["reason"]
    assert not path.exists()


def test_recovery_killed_then_rerun(device, diskdir):
    path = make(device, diskdir, count=300, size=64)
    p = run(TDAX, "recover", "--device", device, "--power-failure",
            env={"TDAX_TEST_RECOVER_KILL_AFTER": "120"})
    assert p.returncode == -9
    rep = recover(device, "--power-failure")
    assert rep["applied"] == 300
    assert path.read_bytes() == expected(300, 64)


def test_recover_of_a_missing_device_says_how_to_create_one():
    p = run(TDAX, "recover", "--device", "/dev/shm/tdax-none-here", check=1)
    assert "no such device region" in p.stderr and "tdax device create" in p.stderr


NOBODY = 65534


def test_root_recovers_a_users_region_only_for_that_user(device, diskdir):
    """A region nobody owns (and so nobody can forge): root's recover acts as
    nobody, on nobody's files only. An entry claiming root's file (logwriter
    run as root stands in for the forger) is refused, in JSON and in text,
    and the file is left alone; nobody's own file is replayed."""
    run(TDAX, "device", "create", "--device", device, check=0)
    os.chown(device, NOBODY, NOBODY)
    victim = diskdir / "victim"
    victim.write_bytes(b"root's file")
    run(LOGWRITER, device, victim, 3, 100, check=0)
    users = diskdir / "users"
    users.write_bytes(b"")
    os.chown(users, NOBODY, NOBODY)
    run(LOGWRITER, device, users, 3, 100, check=0, user=NOBODY)

    rep = recover(device, "--power-failure", check=3)
    by_path = {f["path"]: f for f in rep["files"]}
    assert by_path[str(victim)]["outcome"] == "refused"
    assert "uid 0" in by_path[str(victim)]["reason"]
    assert by_path[str(users)]["outcome"] == "recovered"
    assert victim.read_bytes() == b"root's file"
    assert users.read_bytes() == expected(3, 100) and os.stat(users).st_uid == NOBODY
    p = run(TDAX, "recover", "--device", device, "--power-failure", check=3)
    assert "refused" in p.stdout and str(victim) in p.stdout
    assert victim.read_bytes() == b"root's file"


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


SB_CRC = 116  # offsetof(struct tdax_super, crc)


@pytest.mark.parametrize("field,off,fmt,value", [
    ("files_off", 64, "<Q", 2**64 - 4096),
    ("segs_off", 96, "<Q", 2**64 - 2**20),
    ("max_ranges", 88, "<I", 0),
    ("nsegs", 104, "<I", 0),
])
def test_resigned_impossible_geometry_is_refused_by_every_command(device, field, off, fmt, value):
    """A forger re-signs the super-block: every command refuses the region
    with the field, its value and the way out, instead of crashing (SIGSEGV,
    SIGFPE); `tdax run` starts the application without tdax and says why."""
    run(TDAX, "device", "create", "--device", device, check=0)
    with open(device, "r+b") as f:
        sb = bytearray(f.read(128))
        struct.pack_into(fmt, sb, off, value)
        struct.pack_into("<I", sb, SB_CRC, crc32c(bytes(sb[:SB_CRC])))
        f.seek(0)
        f.write(sb)
    for cmd in (["device", "info"], ["recover"], ["status"], ["run"]):
        extra = ["--", "true"] if cmd == ["run"] else []
        p = run(TDAX, *cmd, "--device", device, *extra, check=0 if cmd == ["run"] else 1)
        assert f"field {field} = {value} is invalid" in p.stderr, p.stderr
        assert device in p.stderr and "tdax device create --force" in p.stderr
        assert cmd != ["run"] or "starting true without tdax" in p.stderr, p.stderr
