"""Camera controls (sits/v4l2/controls.py): the names `v4l2-ctl -l`
prints, requests from the command line and from the library, each value
checked against the control's range before anything is set, and
`--control` through the one option table. The device side: tests/vm/
test_controls_vm.py."""
import json
import re

import pytest

from sits import open_chain
from sits._kernel import lib
from sits.cli import capture as cli
from sits.cli.app import main
from sits.errors import DeviceError, IoctlError, UsageError
from sits.pipeline.capture import CaptureOptions, options
from sits.v4l2 import controls as ctl
from sits.v4l2 import raw

# driver names -> the names v4l2-ctl 1.22 printed for them (vivid, in the
# test VM; uvcvideo's as v4l2-ctl prints a webcam's)
V4L2_CTL_NAMES = {
    "Brightness": "brightness",
    "Integer 64 Bits": "integer_64_bits",
    "Read-Only Integer 32 Bits": "read_only_integer_32_bits",
    "U8 2x3x4x5 Array": "u8_2x3x4x5_array",
    "HDMI 000-0 Is Connected To": "hdmi_000_0_is_connected_to",
    "Limited RGB Range (16-235)": "limited_rgb_range_16_235",
    "White Balance, Automatic": "white_balance_automatic",
    "White Balance Temperature": "white_balance_temperature",
    "Power Line Frequency": "power_line_frequency",
    "Exposure Time, Absolute": "exposure_time_absolute",
    "  Leading, trailing...  ": "leading_trailing",
}


@pytest.mark.parametrize("driver,printed", V4L2_CTL_NAMES.items())
def test_names_are_those_v4l2_ctl_prints(driver, printed):
    assert ctl.control_name(driver) == printed


def control(type_, name="Brightness", minimum=0, maximum=255, step=1, default=128, flags=0, menu=(), **kw):
    return ctl.CameraControl(raw.Control(0x980900, name, type_, minimum, maximum, default, flags, step, **kw),
                             menu=list(menu))


INT = lib.V4L2_CTRL_TYPE_INTEGER
MENU = control(lib.V4L2_CTRL_TYPE_MENU, "Power Line Frequency", 0, 3, 1, 1,
               menu=[(0, "Disabled"), (1, "50 Hz"), (2, "60 Hz"), (3, "Auto")])
SPARSE_MENU = control(lib.V4L2_CTRL_TYPE_MENU, "Menu", 1, 4, 1, 3,
                      menu=[(1, "Menu Item 1"), (3, "Menu Item 3"), (4, "Menu Item 4")])


@pytest.mark.parametrize("c,given,value", [
    (control(INT), "200", 200),
    (control(INT), 0, 0),
    (control(INT, minimum=-128, maximum=128), "-128", -128),
    (control(INT, minimum=0, maximum=100, step=10), "30", 30),
    (control(INT), "0x10", 16),
    (control(lib.V4L2_CTRL_TYPE_INTEGER64, minimum=-2**63, maximum=2**63 - 1), "-5000000000", -5000000000),
    (control(lib.V4L2_CTRL_TYPE_BOOLEAN, maximum=1), "true", 1),
    (control(lib.V4L2_CTRL_TYPE_BOOLEAN, maximum=1), "FALSE", 0),
    (control(lib.V4L2_CTRL_TYPE_BOOLEAN, maximum=1), "1", 1),
    (control(lib.V4L2_CTRL_TYPE_BOOLEAN, maximum=1), False, 0),
    (MENU, "2", 2),
    (MENU, "50 Hz", 1),
    (MENU, "50_hz", 1),
    (MENU, "auto", 3),
    (SPARSE_MENU, "menu_item_4", 4),
    (control(lib.V4L2_CTRL_TYPE_INTEGER_MENU, "Integer Menu", 1, 8, 1, 4, menu=[(2, 2), (4, 5), (8, 42)]), "8", 8),
    (control(lib.V4L2_CTRL_TYPE_BITMASK, maximum=0x80402010), "0x80002000", 0x80002000),
    (control(lib.V4L2_CTRL_TYPE_STRING, "String", 2, 4), "abc", "abc"),
])
def test_a_value_in_range_is_taken(c, given, value):
    assert c.parse(given) == value


