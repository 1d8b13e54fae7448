"""fd-level DRM/KMS calls through libdrm, copied into plain Python values.

libdrm allocates its result structs; each function here frees them before
returning, so nothing from libdrm outlives the call.
"""
import errno
from dataclasses import dataclass, field

from sits._kernel import ffi, lib
from sits.errors import KernelCallError
from sits.formats import fourcc_str

CONNECTION = {1: "connected", 2: "disconnected", 3: "unknown"}
PLANE_TYPES = {lib.DRM_PLANE_TYPE_OVERLAY: "overlay", lib.DRM_PLANE_TYPE_PRIMARY: "primary",
               lib.DRM_PLANE_TYPE_CURSOR: "cursor"}


def _call(ptr, name: str):
    if ptr == ffi.NULL:
        raise KernelCallError(ffi.errno or errno.EINVAL, name)
    return ptr


def _u32s(ptr, count) -> list[int]:
    return [ptr[i] for i in range(count)]


@dataclass
class Version:
    name: str
    major: int
    minor: int
    patch: int
    desc: str


def get_version(fd: int) -> Version:
    v = _call(lib.drmGetVersion(fd), "drmGetVersion")
    try:
        return Version(ffi.string(v.name).decode(), v.version_major, v.version_minor,
                       v.version_patchlevel, ffi.string(v.desc).decode())
    finally:
        lib.drmFreeVersion(v)


def get_cap(fd: int, cap: int) -> int | None:
    value = ffi.new("uint64_t *")
    return value[0] if lib.drmGetCap(fd, cap, value) == 0 else None


def set_client_cap(fd: int, cap: int, value: int = 1) -> bool:
    """True if the kernel accepted the client cap."""
    return lib.drmSetClientCap(fd, cap, value) == 0


@dataclass
class Resources:
    fbs: list[int]
    crtcs: list[int]
    connectors: list[int]
    encoders: list[int]
    min_size: tuple[int, int]
    max_size: tuple[int, int]


def get_resources(fd: int) -> Resources:
    r = _call(lib.drmModeGetResources(fd), "drmModeGetResources")
    try:
        return Resources(_u32s(r.fbs, r.count_fbs), _u32s(r.crtcs, r.count_crtcs),
                         _u32s(r.connectors, r.count_connectors), _u32s(r.encoders, r.count_encoders),
                         (r.min_width, r.min_height), (r.max_width, r.max_height))
    finally:
        lib.drmModeFreeResources(r)


@dataclass
class Mode:
    name: str
    width: int
    height: int
    vrefresh: int
    preferred: bool
    raw: bytes  # the drm_mode_modeinfo bytes, for MODE_ID blobs
    frame_ns: int = 0   # the time between vblanks (DRM's framedur_ns; 0: no clock given)

    def __str__(self):
        return f"{self.width}x{self.height}@{self.vrefresh}"


def frame_ns(clock_khz: int, htotal: int, vtotal: int, interlaced: bool) -> int:
    """The time between vblanks, as drm_calc_timestamping_constants() has
    it: an interlaced mode's vblanks are a field apart."""
    dotclock = clock_khz * (2 if interlaced else 1)
    return htotal * vtotal * 1_000_000 // dotclock if dotclock else 0


def _mode(m) -> Mode:
    return Mode(ffi.string(m.name).decode(), m.hdisplay, m.vdisplay, m.vrefresh,
                bool(m.type & lib.DRM_MODE_TYPE_PREFERRED), bytes(ffi.buffer(ffi.addressof(m))),
                frame_ns(m.clock, m.htotal, m.vtotal, bool(m.flags & lib.DRM_MODE_FLAG_INTERLACE)))


@dataclass
class Connector:
    id: int
    type: int
    type_id: int
    connection: str
    encoder_id: int
    encoders: list[int]
    modes: list[Mode]

    @property
    def name(self) -> str:
        t = lib.drmModeGetConnectorTypeName(self.type)
        base = ffi.string(t).decode() if t != ffi.NULL else f"Unknown{self.type}"
        return f"{base}-{self.type_id}"

    @property
    def connected(self) -> bool:
        return self.connection == "connected"

    @property
    def is_writeback(self) -> bool:
        return self.type == lib.DRM_MODE_CONNECTOR_WRITEBACK


def get_connector(fd: int, connector_id: int, *, probe: bool = False) -> Connector:
    """`probe=True` asks the driver to re-detect (slow on real hardware)."""
    get = lib.drmModeGetConnector if probe else lib.drmModeGetConnectorCurrent
    c = _call(get(fd, connector_id), "drmModeGetConnector")
    try:
        return Connector(c.connector_id, c.connector_type, c.connector_type_id,
                         CONNECTION.get(c.connection, "unknown"), c.encoder_id,
                         _u32s(c.encoders, c.count_encoders),
                         [_mode(c.modes[i]) for i in range(c.count_modes)])
    finally:
        lib.drmModeFreeConnector(c)


