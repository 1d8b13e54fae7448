"""`sits cameras` and `sits doctor --json` list vivid as v4l2-ctl sees it:
its by-path link, its formats with sizes and frame rates, and every
control under the name `v4l2-ctl -l` prints, with its type and value."""
import json
import os
import re
import subprocess

import pytest

pytestmark = pytest.mark.vm

LINE = re.compile(r"^\s*(\w+) 0x[0-9a-f]{8} \((\w+)\)\s*:(.*)$")


def v4l2_ctl_list(path: str) -> tuple[dict, list]:
    """{name: (type, value text or None)} from `v4l2-ctl -l`, and the
    driver's names of the controls it could not read (and so left out)."""
    r = subprocess.run(["v4l2-ctl", "-d", path, "-l"], capture_output=True, text=True, timeout=60)
    found = {}
    unread = re.findall(r"^error \d+ getting ctrl (.+)$", r.stdout + r.stderr, re.M)
    for ln in r.stdout.splitlines():
        m = LINE.match(ln)
        if m:
            value = re.search(r"\bvalue=(-?\d+)", m.group(3))
            found[m.group(1)] = (m.group(2), value.group(1) if value else None)
    return found, unread


def vivid_entry(entries):
    vivid = [d for d in entries if d.get("driver") == "vivid" and d.get("capture")]
    assert vivid, entries
    return vivid[0]


def test_cameras_lists_vivids_controls_as_v4l2_ctl_names_them(sits, vivid_path):
    r = sits("cameras", "--json")
    assert r.returncode == 0, r.stderr
    cam = vivid_entry(json.loads(r.stdout))
    ours = {c["name"]: c for c in cam["controls"]}
    from sits.v4l2.controls import control_name
    theirs, unread = v4l2_ctl_list(vivid_path)
    assert len(theirs) > 40
    assert set(ours) == set(theirs) | {control_name(n) for n in unread}
    for name, (kind, value) in theirs.items():
        assert ours[name]["type"] == kind, name
        if value is not None and kind in ("int", "bool", "menu", "intmenu") and "volatile" not in ours[name]["flags"]:
            assert ours[name]["value"] == int(value), name
    assert {m["name"] for m in ours["menu"]["menu"]} == {"Menu Item 1", "Menu Item 3", "Menu Item 4"}
    assert (ours["brightness"]["min"], ours["brightness"]["max"]) == (0, 255)
    assert ours["integer_64_bits"]["min"] == -2**63


def test_cameras_lists_stable_paths_formats_sizes_and_rates(sits, vivid_path):
    r = sits("cameras", "--json", "--device", vivid_path)
    assert r.returncode == 0, r.stderr
    [cam] = json.loads(r.stdout)
    links = [p for p in ("/dev/v4l/by-path/platform-vivid.0-video-index0",) if os.path.islink(p)]
    assert cam["stable_paths"] == links   # udev's, where udevd runs (it does in this VM)
    fmt = {f["fourcc"]: f for f in cam["formats"]}["XR24"]
    rates = {r["size"]: r["fps"] for r in fmt["rates"]}
    assert 30 in rates["640x480"] and 60 in rates["640x480"], rates


def test_doctor_json_has_the_same_entry_and_the_table_names_the_link(sits, vivid_path):
    r = sits("doctor", "--json")
    assert r.returncode == 0, r.stderr
    cam = vivid_entry(json.loads(r.stdout)["v4l2"]["devices"])
    assert any(c["name"] == "brightness" for c in cam["controls"])
    text = sits("cameras", "--device", vivid_path)
    assert text.returncode == 0, text.stderr
    assert re.search(r"^    brightness \(int\) 0\.\.255 default 128 = \d+ \[slider\]$", text.stdout, re.M), text.stdout
    for link in cam["stable_paths"]:
        assert f"  stable path: {link}" in text.stdout


def test_cameras_on_a_missing_device_is_one_line(sits):
    r = sits("cameras", "--device", "/dev/v4l/by-id/no-such-camera")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == "sits: error: /dev/v4l/by-id/no-such-camera: no such device\n"
