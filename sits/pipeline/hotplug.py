"""Camera and display hotplug from kobject uevents (netlink
NETLINK_KOBJECT_UEVENT). The socket's fd joins the pipeline's poll loop.

Written with the standard library's socket, not pyroute2: the kernel's
uevent is a NUL-separated list of KEY=VALUE lines behind an "ACTION@DEVPATH"
header, a dozen lines to read, while importing pyroute2 loads 375 modules
(81 ms natively, seconds of a `sits capture` start in the test VM, where
every module is looked up over 9p).
"""
import os
import socket
from dataclasses import dataclass

NETLINK_KOBJECT_UEVENT = 15
MONITOR_GROUP_KERNEL = 1      # the kernel's own messages (udev re-sends on group 2)
WATCHED = ("video4linux", "drm")


@dataclass
class Uevent:
    action: str
    subsystem: str
    devname: str | None
    hotplug: bool  # DRM: connector status may have changed


def parse(data: bytes) -> dict[str, str]:
    """One kernel uevent datagram as its KEY=VALUE fields."""
    fields = {}
    for line in data.split(b"\0"):
        key, sep, value = line.partition(b"=")
        if sep:
            fields[key.decode("ascii", "replace")] = value.decode("utf-8", "replace")
    return fields


class HotplugMonitor:
    """Kernel uevents of `subsystems`; one owner of the socket, close() it."""

    def __init__(self, subsystems: tuple[str, ...] = WATCHED):
        self.subsystems = subsystems
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC,
                                   NETLINK_KOBJECT_UEVENT)
        try:
            self._sock.bind((0, MONITOR_GROUP_KERNEL))  # port id 0: the kernel picks one
        except BaseException:
            self._sock.close()
            raise

    def fileno(self) -> int:
        return self._sock.fileno()

    def read(self) -> list[Uevent]:
        """Every uevent waiting on the socket (non-blocking)."""
        out = []
        while True:
            try:
                data = self._sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return out
            msg = parse(data)
            subsystem = msg.get("SUBSYSTEM")
            if subsystem not in self.subsystems:
                continue
            devname = msg.get("DEVNAME")
            out.append(Uevent(msg.get("ACTION", ""), subsystem,
                              f"/dev/{devname}" if devname and not devname.startswith("/") else devname,
                              msg.get("HOTPLUG") == "1"))

    def close(self) -> None:
        self._sock.close()