@dataclass
class Encoder:
    id: int
    type: int
    crtc_id: int
    possible_crtcs: int
    possible_clones: int


def get_encoder(fd: int, encoder_id: int) -> Encoder:
    e = _call(lib.drmModeGetEncoder(fd, encoder_id), "drmModeGetEncoder")
    try:
        return Encoder(e.encoder_id, e.encoder_type, e.crtc_id, e.possible_crtcs, e.possible_clones)
    finally:
        lib.drmModeFreeEncoder(e)


@dataclass
class Plane:
    id: int
    crtc_id: int
    fb_id: int
    possible_crtcs: int
    formats: list[str]


def get_plane_ids(fd: int) -> list[int]:
    r = _call(lib.drmModeGetPlaneResources(fd), "drmModeGetPlaneResources")
    try:
        return _u32s(r.planes, r.count_planes)
    finally:
        lib.drmModeFreePlaneResources(r)


def get_plane(fd: int, plane_id: int) -> Plane:
    p = _call(lib.drmModeGetPlane(fd, plane_id), "drmModeGetPlane")
    try:
        return Plane(p.plane_id, p.crtc_id, p.fb_id, p.possible_crtcs,
                     [fourcc_str(p.formats[i]) for i in range(p.count_formats)])
    finally:
        lib.drmModeFreePlane(p)


@dataclass
class Property:
    id: int
    name: str
    flags: int
    value: int
    enums: dict[str, int] = field(default_factory=dict)

    @property
    def enum_name(self) -> str | None:
        for name, v in self.enums.items():
            if v == self.value:
                return name
        return None


def get_properties(fd: int, object_id: int, object_type: int) -> dict[str, Property]:
    """All properties of a KMS object by name, with their current values."""
    props = _call(lib.drmModeObjectGetProperties(fd, object_id, object_type),
                  "drmModeObjectGetProperties")
    out = {}
    try:
        for i in range(props.count_props):
            p = _call(lib.drmModeGetProperty(fd, props.props[i]), "drmModeGetProperty")
            try:
                enums = {ffi.string(p.enums[j].name).decode(): p.enums[j].value
                         for j in range(p.count_enums)}
                name = ffi.string(p.name).decode()
                out[name] = Property(p.prop_id, name, p.flags, props.prop_values[i], enums)
            finally:
                lib.drmModeFreeProperty(p)
    finally:
        lib.drmModeFreeObjectProperties(props)
    return out


def get_blob(fd: int, blob_id: int) -> bytes:
    b = _call(lib.drmModeGetPropertyBlob(fd, blob_id), "drmModeGetPropertyBlob")
    try:
        return bytes(ffi.buffer(b.data, b.length))
    finally:
        lib.drmModeFreePropertyBlob(b)


def blob_formats(data: bytes) -> list[str]:
    """Fourccs listed in a WRITEBACK_PIXEL_FORMATS blob (an array of u32)."""
    n = len(data) // 4
    return [fourcc_str(int.from_bytes(data[4 * i:4 * i + 4], "little")) for i in range(n)]


@dataclass
class Event:
    type: int          # DRM_EVENT_FLIP_COMPLETE or DRM_EVENT_VBLANK
    user_data: int
    timestamp_ns: int  # CLOCK_MONOTONIC (DRM_CAP_TIMESTAMP_MONOTONIC)
    sequence: int
    crtc_id: int


def read_events(fd: int) -> list[Event]:
    """Parse the drm_event records a read() returns. (libdrm's
    drmHandleEvent does the same through C callbacks; reading the records
    directly keeps the event loop free of callbacks into Python.)"""
    import os
    try:
        data = os.read(fd, 4096)
    except BlockingIOError:
        return []
    events, pos = [], 0
    buf = ffi.from_buffer(data)
    while pos + ffi.sizeof("struct drm_event") <= len(data):
        head = ffi.cast("struct drm_event *", buf + pos)
        if head.type in (lib.DRM_EVENT_FLIP_COMPLETE, lib.DRM_EVENT_VBLANK):
            e = ffi.cast("struct drm_event_vblank *", buf + pos)
            events.append(Event(e.base.type, e.user_data, e.tv_sec * 1_000_000_000 + e.tv_usec * 1000,
                                e.sequence, e.crtc_id))
        pos += max(head.length, ffi.sizeof("struct drm_event"))
    return events
