"""The journey's kernel side as `sits probe frames` now uses it (vivid +
vkms): statistics kept by the programs, swapped per interval, equal to
what the records say; the kernel functions hooked by BPF trampolines, and
by kprobes where asked (the fallback where the kernel cannot attach a
trampoline); no records at all when no output needs them."""
import json
import os
import selectors
import subprocess
import sys

import pytest

from sits.ebpf.points import PROGRAMS
from sits.ebpf.probes import Filters, ProbeSession
from sits.ebpf.ringbuf import FRAME_DTYPE, RingConsumer
from sits.journey import kernel as kj
from sits.journey import record
from sits.journey.stats import Journey

pytestmark = pytest.mark.vm

SITS = [sys.executable, "-m", "sits.cli.app"]
FRAMES = 150
#: collect the in-kernel statistics each time this many more records arrived
RECORDS_AN_INTERVAL = 10
TWINNED = {p.name: p.kprobes for p in PROGRAMS if p.obj == kj.OBJECT and p.kprobes}
#: the kernel functions journey.bpf.c hooks with trampolines or kprobes
HOOKED = ("drm_mode_atomic_ioctl", "drm_mode_setplane", "drm_mode_page_flip_ioctl", "drm_mode_setcrtc",
          "drm_atomic_set_fb_for_plane", "vb2_core_expbuf")


def capture(tmp_path, vivid_path, vkms_path, frames=FRAMES, *extra):
    """`sits capture --to-kms` of exported (MMAP) buffers, through sh; its
    summary's path."""
    summary = tmp_path / "summary.json"
    cmd = ["sh", "-c", " ".join([*SITS, "capture", "--to-kms", "--device", vivid_path, "--card", vkms_path,
                                 "--size", "320x180", "--frames", str(frames), "--memory", "mmap",
                                 "--format", "XR24", "--json", *extra]) + f" > {summary}"]
    return cmd, summary


def kprobed_functions() -> set[str]:
    """The functions the kernel has kprobes (or kretprobes) on."""
    with open("/sys/kernel/debug/kprobes/list") as f:
        return {line.split()[2].partition("+")[0] for line in f if len(line.split()) > 2}


@pytest.mark.parametrize("trampolines", [True, False], ids=["trampolines", "kprobes"])
def test_in_kernel_statistics_are_the_records_statistics(trampolines, tmp_path, vivid_path, vkms_path):
    journey = Journey()
    session = ProbeSession(("frames",), filters=Filters(follow=True), trampolines=trampolines,
                           configure=kj.configure(journey, records=True)).start()
    records, parts = [], []
    try:
        reader = kj.KernelJourney(session)
        # how the kernel functions are hooked, as the kernel says it
        links = {link.what: link.info()["link_type"] for link in session.objects[kj.OBJECT].links}
        kprobed = kprobed_functions()
        if trampolines:
            assert {links[name] for name in TWINNED} == {"tracing"}, links
            assert not kprobed & set(HOOKED), kprobed
            assert session.kprobed == {} and kj.hooks(session)["kind"] == "trampoline"
        else:
            assert "tracing" not in {links[k] for kps in TWINNED.values() for k in kps}, links
            assert set(HOOKED) <= kprobed, kprobed
            assert kj.hooks(session)["kind"] == "kprobe"
        cmd, summary = capture(tmp_path, vivid_path, vkms_path)
        child = session.spawn(cmd)
        pidfd = os.pidfd_open(child)
        since = 0
        with selectors.DefaultSelector() as sel:
            sel.register(pidfd, selectors.EVENT_READ)
            while not sel.select(0.05):   # (a pace for draining, not a decision)
                new = reader.drain()
                records += new
                since += len(new)
                if since >= RECORDS_AN_INTERVAL:
                    parts.append(reader.collect())
                    since = 0
        os.close(pidfd)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        reader.detach()
        parts.append(reader.collect())
        records += reader.drain()
        in_flight = reader.flush()
        reader.close()
    finally:
        session.close()
    s = json.loads(summary.read_text())
    assert s["frames_captured"] == FRAMES

    # the statistics were swapped while frames went by, and lost or doubled none
    assert len(parts) >= 3 and parts[0].count >= RECORDS_AN_INTERVAL, [p.count for p in parts]
    kernel = Journey()
    for p in parts:
        kernel.merge(p)
    assert kernel.count == len(records)
    from_records = Journey()
    for rec in records + in_flight:
        from_records.add(rec)
    for rec in in_flight:
        kernel.add(rec)
    want = from_records.summary()["frames"]
    assert kernel.summary()["frames"] == want
    # ... which are sits' own: every frame, joined to the display without a copy
    assert want["count"] == FRAMES
    assert want["reached"]["scanout"] == s["frames_displayed"] > 0
    assert want["drops"]["not_shown"] == s["drops"]["display"]
    assert not any(r["copied"] for r in records + in_flight)


def test_without_a_stream_the_report_needs_no_records(tmp_path, vivid_path, vkms_path):
    timeline = tmp_path / "timeline.ndjson"
    cmd, summary = capture(tmp_path, vivid_path, vkms_path, FRAMES, "--timeline", str(timeline))
    report = tmp_path / "report.json"
    r = subprocess.run([*SITS, "probe", "frames", "--json", "-o", str(report), "--", *cmd],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr
    rep, s = json.loads(report.read_text()), json.loads(summary.read_text())
    assert rep["hooks"] == {"kind": "trampoline", "why": None}
    assert rep["untimed"] == {} and not any(rep["frames"]["lost"].values())
    f = rep["frames"]
    assert f["count"] == FRAMES and f["reached"]["dequeued"] == FRAMES
    assert f["reached"]["scanout"] == s["frames_displayed"] > 0
    assert f["drops"]["not_shown"] == s["drops"]["display"]
    assert f["stages"]["scanout"]["count"] > 0
    # glass to glass counts the frames shown at or after their V4L2
    # timestamp: vivid's clock can run ahead of the guest's under a loaded
    # TCG host (all 150 shown frames once), and then there are none
    own = record.read(str(timeline))
    seen = any(r["scanout_ns"] is not None and r["scanout_ns"] >= r["captured_ns"] for r in own)
    assert (f["glass_to_glass_ms"]["p50"] is not None) == seen, (f["glass_to_glass_ms"], seen)


def test_records_are_not_streamed_unless_asked_for(tmp_path, vivid_path, vkms_path):
    journey = Journey()
    session = ProbeSession(("frames",), filters=Filters(follow=True),
                           configure=kj.configure(journey, records=False)).start()
    try:
        reader = kj.KernelJourney(session)
        ring = RingConsumer(session.objects[kj.OBJECT].map_fd("frames_out"), kj.RING_BYTES, FRAME_DTYPE)
        cmd, _ = capture(tmp_path, vivid_path, vkms_path, frames=60)
        child = session.spawn(cmd)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        reader.detach()
        journey.merge(reader.collect())
        in_flight = reader.flush()
        assert journey.count > 0 and journey.count + len(in_flight) == 60
        assert len(ring.drain()) == 0 and reader.drain() == []
        ring.close()
        reader.close()
    finally:
        session.close()