@pytest.mark.parametrize("c,given,takes", [
    (control(INT), "256", "brightness (int) takes 0 to 255"),
    (control(INT), "-1", "takes 0 to 255"),
    (control(INT), "bright", "takes 0 to 255"),
    (control(INT, minimum=0, maximum=100, step=10), "35", "takes 0 to 100 in steps of 10"),
    (control(lib.V4L2_CTRL_TYPE_BOOLEAN, maximum=1), "2", "takes 0 or 1 (false or true)"),
    (control(lib.V4L2_CTRL_TYPE_BOOLEAN, maximum=1), "yes please", "takes 0 or 1"),
    (MENU, "4", "takes one of 0 (Disabled), 1 (50 Hz), 2 (60 Hz), 3 (Auto)"),
    (MENU, "55 Hz", "takes one of 0 (Disabled), 1 (50 Hz)"),
    (SPARSE_MENU, "2", "takes one of 1 (Menu Item 1), 3 (Menu Item 3), 4 (Menu Item 4)"),
    (control(lib.V4L2_CTRL_TYPE_INTEGER_MENU, "Integer Menu", 1, 8, 1, 4, menu=[(2, 2), (4, 5)]), "5",
     "takes one of 2 (2), 4 (5)"),
    (control(lib.V4L2_CTRL_TYPE_BITMASK, maximum=0x80402010), "1", "takes a bitmask of 0x80402010"),
    (control(lib.V4L2_CTRL_TYPE_STRING, "String", 2, 4), "abcde", "takes 2 to 4 characters"),
])
def test_a_bad_value_is_one_line_naming_what_it_takes(c, given, takes):
    with pytest.raises(UsageError) as err:
        c.parse(given)
    msg = str(err.value)
    assert "\n" not in msg and takes in msg and f"={given}" in msg, msg


@pytest.mark.parametrize("c,why", [
    (control(INT, "Read-Only Integer 32 Bits", flags=lib.V4L2_CTRL_FLAG_READ_ONLY), "is read-only"),
    (control(lib.V4L2_CTRL_TYPE_BUTTON, "Button", 0, 0, 0, 0), "is a button"),
    (control(lib.V4L2_CTRL_TYPE_U8, "U8 Array", 16, 32, 1, 24, elems=120, dims=(2, 3, 4, 5)),
     "is a u8[2][3][4][5] payload"),
])
def test_what_cannot_take_a_value_is_refused(c, why):
    with pytest.raises(UsageError, match=re.escape(f"control {c.name} {why}")):
        c.parse("1")


def test_requests_from_the_command_line_and_the_library_alike():
    assert ctl.requests(["brightness=200", "Power Line Frequency=50 Hz", "menu= Menu Item 4 "]) == [
        ("brightness", "200"), ("power_line_frequency", "50 Hz"), ("menu", "Menu Item 4")]
    assert ctl.requests({"Brightness": 200, "white_balance_automatic": False}) == [
        ("brightness", 200), ("white_balance_automatic", False)]
    assert ctl.requests([("contrast", 10)]) == [("contrast", 10)]
    assert ctl.requests(None) == [] and ctl.requests([]) == []


@pytest.mark.parametrize("given,msg", [
    (["brightness"], "--control takes NAME=VALUE, e.g. brightness=128, not 'brightness'"),
    (["=3"], "--control takes NAME=VALUE"),
    (["brightness="], "--control takes NAME=VALUE"),
    (["brightness=1", "Brightness=2"], "--control brightness is given twice"),
])
def test_malformed_requests_are_usage_errors(given, msg):
    with pytest.raises(UsageError, match=re.escape(msg)):
        ctl.requests(given)


def camera():
    return ctl.Controls([control(INT), MENU, control(INT, "Read-Only", flags=lib.V4L2_CTRL_FLAG_READ_ONLY)],
                        "/dev/video0")


