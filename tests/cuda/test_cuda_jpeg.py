"""MJPEG frames decoded on the GPU (nvImageCodec, the hardware JPEG engine
where the GPU has one) by a stage of the frame queue and converted in C:
every output equal to the oracle's conversion of an independent decode
(libjpeg-turbo); 4:2:2 and 4:2:0, with and without Huffman tables; a
frame the decoder refuses counted as a decode error with the run going
on; the engine named in the report."""
import numpy as np
import pytest

from sits.cuda import reference as R
from sits.cuda.formats import OutputSpec, SourceFormat, make_plan
from sits.pipeline.synthetic import SyntheticCamera, block_image

pytestmark = pytest.mark.cuda

SIZE = (640, 368)
SPEC = OutputSpec(96, 64, dtype="float32")
# nvJPEG and libjpeg-turbo differ in their IDCTs and chroma upsampling (a
# few levels at block edges); the area resampling averages most of that
TOLERANCE = 4 / 255


@pytest.fixture(scope="module")
def cp():
    pytest.importorskip("cupy")
    pytest.importorskip("nvidia.nvimgcodec", reason="nvImageCodec (nvidia-nvimgcodec-cu13) is not installed")
    import cupy
    return cupy


def strip_tables(jpeg: bytes) -> bytes:
    from tests.unit.test_jpeg_stage import strip_huffman_tables
    return strip_huffman_tables(jpeg)


def frames_of(subsampling: str, n: int, bare: bool = False) -> list[bytes]:
    import simplejpeg
    out = [simplejpeg.encode_jpeg(block_image(SIZE, (7, i)), quality=90, colorsubsampling=subsampling)
           for i in range(n)]
    return [strip_tables(f) for f in out] if bare else out


def camera(frames: list[bytes]) -> SyntheticCamera:
    def fill(index, pixels):
        data = frames[index]
        pixels[:len(data)] = np.frombuffer(data, np.uint8)
        return len(data)
    return SyntheticCamera("MJPG", SIZE, fps=120, buffers=len(frames), fill=fill)


def oracle(jpeg: bytes) -> np.ndarray:
    import simplejpeg
    rgb = simplejpeg.decode_jpeg(jpeg, colorspace="RGB")
    plan = make_plan(SourceFormat("BGR888", *SIZE), SPEC)     # bytes R, G, B
    return R.convert_batch([np.ascontiguousarray(rgb).reshape(-1)], plan)[0]


def run(cp, cam, frames=40):
    from sits.pipeline.cuda import CudaConsumer
    from sits.pipeline.pipeline import Pipeline
    consumer = CudaConsumer(SPEC)
    outputs = []

    def status(s):
        if s.frames_captured >= frames // 2 and not outputs:
            cp.cuda.runtime.deviceSynchronize()
            outputs.extend(cp.asnumpy(on_gpu.tensor) for on_gpu in consumer._on_gpu.values())
    summary = Pipeline(cam, consumers=[consumer], on_status=status, status_interval=0.01).run(frames=frames)
    return summary.as_dict()["cuda"], outputs


@pytest.mark.parametrize("bare", [False, True], ids=["tables", "no-tables"])
@pytest.mark.parametrize("subsampling", ["422", "420"])
def test_decoded_and_converted_as_an_independent_decode(cp, subsampling, bare):
    frames = frames_of(subsampling, 4, bare)
    cam = camera(frames)
    try:
        rep, outputs = run(cp, cam)
    finally:
        cam.close()
    assert rep["import_path"] == "device" and rep["converted_in"] == "frame queue (C)"
    assert rep["decode"]["on"] == "hardware", rep["decode"]
    assert rep["decode"]["errors"] == 0 and rep["decode"]["frames"] >= 30 and rep["frames"] >= 30
    # the stage writes the first of its images that no conversion holds:
    # each it wrote holds one of the camera's frames (converted), the others
    # the grey frame they were made with
    wants = [oracle(f) for f in frames]
    from sits.cuda.jpeg import blank_jpeg
    grey = oracle(blank_jpeg(*SIZE))
    written = 0
    for out in outputs:
        errors = [np.abs(out - w).max() for w in wants]
        if min(errors) > TOLERANCE:
            assert np.abs(out - grey).max() <= TOLERANCE, errors
        else:
            written += 1
    assert written >= 1


def test_a_frame_the_decoder_refuses_is_a_decode_error_and_the_run_goes_on(cp):
    good = frames_of("422", 3)
    broken = good[1][:len(good[1]) // 3]          # its scan cut short, as a lost USB packet leaves it
    cam = camera([good[0], broken, good[2]])
    try:
        rep, _ = run(cp, cam, frames=30)
    finally:
        cam.close()
    decode = rep["decode"]
    assert decode["errors"] >= 5 and decode["frames"] >= 15, decode
    assert rep["frames"] == decode["frames"]


def test_sits_capture_to_cuda_from_an_mjpeg_source_and_its_timeline(cp, capsys, tmp_path):
    """The front door: `sits capture --format MJPG --to-cuda` decodes on the
    engine (the summary says so) and every frame's record has its decode
    between its dequeue and its conversion."""
    import json

    from sits.cli.app import main
    from sits.journey import record
    path = str(tmp_path / "t.ndjson")
    argv = ["capture", "--device", "synthetic", "--format", "MJPG", "--size", "640x368", "--fps", "120",
            "--frames", "40", "--to-cuda", "96x64", "--json", "--timeline", path]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cuda"]["decode"]["on"] == "hardware" and data["cuda"]["decode"]["errors"] == 0
    recs = record.read(path)
    assert len(recs) == data["frames_captured"] == 40
    converted = [r for r in recs if r["cuda_done_ns"]]
    assert len(converted) == data["cuda"]["frames"] >= 30
    for r in converted:
        assert r["dequeued_ns"] <= r["made_ns"] <= r["cuda_submitted_ns"] <= r["cuda_done_ns"], r
        assert r["made_buffer"] is not None


def test_doctor_names_the_engine(cp):
    from sits import doctor
    assert doctor.decode(gpu=True)["jpeg_gpu"] == {"ok": True, "on": "hardware"}


def test_a_camera_of_only_frames_cut_short_ends_with_one_line(cp, capsys, monkeypatch):
    from sits.cli.app import main
    from sits.pipeline import synthetic
    cut = frames_of("422", 1)[0]
    cut = cut[:len(cut) // 2]

    def fill(index, pixels):
        pixels[:len(cut)] = np.frombuffer(cut, np.uint8)
        return len(cut)
    monkeypatch.setattr(synthetic, "jpeg_fill", lambda size: fill)   # every frame of the camera: cut short
    code = main(["capture", "--device", "synthetic", "--format", "MJPG", "--size", "640x368", "--fps", "120",
                 "--frames", "300", "--to-cuda", "96x64"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1, err
    assert "could be made by the decode stage" in err and "cut short" in err
