"""A frame's colour matrix and range, as the driver says in its format
(colorspace, ycbcr_enc, quantization), with V4L2's own defaults where it
says "default" (videodev2.h's V4L2_MAP_YCBCR_ENC_DEFAULT and
V4L2_MAP_QUANTIZATION_DEFAULT, through the kernel binding), as GStreamer's
colorimetry does. An option the user gives overrides it."""
from __future__ import annotations

from sits._kernel import lib
from sits.errors import UsageError

#: the YCbCr encodings sits converts, by the matrix name the CUDA stage uses
#: (xvYCC's encodings are BT.601's and BT.709's matrices)
MATRIX_OF = {lib.V4L2_YCBCR_ENC_601: "bt601", lib.V4L2_YCBCR_ENC_XV601: "bt601",
             lib.V4L2_YCBCR_ENC_709: "bt709", lib.V4L2_YCBCR_ENC_XV709: "bt709",
             lib.V4L2_YCBCR_ENC_BT2020: "bt2020"}
RANGE_OF = {lib.V4L2_QUANTIZATION_LIM_RANGE: "limited", lib.V4L2_QUANTIZATION_FULL_RANGE: "full"}
_UNSUPPORTED = {lib.V4L2_YCBCR_ENC_BT2020_CONST_LUM: "BT.2020 constant luminance",
                lib.V4L2_YCBCR_ENC_SMPTE240M: "SMPTE 240M"}


def colorimetry(colorspace: int = 0, ycbcr_enc: int = 0, quantization: int = 0, *,
                rgb: bool = False) -> tuple[str, str]:
    """(matrix, range) of frames in a format that says these (0: default);
    `rgb`: the pixel format is RGB (its default range is full)."""
    enc = ycbcr_enc or lib.sits_v4l2_ycbcr_enc_default(colorspace)
    quant = quantization or lib.sits_v4l2_quantization_default(int(rgb), colorspace, enc)
    matrix = MATRIX_OF.get(enc)
    if matrix is None:
        raise UsageError(f"the camera's colour encoding is {_UNSUPPORTED.get(enc, enc)}, which sits does not "
                         "convert; give the matrix (bt601, bt709 or bt2020)")
    return matrix, RANGE_OF[quant]


def of_format(fmt, *, rgb: bool = False) -> tuple[str, str]:
    """colorimetry() of a sits.v4l2.raw.Format."""
    return colorimetry(fmt.colorspace, fmt.ycbcr_enc, fmt.quantization, rgb=rgb)
