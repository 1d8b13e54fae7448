"""A raw Bayer camera's options (--black-level, --white-balance, --gamma):
refused before any device opens when the format asked for is not raw, when
a value is out of the samples' range, or when the CUDA stage is asked for
grey-world white balance; each refusal one line, exit 2."""
import pytest

from sits.cli.app import main
from sits.cuda.formats import OutputSpec
from sits.errors import UsageError
from sits.pipeline.capture import options


@pytest.mark.parametrize("given, message", [
    (dict(format="YUYV", gamma=2.2), "YUYV is not raw Bayer"),
    (dict(format="BG10", black_level=1023), "outside 0..1022 for 10-bit"),
    (dict(format="RGGB", white_balance="1.5,1"), "give R,G,B"),
    (dict(format="RGGB", white_balance="0,1,1"), "three positive numbers"),
])
def test_refused_before_any_device(given, message):
    with pytest.raises(UsageError, match=message):
        options(device="synthetic", display=True, memory="udmabuf", **given)


def test_raw_options_reach_the_options_record():
    opts = options(device="synthetic", format="pRAA", black_level=64, white_balance="auto", gamma=2.2)
    assert (opts.black_level, opts.white_balance, opts.gamma) == (64, "auto", 2.2)


def test_grey_world_is_not_the_cuda_stages():
    from sits.bayer import RawOptions
    from sits.pipeline.cuda import CudaConsumer
    with pytest.raises(UsageError, match="auto is the display stage's"):
        CudaConsumer(OutputSpec(224, 224), raw=RawOptions(gains="auto"))


def test_one_line_and_exit_2(capsys):
    code = main(["capture", "--device", "synthetic", "--format", "YUYV", "--gamma", "2.2", "--to-cuda", "224x224"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "not raw Bayer" in err
