"""Card: owns a /dev/dri/card* fd with the client caps sits relies on."""
import errno
import glob
import os

from sits._kernel import lib
from sits.drm import raw
from sits.errors import DeviceError, KernelCallError
from sits.fd import FdOwner


def card_paths() -> list[str]:
    return sorted(glob.glob("/dev/dri/card[0-9]*"), key=lambda p: int(p.rsplit("card", 1)[1]))


class Card(FdOwner):
    """A DRM card opened for KMS.

    On open it asks for universal planes, atomic and writeback connectors;
    `atomic` and `writeback` say what the kernel granted.
    """

    __slots__ = ("path", "version", "atomic", "writeback", "_prop_ids")

    def __init__(self, fd: int, path: str = "?"):
        super().__init__(fd)
        self.path = path
        try:
            self.version = raw.get_version(fd)
        except KernelCallError as exc:
            if exc.errno in (errno.ENOTTY, errno.EINVAL, errno.EOPNOTSUPP):   # no DRM ioctl here
                raise DeviceError(f"{path}: not a DRM device ({exc.call}: {exc.strerror})") from None
            raise
        raw.set_client_cap(fd, lib.DRM_CLIENT_CAP_UNIVERSAL_PLANES)
        self.atomic = raw.set_client_cap(fd, lib.DRM_CLIENT_CAP_ATOMIC)
        # Writeback needs atomic; the kernel refuses it otherwise.
        self.writeback = self.atomic and raw.set_client_cap(fd, lib.DRM_CLIENT_CAP_WRITEBACK_CONNECTORS)
        self._prop_ids: dict[tuple[int, str], int] = {}

    @classmethod
    def open(cls, path: str):
        # O_NONBLOCK: reading events never blocks the event loop.
        return super().open(path, os.O_RDWR | os.O_NONBLOCK, path=path)

    @property
    def driver(self) -> str:
        return self.version.name

    def resources(self) -> raw.Resources:
        return raw.get_resources(self.fileno())

    def connectors(self) -> list[raw.Connector]:
        return [raw.get_connector(self.fileno(), c) for c in self.resources().connectors]

    def planes(self) -> list[raw.Plane]:
        return [raw.get_plane(self.fileno(), p) for p in raw.get_plane_ids(self.fileno())]

    def properties(self, object_id: int, object_type: int) -> dict[str, raw.Property]:
        return raw.get_properties(self.fileno(), object_id, object_type)

    def plane_type(self, plane_id: int) -> str:
        prop = self.properties(plane_id, lib.DRM_MODE_OBJECT_PLANE).get("type")
        return prop.enum_name.lower() if prop and prop.enum_name else "unknown"

    def cap(self, cap: int) -> int | None:
        return raw.get_cap(self.fileno(), cap)

    def prop_id(self, object_id: int, name: str) -> int:
        """A property's id on a KMS object, by name (cached)."""
        key = (object_id, name)
        if key not in self._prop_ids:
            for pname, prop in self.properties(object_id, lib.DRM_MODE_OBJECT_ANY).items():
                self._prop_ids[(object_id, pname)] = prop.id
            if key not in self._prop_ids:
                raise KeyError(f"KMS object {object_id} has no property {name}")
        return self._prop_ids[key]

    def prop_value(self, object_id: int, name: str) -> int:
        prop = self.properties(object_id, lib.DRM_MODE_OBJECT_ANY).get(name)
        if prop is None:
            raise KeyError(f"KMS object {object_id} has no property {name}")
        return prop.value

    def read_events(self) -> list:
        """Completed page flips / vblanks waiting on the fd (non-blocking)."""
        return raw.read_events(self.fileno())
