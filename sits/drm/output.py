"""KmsOutput: one connector + CRTC + plane driven by atomic commits.

Choosing: the first connected (non-writeback) connector, or the one named;
a CRTC its encoders can drive; a plane on that CRTC that accepts the
buffer's format (primary first); the mode matching the buffer size when one
exists, else the preferred mode with the image centred (cropped through
SRC_* when it is larger). Everything the first commit changes is saved and
restored by close().

An overlay layer (use_overlay()): a second plane of the CRTC above the
video's, in a format with alpha (ARGB8888, premultiplied as KMS blends
it), placed as the video is; the modeset commit puts it on the CRTC with
a buffer of the caller's (a blank one), and each flip may change its
FB_ID in the same commit as the video's. Where the plane has the
properties, the modeset also puts it above the video's (zpos) and asks
for premultiplied blending ("pixel blend mode"); an immutable zpos below
the video's is refused.
"""
import errno
from dataclasses import dataclass

from sits._kernel import ffi, lib
from sits.drm import raw
from sits.drm.atomic import ALLOW_MODESET, NONBLOCK, PAGE_FLIP_EVENT, TEST_ONLY, AtomicRequest
from sits.errors import DeviceError, KernelCallError, UsageError

PLANE_PROPS = ("FB_ID", "CRTC_ID", "SRC_X", "SRC_Y", "SRC_W", "SRC_H",
               "CRTC_X", "CRTC_Y", "CRTC_W", "CRTC_H")


@dataclass
class Placement:
    src: tuple[int, int, int, int]   # x, y, w, h in buffer pixels
    dst: tuple[int, int, int, int]   # x, y, w, h on the CRTC


