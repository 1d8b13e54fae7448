"""A frame's colour matrix and range follow what the driver says in its
format, with V4L2's defaults (videodev2.h's macros, through the binding)
where it says "default"; a consumer's option overrides them."""
import pytest

from sits._kernel import ffi, lib
from sits.cuda.formats import OutputSpec
from sits.errors import UsageError
from sits.formats import fourcc
from sits.pipeline.cuda import CudaConsumer
from sits.pipeline.synthetic import synthetic_format
from sits.v4l2 import raw
from sits.v4l2.colorimetry import colorimetry


@pytest.mark.parametrize("colorspace,rgb,want", [
    ("DEFAULT", False, ("bt601", "limited")),
    ("SMPTE170M", False, ("bt601", "limited")),
    ("REC709", False, ("bt709", "limited")),
    ("BT2020", False, ("bt2020", "limited")),
    ("JPEG", False, ("bt601", "full")),      # JFIF: full-range BT.601
    ("SRGB", False, ("bt601", "limited")),   # sRGB's YCbCr is BT.601, limited
    ("DEFAULT", True, ("bt601", "full")),    # RGB defaults to full range
])
def test_defaults_are_v4l2s(colorspace, rgb, want):
    assert colorimetry(getattr(lib, f"V4L2_COLORSPACE_{colorspace}"), rgb=rgb) == want


def test_what_the_driver_says_wins_over_the_colorspace_default():
    rec709 = lib.V4L2_COLORSPACE_REC709
    assert colorimetry(rec709, lib.V4L2_YCBCR_ENC_601) == ("bt601", "limited")
    assert colorimetry(rec709, 0, lib.V4L2_QUANTIZATION_FULL_RANGE) == ("bt709", "full")
    assert colorimetry(rec709, lib.V4L2_YCBCR_ENC_XV709) == ("bt709", "limited")


def test_an_encoding_sits_cannot_convert_is_one_clear_line():
    with pytest.raises(UsageError, match="SMPTE 240M.*give the matrix"):
        colorimetry(0, lib.V4L2_YCBCR_ENC_SMPTE240M)


def test_the_format_carries_the_drivers_colorimetry():
    f = ffi.new("struct v4l2_format *", {"type": lib.V4L2_BUF_TYPE_VIDEO_CAPTURE})
    f.fmt.pix.pixelformat = fourcc("YUYV")
    f.fmt.pix.width, f.fmt.pix.height = 64, 48
    f.fmt.pix.colorspace = lib.V4L2_COLORSPACE_REC709
    f.fmt.pix.quantization = lib.V4L2_QUANTIZATION_FULL_RANGE
    fmt = raw.format_of(f)
    assert (fmt.colorspace, fmt.ycbcr_enc, fmt.quantization) == (lib.V4L2_COLORSPACE_REC709, 0,
                                                                  lib.V4L2_QUANTIZATION_FULL_RANGE)
    # ycbcr_enc is a member of an unnamed union: read through the binding
    ffi.cast("__u32 *", ffi.addressof(f.fmt.pix, "quantization"))[-1] = lib.V4L2_YCBCR_ENC_709
    assert raw.format_of(f).ycbcr_enc == lib.V4L2_YCBCR_ENC_709


def test_the_cuda_consumer_follows_the_format_unless_told():
    fmt = synthetic_format("YUYV", 64, 48)
    fmt.colorspace = lib.V4L2_COLORSPACE_REC709
    plan = CudaConsumer(OutputSpec(32, 24)).plan_for(fmt, "test")
    assert (plan.matrix, plan.range) == ("bt709", "limited")
    plan = CudaConsumer(OutputSpec(32, 24), matrix="bt2020", range="full").plan_for(fmt, "test")
    assert (plan.matrix, plan.range) == ("bt2020", "full")
    fmt.colorspace = lib.V4L2_COLORSPACE_JPEG
    plan = CudaConsumer(OutputSpec(32, 24)).plan_for(fmt, "test")
    assert (plan.matrix, plan.range) == ("bt601", "full")


def test_bad_colorimetry_options_are_refused_before_anything_opens():
    with pytest.raises(UsageError, match="colour matrix 'bt999'"):
        CudaConsumer(OutputSpec(32, 24), matrix="bt999")
    with pytest.raises(UsageError, match="range 'studio'"):
        CudaConsumer(OutputSpec(32, 24), range="studio")
