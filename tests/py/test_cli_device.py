"""tdax device create/info/destroy: the command line, its errors and exit codes."""
import json
import os

from conftest import TDAX, run


def test_every_command_has_help():
    assert "device create" in run(TDAX, "--help", check=0).stdout
    for cmd in (["device", "create"], ["device", "info"], ["device", "destroy"], ["recover"]):
        out = run(TDAX, *cmd, "--help", check=0).stdout
        assert out.startswith("usage: tdax " + " ".join(cmd))
    assert run(TDAX).returncode == 2
    p = run(TDAX, "frobnicate", check=2)
    assert "unknown command 'frobnicate'" in p.stderr


def test_create_then_info_json(device):
    p = run(TDAX, "device", "create", "--device", device, "--size", "64M", check=0)
    assert "emulated" in p.stdout and "not real power loss" in p.stdout
    info = json.loads(run(TDAX, "device", "info", "--device", device, "--json", check=0).stdout)
    assert info["path"] == device
    assert info["backend"] == "emulated"
    assert info["capacity"] == 64 << 20
    assert info["state"] == "clean" and info["boot_changed"] is False
    assert info["live_records"] == 0 and info["segments_free"] == info["segments"]
    assert "not real power loss" in info["persistence"]
    with open("/proc/sys/kernel/random/boot_id") as f:
        assert info["boot_id"] == f.read().strip()
    text = run(TDAX, "device", "info", "--device", device, check=0).stdout
    assert "emulated" in text and "this boot" in text


def test_default_device_comes_from_environment(device):
    run(TDAX, "device", "create", env={"TDAX_DEVICE": device}, check=0)
    assert os.path.exists(device)
    assert json.loads(run(TDAX, "device", "info", "--json", env={"TDAX_DEVICE": device},
                          check=0).stdout)["path"] == device


def test_create_refuses_to_overwrite(device):
    with open(device, "w") as f:
        f.write("someone's data")
    p = run(TDAX, "device", "create", "--device", device, check=1)
    assert device in p.stderr and "--force" in p.stderr
    assert open(device).read() == "someone's data"
    # --force reformats a tdax region (or an empty file), never another file
    p = run(TDAX, "device", "create", "--device", device, "--force", check=1)
    assert "not a tdax region" in p.stderr and device in p.stderr
    assert open(device).read() == "someone's data"
    os.truncate(device, 0)
    run(TDAX, "device", "create", "--device", device, "--force", check=0)
    run(TDAX, "device", "create", "--device", device, "--force", check=0)


def test_info_on_a_foreign_file_changes_nothing(device):
    data = os.urandom(1 << 16)
    with open(device, "wb") as f:
        f.write(data)
    p = run(TDAX, "device", "info", "--device", device, check=1)
    assert "not a tdax device" in p.stderr and device in p.stderr
    assert open(device, "rb").read() == data


def test_bad_arguments_are_usage_errors(device):
    assert "bad size" in run(TDAX, "device", "create", "--device", device, "--size", "lots",
                             check=2).stderr
    assert "unknown backend" in run(TDAX, "device", "create", "--backend", "floppy",
                                    check=2).stderr
    p = run(TDAX, "device", "create", "--device", device, "--size", "1M", check=1)
    assert "too small" in p.stderr and not os.path.exists(device)
    p = run(TDAX, "device", "create", "--device", device, "--size", "1", check=1)
    assert "capacity 1 bytes is too small" in p.stderr, p.stderr  # what was asked, not 0
    p = run(TDAX, "device", "create", "--device", "/var/tmp/tdax-not-tmpfs", check=1)
    assert "tmpfs" in p.stderr and not os.path.exists("/var/tmp/tdax-not-tmpfs")


def test_permissions_other_user(device):
    run(TDAX, "device", "create", "--device", device, check=0)
    assert (os.stat(device).st_mode & 0o777) == 0o600
    p = run(TDAX, "device", "info", "--device", device, user=65534, check=1)
    assert "permission denied" in p.stderr and device in p.stderr and "--owner" in p.stderr
    run(TDAX, "device", "create", "--device", device, "--force", "--owner", "nobody",
        "--mode", "0660", check=0)
    st = os.stat(device)
    assert st.st_uid == 65534 and (st.st_mode & 0o777) == 0o660
    run(TDAX, "device", "info", "--device", device, user=65534, check=0)


def test_world_writable_region_is_refused(device):
    run(TDAX, "device", "create", "--device", device, check=0)
    os.chmod(device, 0o666)  # tdax device create refuses --mode 0666 (test_trust.py)
    p = run(TDAX, "device", "info", "--device", device, check=1)
    assert "any user can write" in p.stderr
    run(TDAX, "device", "info", "--device", device, env={"TDAX_ALLOW_SHARED": "1"}, check=0)


def test_emulated_costs_are_recorded(device):
    run(TDAX, "device", "create", "--device", device, "--persist-cost", "500",
        "--bandwidth", "2000", check=0)
    info = json.loads(run(TDAX, "device", "info", "--device", device, "--json").stdout)
    assert info["persist_cost_ns"] == 500 and info["bandwidth_mbps"] == 2000
    p = run(TDAX, "device", "create", "--device", "/dev/dax9.9", "--backend", "devdax",
            "--persist-cost", "5", check=2)
    assert "emulated backend" in p.stderr


def test_devdax_needs_a_dax_character_device():
    p = run(TDAX, "device", "create", "--backend", "devdax", "--device", "/dev/null", check=1)
    assert "not a DAX device" in p.stderr


def test_destroy_refuses_while_records_are_not_on_flash(device, diskdir):
    from conftest import LOGWRITER
    run(TDAX, "device", "create", "--device", device, check=0)
    run(LOGWRITER, device, diskdir / "f", 3, 100, check=0)
    p = run(TDAX, "device", "destroy", "--device", device, check=1)
    assert "3 records are not on flash" in p.stderr and "tdax recover" in p.stderr
    run(TDAX, "recover", "--device", device, "--power-failure", check=0)
    run(TDAX, "device", "destroy", "--device", device, check=0)
    assert not os.path.exists(device)


def test_create_refuses_a_barrier_cost_open_would_refuse(device):
    p = run(TDAX, "device", "create", "--device", device, "--persist-cost", "2000000", check=2)
    assert "at most 1000000" in p.stderr and not os.path.exists(device)
    run(TDAX, "device", "create", "--device", device, "--persist-cost", "1000000", check=0)
    run(TDAX, "device", "info", "--device", device, check=0)
