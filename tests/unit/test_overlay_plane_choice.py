"""Which plane the overlay layer takes, and what the modeset sets on it,
from the planes and properties a card reports (KmsOutput.use_overlay); the
test VM's vkms has an overlay plane without zpos or blend mode, so the
properties' rules are checked here on reported values."""
import types

import pytest

from sits._kernel import lib
from sits.drm.output import KmsOutput
from sits.drm.raw import Property
from sits.errors import DeviceError

IMMUTABLE = lib.DRM_MODE_PROP_IMMUTABLE


class Card:
    path = "/dev/dri/card9"

    def __init__(self, planes, props=None):
        self._planes, self._props = planes, props or {}

    def planes(self):
        return [types.SimpleNamespace(id=i, possible_crtcs=crtcs, formats=fmts)
                for i, (kind, fmts, crtcs) in self._planes.items()]

    def plane_type(self, plane):
        return self._planes[plane][0]

    def properties(self, plane, kind):
        return self._props.get(plane, {})


def output(card, video=31):
    out = KmsOutput.__new__(KmsOutput)
    out.card, out.plane_id, out.crtc_index = card, video, 0
    out.connector = types.SimpleNamespace(name="Virtual-1")
    out.overlay_plane_id, out.overlay_fb, out._overlay_props = 0, None, []
    return out


def test_an_overlay_plane_with_alpha_is_taken_before_another_primary():
    card = Card({31: ("primary", ["XR24", "AR24"], 1), 40: ("primary", ["AR24"], 1),
                 45: ("overlay", ["XR24", "AR24"], 1), 50: ("cursor", ["AR24"], 1), 55: ("overlay", ["AR24"], 2)})
    assert output(card).use_overlay("AR24", blank_fb=None) == 45


def test_no_free_plane_with_alpha_is_one_line_naming_the_planes():
    card = Card({31: ("primary", ["XR24", "AR24"], 1), 45: ("overlay", ["XR24", "RG16"], 1)})
    planes = r"31 \(primary: XR24 AR24\), 45 \(overlay: XR24 RG16\)"
    with pytest.raises(DeviceError, match=r"no free plane with AR24 .*" + planes):
        output(card).use_overlay("AR24", blank_fb=None)


def plane_props(zpos=None, immutable=False, blend=False):
    props = {}
    if zpos is not None:
        props["zpos"] = Property(1, "zpos", IMMUTABLE if immutable else 0, zpos)
    if blend:
        props["pixel blend mode"] = Property(2, "pixel blend mode", 0, 1,
                                             {"None": 0, "Pre-multiplied": 1, "Coverage": 2})
    return props


def test_the_modeset_puts_the_overlay_above_the_video_premultiplied():
    card = Card({31: ("primary", ["XR24"], 1), 45: ("overlay", ["AR24"], 1)},
                {31: plane_props(zpos=2), 45: plane_props(zpos=0, blend=True)})
    out = output(card)
    out.use_overlay("AR24", blank_fb=None)
    assert out._overlay_props == [("zpos", 3), ("pixel blend mode", 1)]


def test_an_overlay_already_above_keeps_its_zpos():
    card = Card({31: ("primary", ["XR24"], 1), 45: ("overlay", ["AR24"], 1)},
                {31: plane_props(zpos=0), 45: plane_props(zpos=1)})
    out = output(card)
    out.use_overlay("AR24", blank_fb=None)
    assert out._overlay_props == []


def test_a_fixed_zpos_below_the_video_is_refused():
    card = Card({31: ("primary", ["XR24"], 1), 45: ("overlay", ["AR24"], 1)},
                {31: plane_props(zpos=2, immutable=True), 45: plane_props(zpos=1, immutable=True)})
    with pytest.raises(DeviceError, match="fixed zpos 1 puts it below"):
        output(card).use_overlay("AR24", blank_fb=None)
