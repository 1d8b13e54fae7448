"""The kernel uevent datagram format (lib/kobject_uevent.c): an
"ACTION@DEVPATH" header, then NUL-separated KEY=VALUE lines."""
from sits.pipeline.hotplug import parse


def test_fields_come_from_key_value_lines_and_the_header_is_skipped():
    data = (b"remove@/devices/platform/vivid.0/video4linux/video0\0ACTION=remove\0"
            b"DEVPATH=/devices/platform/vivid.0/video4linux/video0\0SUBSYSTEM=video4linux\0"
            b"MAJOR=81\0MINOR=0\0DEVNAME=video0\0SEQNUM=2385\0")
    msg = parse(data)
    assert msg["ACTION"] == "remove" and msg["SUBSYSTEM"] == "video4linux"
    assert msg["DEVNAME"] == "video0" and msg["SEQNUM"] == "2385"
    assert not any("@" in k for k in msg)


def test_a_value_may_hold_an_equals_sign():
    assert parse(b"change@/x\0HOTPLUG=1\0NAME=a=b\0")["NAME"] == "a=b"
