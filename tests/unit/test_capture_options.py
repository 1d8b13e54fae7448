"""The capture options are declared once (sits.pipeline.capture.OPTIONS):
`sits capture`'s flags, CaptureOptions' fields and open_chain's keywords
are that table, with its defaults, and every caller's values are checked
by it before anything opens."""
import inspect
import re

import pytest

from sits import open_chain
from sits.cli import capture as cli
from sits.errors import UsageError
from sits.pipeline.capture import OPTIONS, CaptureOptions, options


def test_one_table_three_readers():
    fields = {f: getattr(CaptureOptions(), f) for f in CaptureOptions.__dataclass_fields__}
    sig = inspect.signature(open_chain).parameters
    for o in OPTIONS:
        assert fields[o.dest] == o.default, o.dest                  # the record's default
        assert sig[o.dest].default == o.default, o.dest             # open_chain's
        assert next(c for c in cli.OPTIONS if c.dest == o.dest) is o  # the CLI's flag


def test_the_display_is_off_unless_asked_for_everywhere():
    assert CaptureOptions().display is False
    assert cli.fast_command(["--to-cuda", "8x8"]).keywords.get("display", False) is False


@pytest.mark.parametrize("kw,msg", [
    (dict(memory="bogus"), re.escape("open_chain: memory must be mmap, heap or udmabuf, not 'bogus'")),
    (dict(buffers=1), "open_chain: buffers must be 2 to 32, not 1"),
    (dict(size="12x"), "open_chain: size must look like 1280x720"),
    (dict(format="YUYV2"), "open_chain: format takes a fourcc"),
    (dict(colour="red"), "open_chain: unknown option 'colour'"),
    (dict(memory="mmap"), "makes memfd buffers .*--memory mmap is for V4L2"),
    (dict(display=True), "--to-kms: add --memory udmabuf"),
])
def test_open_chain_refuses_what_the_synthetic_source_cannot_honour(kw, msg):
    with pytest.raises(UsageError, match=msg):
        open_chain("synthetic", on_frame=lambda f: None, **kw)


def test_the_library_takes_a_size_as_the_cli_spells_it_or_as_a_tuple():
    assert options(device="synthetic", size="64x48").size == (64, 48)
    assert options(device="synthetic", size=(64, 48)).size == (64, 48)


def test_the_cli_checks_with_the_same_table():
    with pytest.raises(UsageError, match=re.escape("--memory must be mmap, heap or udmabuf, not 'bogus'")):
        cli.run_capture(display=True, memory="bogus")
