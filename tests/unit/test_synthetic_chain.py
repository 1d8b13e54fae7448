"""The synthetic source through the chain's front doors (open_chain, `sits
capture --device synthetic`): no camera, no GPU needed for these."""
import pytest

from sits.cli.app import main
from sits.pipeline.chain import open_chain


def test_open_chain_streams_the_synthetic_source_with_its_sequence_and_timestamps():
    seen = []
    with open_chain("synthetic", format="NV12", size=(64, 48), fps=480, buffers=4, frames=20,
                    on_frame=lambda f: seen.append((f.sequence, f.timestamp_ns, f.buffer.memfd is not None))) as chain:
        summary = chain.run()
    cam = chain.pipeline.source
    assert summary.device == cam.path == "synthetic:NV12-64x48@480" and summary.memory == "memfd"
    assert summary.format == "NV12" and summary.size == "64x48"
    assert len(seen) >= 20 and all(memfd for *_, memfd in seen)
    first = seen[0][1] - seen[0][0] * cam.period_ns
    assert all(ts == first + seq * cam.period_ns for seq, ts, _ in seen)   # the ticks' stamps, carried
    assert [s for s, *_ in seen] == sorted({s for s, *_ in seen})
    assert cam.closed   # the pipeline owns it


@pytest.mark.parametrize("argv, message", [
    (["--to-kms"], "--to-kms: add --memory udmabuf"),
    (["--to-cuda", "224x224", "--memory", "heap"], "--memory heap is for V4L2"),
    (["--to-cuda", "224x224", "--reconnect"], "never goes away"),
])
def test_what_the_synthetic_source_cannot_do_is_one_usage_line(capsys, argv, message):
    assert main(["capture", "--device", "synthetic", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