def place(buf_w: int, buf_h: int, mode_w: int, mode_h: int) -> Placement:
    """Centre the buffer on the mode without scaling; crop what does not fit."""
    w, h = min(buf_w, mode_w), min(buf_h, mode_h)
    return Placement(((buf_w - w) // 2, (buf_h - h) // 2, w, h),
                     ((mode_w - w) // 2, (mode_h - h) // 2, w, h))


class KmsOutput:
    def __init__(self, card, drm_fourcc: str, size: tuple[int, int], connector: str | None = None,
                 writeback: bool = False):
        if not card.atomic:
            raise DeviceError(f"{card.path}: driver {card.driver} has no atomic modesetting")
        self.card = card
        self.format = drm_fourcc
        self.size = size
        self.connector = self._pick_connector(connector)
        self.crtc_id, self.crtc_index = self._pick_crtc()
        self.plane_id = self._pick_plane(drm_fourcc)
        self.mode = self._pick_mode(size)
        self.placement = place(size[0], size[1], self.mode.width, self.mode.height)
        self.writeback = self._pick_writeback() if writeback else None
        self._saved: list[tuple[int, str, int]] | None = None
        self._mode_blob = 0
        self._modeset_done = False
        self.flipped_ns = 0     # when the last flip's commit began (CLOCK_MONOTONIC)
        self._req: AtomicRequest | None = None
        self.overlay_plane_id = 0    # the overlay layer's plane (0: none)
        self.overlay_fb = None       # what it shows from the modeset on (the caller's blank buffer)
        self._overlay_props: list[tuple[str, int]] = []   # zpos, blend mode: set by the modeset

    # -------------------------------------------------------------- choose
    @property
    def configured(self) -> bool:
        """The mode, routing and plane geometry are set: a flip changes FB_ID only."""
        return self._modeset_done

    def _pick_connector(self, name):
        conns = [c for c in self.card.connectors() if not c.is_writeback]
        if name:
            for c in conns:
                if c.name == name:
                    if not c.connected:
                        raise DeviceError(f"connector {name} is {c.connection}")
                    return c
            raise UsageError(f"no connector {name!r} on {self.card.path}; "
                             f"connectors: {', '.join(c.name for c in conns)}")
        for c in conns:
            if c.connected and c.modes:
                return c
        raise DeviceError(f"{self.card.path}: no connected display connector")

    def _pick_crtc(self):
        crtcs = self.card.resources().crtcs
        fd = self.card.fileno()
        current = raw.get_encoder(fd, self.connector.encoder_id).crtc_id if self.connector.encoder_id else 0
        if current in crtcs:
            return current, crtcs.index(current)
        for enc_id in self.connector.encoders:
            enc = raw.get_encoder(fd, enc_id)
            for i, crtc in enumerate(crtcs):
                if enc.possible_crtcs & (1 << i):
                    return crtc, i
        raise DeviceError(f"no CRTC can drive {self.connector.name}")

    def _pick_plane(self, drm_fourcc):
        candidates = []
        for p in self.card.planes():
            if not p.possible_crtcs & (1 << self.crtc_index):
                continue
            kind = self.card.plane_type(p.id)
            if kind == "cursor":
                continue
            candidates.append((kind != "primary", p))
        candidates.sort(key=lambda t: t[0])
        for _, p in candidates:
            if drm_fourcc in p.formats:
                return p.id
        raise UsageError(f"no plane on {self.connector.name} accepts {drm_fourcc}")

    def use_overlay(self, drm_fourcc: str, blank_fb) -> int:
        """A plane above the video's for an overlay layer in `drm_fourcc`
        (a format with alpha), showing `blank_fb` from the first commit on:
        its id. An overlay-type plane first; DeviceError naming the CRTC's
        planes when none is free."""
        free, seen = [], []
        for p in self.card.planes():
            if not p.possible_crtcs & (1 << self.crtc_index):
                continue
            kind = self.card.plane_type(p.id)
            seen.append(f"{p.id} ({kind}: {' '.join(p.formats[:6])}{' ...' if len(p.formats) > 6 else ''})")
            if p.id != self.plane_id and kind != "cursor" and drm_fourcc in p.formats:
                free.append((kind != "overlay", p.id))
        if not free:
            raise DeviceError(f"{self.card.path}: no free plane with {drm_fourcc} above the video's "
                              f"(plane {self.plane_id}) for an overlay; planes of {self.connector.name}'s CRTC: "
                              f"{', '.join(seen)}")
        self.overlay_plane_id = min(free)[1]
        self.overlay_fb = blank_fb
        self._overlay_props = self._overlay_settings(self.overlay_plane_id)
        return self.overlay_plane_id

    def _overlay_settings(self, plane: int) -> list[tuple[str, int]]:
        """What the modeset sets on the overlay plane: above the video's,
        premultiplied, where the card lets it be set."""
        props = self.card.properties(plane, lib.DRM_MODE_OBJECT_PLANE)
        video = self.card.properties(self.plane_id, lib.DRM_MODE_OBJECT_PLANE)
        settings = []
        zpos = props.get("zpos")
        if zpos is not None and "zpos" in video:
            below = video["zpos"].value
            if zpos.flags & lib.DRM_MODE_PROP_IMMUTABLE:
                if zpos.value <= below:
                    raise DeviceError(f"{self.card.path}: plane {plane}'s fixed zpos {zpos.value} puts it below the "
                                      f"video's plane {self.plane_id} (zpos {below}): no overlay")
            elif zpos.value <= below:
                settings.append(("zpos", below + 1))
        blend = props.get("pixel blend mode")
        if blend is not None and not blend.flags & lib.DRM_MODE_PROP_IMMUTABLE and "Pre-multiplied" in blend.enums:
            settings.append(("pixel blend mode", blend.enums["Pre-multiplied"]))
        return settings

    def _pick_mode(self, size):
        modes = self.connector.modes
        exact = [m for m in modes if (m.width, m.height) == tuple(size)]
        if exact:
            return exact[0]
        preferred = [m for m in modes if m.preferred]
        return (preferred or modes)[0]

    def _pick_writeback(self):
        for c in self.card.connectors():
            if c.is_writeback:
                for enc_id in c.encoders:
                    if raw.get_encoder(self.card.fileno(), enc_id).possible_crtcs & (1 << self.crtc_index):
                        return c
        return None

    def repick(self) -> bool:
        """After a hotplug event: re-read the connector and choose the mode
        again; the next flip does a modeset if it changed. False while the
        connector is disconnected."""
        conn = raw.get_connector(self.card.fileno(), self.connector.id, probe=True)
        if not conn.connected or not conn.modes:
            return False
        self.connector = conn
        mode = self._pick_mode(self.size)
        if mode.raw != self.mode.raw:
            self.mode = mode
            self.placement = place(self.size[0], self.size[1], mode.width, mode.height)
            if self._mode_blob:
                lib.drmModeDestroyPropertyBlob(self.card.fileno(), self._mode_blob)
                self._mode_blob = 0
            self._modeset_done = False
        return True

    @staticmethod
    def supported_formats(card, connector: str | None = None) -> list[str]:
        """Formats some plane of the chosen CRTC can scan out."""
        out = KmsOutput.__new__(KmsOutput)
        out.card = card
        out.connector = out._pick_connector(connector)
        out.crtc_id, out.crtc_index = out._pick_crtc()
        fmts = []
        for p in card.planes():
            if p.possible_crtcs & (1 << out.crtc_index) and card.plane_type(p.id) != "cursor":
                fmts += [f for f in p.formats if f not in fmts]
        return fmts

    # -------------------------------------------------------------- commit
    def _save(self):
        saved = []
        # A MODE_ID blob dies with the state that used it, so keep the mode's
        # bytes and make a new blob at restore time.
        mode_blob = self.card.prop_value(self.crtc_id, "MODE_ID")
        self._saved_mode = raw.get_blob(self.card.fileno(), mode_blob) if mode_blob else None
        saved.append((self.crtc_id, "ACTIVE", self.card.prop_value(self.crtc_id, "ACTIVE")))
        saved.append((self.connector.id, "CRTC_ID", self.card.prop_value(self.connector.id, "CRTC_ID")))
        for plane in (self.plane_id, self.overlay_plane_id):
            for name in PLANE_PROPS if plane else ():
                saved.append((plane, name, self.card.prop_value(plane, name)))
        for name, _ in self._overlay_props:
            saved.append((self.overlay_plane_id, name, self.card.prop_value(self.overlay_plane_id, name)))
        if self.writeback:
            saved.append((self.writeback.id, "CRTC_ID", self.card.prop_value(self.writeback.id, "CRTC_ID")))
        self._saved = saved

    def _create_blob(self, data: bytes) -> int:
        blob = ffi.new("uint32_t *")
        ret = lib.drmModeCreatePropertyBlob(self.card.fileno(), ffi.from_buffer(data), len(data), blob)
        if ret < 0:
            raise KernelCallError(ffi.errno if ret == -1 else -ret, "DRM_IOCTL_MODE_CREATEPROPBLOB")
        return blob[0]

    def request(self, fb, *, in_fence=None, writeback_fb=None, overlay_fb=None) -> tuple[AtomicRequest, int]:
        """The atomic request showing `fb` (and `overlay_fb` on the overlay
        plane: None, what it shows), and the flags it needs. One request
        object is reused: valid until the next request()."""
        req = self._req
        if req is None:
            req = self._req = AtomicRequest(self.card)
        else:
            req.reset()
        flags = 0
        if not self._modeset_done:
            if self._saved is None:
                self._save()
            if not self._mode_blob:
                self._mode_blob = self._create_blob(self.mode.raw)
            req.add(self.crtc_id, "MODE_ID", self._mode_blob).add(self.crtc_id, "ACTIVE", 1)
            req.add(self.connector.id, "CRTC_ID", self.crtc_id)
            if self.writeback:
                req.add(self.writeback.id, "CRTC_ID", self.crtc_id)
            flags |= ALLOW_MODESET
        req.add(self.plane_id, "FB_ID", fb.id)
        if self.overlay_plane_id and (overlay_fb is not None or not self._modeset_done):
            req.add(self.overlay_plane_id, "FB_ID", (overlay_fb or self.overlay_fb).id)
        if not self._modeset_done:
            # Atomic state persists: after the first commit a flip only
            # changes FB_ID (and fences), so the geometry is sent once.
            sx, sy, sw, sh = self.placement.src
            dx, dy, dw, dh = self.placement.dst
            for plane in (self.plane_id, self.overlay_plane_id):
                if not plane:
                    continue
                req.add(plane, "CRTC_ID", self.crtc_id)
                for name, v in (("SRC_X", sx << 16), ("SRC_Y", sy << 16), ("SRC_W", sw << 16),
                                ("SRC_H", sh << 16), ("CRTC_X", dx), ("CRTC_Y", dy), ("CRTC_W", dw),
                                ("CRTC_H", dh)):
                    req.add(plane, name, v)
            for name, v in self._overlay_props:
                req.add(self.overlay_plane_id, name, v)
        if in_fence is not None:
            req.add(self.plane_id, "IN_FENCE_FD", in_fence.fileno())
        req.add_out_fence(self.crtc_id, "OUT_FENCE_PTR")
        if writeback_fb is not None:
            if not self.writeback:
                raise DeviceError("no writeback connector on this CRTC")
            req.add(self.writeback.id, "WRITEBACK_FB_ID", writeback_fb.id)
            req.add_out_fence(self.writeback.id, "WRITEBACK_OUT_FENCE_PTR")
        return req, flags

    def _commit(self, req: AtomicRequest, flags: int, user_data: int = 0) -> dict:
        try:
            return req.commit(flags, user_data)
        except KernelCallError as exc:
            # Only the DRM master may commit (TEST_ONLY may pass without it).
            if exc.errno in (errno.EACCES, errno.EPERM):
                raise DeviceError(f"{self.card.path}: another process holds DRM master "
                                  "(a compositor, or another sits); stop it first") from exc
            raise

    def test(self, fb, writeback_fb=None) -> None:
        """TEST_ONLY commit of what the first flip will do: fails early and
        cleanly (nothing changes on screen) if the driver refuses it."""
        req, flags = self.request(fb, writeback_fb=writeback_fb)
        try:
            self._commit(req, flags | TEST_ONLY)
        except KernelCallError as exc:
            raise DeviceError(f"{self.card.driver} refuses to show {self.format} "
                              f"{self.size[0]}x{self.size[1]} on {self.connector.name} "
                              f"({self.mode}): {exc}") from exc

    def flip(self, fb, *, in_fence=None, writeback_fb=None, overlay_fb=None, user_data: int = 0) -> dict:
        """Non-blocking commit with a page-flip event; returns its fences
        ({'OUT_FENCE_PTR': SyncFile, 'WRITEBACK_OUT_FENCE_PTR': ...})."""
        req, flags = self.request(fb, in_fence=in_fence, writeback_fb=writeback_fb, overlay_fb=overlay_fb)
        fences = self._commit(req, flags | NONBLOCK | PAGE_FLIP_EVENT, user_data)
        self.flipped_ns = req.started_ns
        self._modeset_done = True
        return fences

    def restore(self) -> None:
        """Put back what the first commit changed (blocking, modeset)."""
        if self._saved is None:
            return
        req = AtomicRequest(self.card)
        old_blob = self._create_blob(self._saved_mode) if self._saved_mode else 0
        req.add(self.crtc_id, "MODE_ID", old_blob)
        for obj, name, value in self._saved:
            req.add(obj, name, value)
        try:
            req.commit(ALLOW_MODESET)
        except KernelCallError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM):
                return  # not the master: nothing of ours is on screen to undo
            if exc.errno != errno.EBUSY:
                raise
            # a flip still in flight: wait for the vblank and try once more
            import select
            select.select([self.card.fileno()], [], [], 0.5)
            self.card.read_events()
            req.commit(ALLOW_MODESET)
        self._saved = None
        self._modeset_done = False
        for blob in (self._mode_blob, old_blob):
            if blob:
                lib.drmModeDestroyPropertyBlob(self.card.fileno(), blob)
        self._mode_blob = 0