def test_an_unknown_name_lists_the_controls_that_can_be_set():
    with pytest.raises(UsageError) as err:
        camera().resolve([("brightnes", "1")])
    assert str(err.value) == ("/dev/video0: no control named 'brightnes'; "
                              "its controls: brightness, power_line_frequency")


class Camera:
    """What CaptureDevice.set_controls() asks of its device."""
    path = "/dev/video0"

    def controls(self):
        return camera()

    def fileno(self):
        return -1


def test_every_value_is_checked_before_any_is_set(monkeypatch):
    from sits.v4l2.capture import CaptureDevice
    calls = []
    monkeypatch.setattr(raw, "s_ext_ctrl", lambda fd, desc, v: calls.append((desc.name, v)))
    with pytest.raises(UsageError, match="/dev/video0: control power_line_frequency=9 is not valid"):
        CaptureDevice.set_controls(Camera(), [("brightness", "10"), ("power_line_frequency", "9")])
    assert calls == []
    CaptureDevice.set_controls(Camera(), [("power_line_frequency", "Auto"), ("brightness", "10")])
    assert calls == [("Power Line Frequency", 3), ("Brightness", 10)]   # in the order given


def test_a_refusal_by_the_driver_is_a_runtime_error_naming_the_control(monkeypatch):
    import errno

    def refuse(fd, desc, v):
        raise IoctlError(errno.EBUSY, "VIDIOC_S_EXT_CTRLS")
    monkeypatch.setattr(raw, "s_ext_ctrl", refuse)
    cs = camera()
    with pytest.raises(DeviceError, match=r"/dev/video0: control brightness=10 refused by the driver: "
                                          r"VIDIOC_S_EXT_CTRLS: .*\(EBUSY\)"):
        cs.apply(-1, cs.resolve([("brightness", 10)]))


def test_the_listing_entry_of_a_menu_and_an_array():
    m = MENU.as_dict()
    assert (m["name"], m["type"], m["min"], m["max"], m["default"]) == ("power_line_frequency", "menu", 0, 3, 1)
    assert m["menu"][1] == {"index": 1, "name": "50 Hz"}
    arr = control(lib.V4L2_CTRL_TYPE_U8, "U8 Array", 16, 32, 1, 24, elems=120, dims=(2, 3, 4, 5),
                  flags=lib.V4L2_CTRL_FLAG_HAS_PAYLOAD).as_dict()
    assert arr["dims"] == [2, 3, 4, 5] and arr["flags"] == ["has-payload"] and "default" not in arr


# ------------------------------------------------------ the option, once
def test_control_is_one_option_of_the_table_for_the_cli_and_the_library():
    assert CaptureOptions().controls is None
    kw = cli.fast_command(["--to-kms", "--control", "brightness=200", "--control=menu=Menu Item 4"]).keywords
    assert kw["controls"] == ["brightness=200", "menu=Menu Item 4"]
    assert options(controls={"brightness": 1}).controls == {"brightness": 1}


def test_a_malformed_control_is_refused_before_any_device(capsys):
    # no camera on this machine: the request itself is refused first, as a usage error
    assert main(["capture", "--to-kms", "--control", "brightness"]) == 2
    err = capsys.readouterr().err
    assert err == "sits: error: --control takes NAME=VALUE, e.g. brightness=128, not 'brightness'\n"


def test_the_synthetic_source_has_no_controls():
    with pytest.raises(UsageError, match="--control: the synthetic source has no controls"):
        open_chain("synthetic", on_frame=lambda f: None, controls={"brightness": 1})


def test_sits_cameras_prints_a_control_as_a_line():
    from sits.cli.cameras import control_line
    assert control_line(MENU.as_dict() | {"value": 1}) == \
        "power_line_frequency (menu) 0: Disabled, 1: 50 Hz, 2: 60 Hz, 3: Auto default 1 = 1"
    assert control_line(control(INT, flags=lib.V4L2_CTRL_FLAG_SLIDER).as_dict() | {"value": 128}) == \
        "brightness (int) 0..255 default 128 = 128 [slider]"


def test_sits_cameras_json_is_a_list(capsys):
    assert main(["cameras", "--json"]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), list)
