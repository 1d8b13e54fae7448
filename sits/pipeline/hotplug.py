"""Camera and display hotplug from kobject uevents (pyroute2, netlink
NETLINK_KOBJECT_UEVENT). The socket's fd joins the pipeline's poll loop."""
import os
from dataclasses import dataclass

MONITOR_GROUP_KERNEL = 1


@dataclass
class Uevent:
    action: str
    subsystem: str
    devname: str | None
    hotplug: bool  # DRM: connector status may have changed


class HotplugMonitor:
    def __init__(self):
        from pyroute2 import UeventSocket
        self._sock = UeventSocket()
        try:
            self._sock.bind(MONITOR_GROUP_KERNEL)
        except BaseException:
            self._sock.close()
            raise

    def fileno(self) -> int:
        return self._sock.fileno()

    def read(self) -> list[Uevent]:
        out = []
        for msg in self._sock.get():
            subsystem = msg.get("SUBSYSTEM")
            if subsystem not in ("video4linux", "drm"):
                continue
            devname = msg.get("DEVNAME")
            out.append(Uevent(msg.get("ACTION", ""), subsystem,
                              f"/dev/{devname}" if devname and not devname.startswith("/") else devname,
                              msg.get("HOTPLUG") == "1"))
        return out

    def close(self) -> None:
        self._sock.close()


def device_present(path: str) -> bool:
    return os.path.exists(path)
