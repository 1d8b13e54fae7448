"""--reconnect: a camera that vanishes mid-run is waited for and resumed.

The last frame stays on screen, copied once into a buffer of the display's
own, so nothing of the old device is held; the old device is closed as soon
as no commit and no consumer uses its buffers (its driver may need that to
come back). Then the loop waits for a video4linux `add` uevent (or looks
once a second) for the same camera and streams again with the same format,
controls and buffers. The same camera: the node with the same driver, card
and bus; where it was opened by a link, also the node a new link of that
name points to (udev's /dev/v4l/by-id names a camera by serial, by-path by
port: the link is resolved again, whatever node and bus the camera now
has). The link as it was when the camera went is not trusted: udev removes
it only after the kernel has said so, and a camera plugged in meanwhile may
take the old node.
"""
import os

from sits._kernel import lib
from sits.errors import SitsError
from sits.v4l2.capture import CaptureDevice


class Reconnect:
    def __init__(self, fps: int | None, buffers: int, memory: str, controls=()):
        self.fps, self.buffers, self.memory = fps, buffers, memory
        self.controls = list(controls)        # controls.requests()' pairs, set again on the camera come back
        self.link = None                      # the link the camera was opened by, or None
        self.stale_link = None                # that link's identity when the camera went (_link_id)
        self.lost_devices: list[tuple] = []   # (device, its framebuffers) not yet closed
        self.wait_id = None                   # (path, driver, card, bus) of the camera waited for
        self.format = None
        self.opened: list = []                # devices opened here: closed at the end

    @property
    def waiting(self) -> bool:
        return self.wait_id is not None

    def lost(self, p) -> None:
        """The pipeline's camera vanished."""
        cap = p.source
        p.summary.disconnects += 1
        try:
            cap.stop()
        except OSError:
            pass  # gone: STREAMOFF has nothing left to stop
        p.queue.detach()                      # nothing is queued into it any more
        if p.display is not None:
            p.display.drop_waiting()
        p.source_gone()
        fbs = p.display.forget_device() if p.display is not None else []
        self.lost_devices.append((cap, fbs))
        self.format = cap.format
        self.wait_id = (cap.path, cap.cap.driver, cap.cap.card, cap.cap.bus_info)
        self.link = cap.path if cap.by_link else None
        self.stale_link = _link_id(self.link) if self.link else None
        if p.display is not None:
            p.display.freeze(cap.buffers)   # its flip retires the old frame
        self.reap(p)

    def reap(self, p) -> None:
        """Close vanished devices once no frame of theirs is in use."""
        for entry in self.lost_devices[:]:
            cap, fbs = entry
            if any(p.queue.held(b.index) for b in cap.buffers):
                continue
            self.lost_devices.remove(entry)
            for fb in fbs:
                fb.close()
            cap.close()

    def added(self, p, path: str) -> None:
        if self.waiting:
            self.reap(p)
            self.reopen(p, path)

    def poll(self, p, had_events: bool) -> None:
        """After each loop pass: close what can be closed; without uevents, look."""
        if self.lost_devices:
            self.reap(p)
        if self.waiting and not had_events:
            self.reopen(p, self.wait_id[0])

    def reopen(self, p, path: str) -> None:
        """Open `path` if it is the camera we lost (a camera opened by a
        link: the link once udev has made it again, whichever node was
        added), configure it as before and stream again. Failures are
        quiet: the next uevent or the next second tries again (udev makes
        the link after the kernel's uevent)."""
        renewed = self.link is not None and _link_id(self.link) not in (None, self.stale_link)
        if renewed:
            path = self.link
        if self.lost_devices or not os.path.exists(path) or p.stopping:
            return  # first let the old device go: its driver may need that to come back
        try:
            cap = CaptureDevice.open(path)
        except (SitsError, OSError):
            return
        try:
            if not renewed and (cap.cap.driver, cap.cap.card, cap.cap.bus_info) != self.wait_id[1:]:
                cap.close()
                return
            f = self.format
            cap.configure(f.fourcc, f.size, self.fps)
            cap.set_controls(self.controls)
            cap.allocate(self.buffers, self.memory)
            p.queue.attach(cap)
            if p.display is not None:
                p.display.attach(p.queue, cap, p)
            p.start_source(cap)
        except (SitsError, OSError):
            p.queue.detach()
            cap.close()
            return
        self.wait_id = None
        self.opened.append(cap)
        p.summary.reconnects += 1

    def close(self) -> None:
        for cap, fbs in self.lost_devices:
            for fb in fbs:
                fb.close()
            cap.close()
        for cap in self.opened:
            cap.close()
        self.lost_devices, self.opened = [], []


def _link_id(path: str):
    """Which link `path` is (udev replaces a link with a new one), or None
    where there is none."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_ino, st.st_ctime_ns
