"""Probes on the real kernel against ground truth (tests/bpf/ground_truth.py)."""
import json
import os
import shutil
import statistics
import subprocess
import sys

import pytest

from sits.ebpf.points import POINT_BY_NAME
from sits.ebpf.probes import Filters, ProbeSession

pytestmark = pytest.mark.bpf
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
READ = POINT_BY_NAME["sys_read"].id


def run_helper(session, *args):
    """Start a ground-truth helper, track it, let it go, return its report."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.bpf.ground_truth", *args], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    session.track(proc.pid)
    out, _ = proc.communicate("go\n", timeout=60)
    assert proc.returncode == 0
    return json.loads(out)


def rows_for(rows, pid, probe):
    pid_probe = POINT_BY_NAME[probe].id
    return {k.key: h for k, h in rows.items() if k.pid == pid and k.probe == pid_probe}


@pytest.fixture
def syscalls():
    with ProbeSession(("syscalls", "ioctl"), filters=Filters(pids=(), follow=True)) as s:
        yield s


def test_blocked_pipe_reads_count_and_p50_match_user_space(syscalls):
    schedule = [4 + i for i in range(21)]  # 4..24 ms
    report = run_helper(syscalls, "pipe", ",".join(map(str, schedule)))
    rows, _ = syscalls.collect()
    reads = rows_for(rows, report["pid"], "sys_read")
    h = reads[report["fd"]]
    assert h.count == len(schedule)
    user_p50 = statistics.median(report["latency_ns"])
    assert h.quantile(0.5) == pytest.approx(user_p50, rel=0.04)
    assert h.max_ns <= max(report["latency_ns"])
    assert h.sum_ns == pytest.approx(sum(report["latency_ns"]), rel=0.02)
    # the writer (a child, followed) wrote exactly once per scheduled wait
    writes = rows_for(rows, report["writer"], "sys_write")
    assert sum(x.count for x in writes.values()) == len(schedule)


def test_ioctl_loop_counts_exact_and_names_decoded(syscalls):
    names = ["VIDIOC_QUERYCAP", "DRM_IOCTL_MODE_ATOMIC", "DMA_BUF_IOCTL_SYNC", "SYNC_IOC_MERGE"]
    report = run_helper(syscalls, "ioctl", "1000", *names)
    rows, _ = syscalls.collect()
    from sits._kernel import ioctl_number
    from sits.ebpf.ioctl_names import ioctl_name
    ioctls = rows_for(rows, report["pid"], "sys_ioctl")
    for name in names:
        h = ioctls[ioctl_number(name)]
        assert h.count == 1000, name
        assert ioctl_name(ioctl_number(name)) == name
    assert syscalls.drops() == dict.fromkeys(syscalls.drops(), 0)


def test_swapped_intervals_lose_nothing():
    """Reads that land while the histograms are being swapped are each
    counted exactly once over the intervals."""
    n = 200000
    code = ("import os\nfd = os.open('/dev/zero', os.O_RDONLY)\nos.dup2(fd, 100)\n"
            f"for _ in range({n}): os.read(100, 1)\n")
    with ProbeSession(("syscalls",), filters=Filters(follow=True)) as s:
        pid = s.spawn([sys.executable, "-c", code])
        total, swaps, done = 0, 0, False
        while not done:
            done = os.waitpid(pid, os.WNOHANG)[0] != 0
            rows, _ = s.collect()
            swaps += 1
            total += sum(h.count for k, h in rows.items() if k.pid == pid and k.probe == READ and k.key == 100)
        assert total == n
        assert swaps > 2


def test_only_tracked_processes_are_seen(syscalls):
    subprocess.run(["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=100"], capture_output=True)
    rows, _ = syscalls.collect()
    assert not rows


def test_comm_filter():
    with ProbeSession(("syscalls",), filters=Filters(comm="dd")) as s:
        subprocess.run(["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=321"], capture_output=True)
        subprocess.run(["cat", "/dev/null"], capture_output=True)
        rows, _ = s.collect()
        comms = s.comms({k.pid for k in rows})
    assert set(comms.values()) == {"dd"}
    assert sum(h.count for k, h in rows.items() if k.probe == READ and k.key == 0) == 321


@pytest.mark.skipif(not shutil.which("ffmpeg"), reason="ffmpeg not installed")
def test_avcodec_uprobes_count_frames_of_a_real_decode(tmp_path):
    from sits.ebpf.system import find_avcodec
    if find_avcodec() is None:
        pytest.skip("libavcodec not found")
    clip = tmp_path / "clip.mp4"
    enc = subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25",
                          "-frames:v", "30", "-c:v", "libx264", "-pix_fmt", "yuv420p", str(clip)],
                         capture_output=True, text=True)
    assert enc.returncode == 0, enc.stderr
    with ProbeSession(("avcodec",), filters=Filters(follow=True)) as s:
        assert {"sits_av_enter", "sits_av_exit"} <= set(s.attached), s.skipped
        pid = s.spawn(["ffmpeg", "-nostdin", "-v", "error", "-threads", "1", "-i", str(clip),
                       "-f", "null", "-"])
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        rows, _ = s.collect()
    frames = {k.key: h.count for k, h in rows.items() if k.pid == pid and k.probe == POINT_BY_NAME["avcodec_receive_frame"].id}
    packets = {k.key: h.count for k, h in rows.items() if k.pid == pid and k.probe == POINT_BY_NAME["avcodec_send_packet"].id}
    encoded = {k.key: h.count for k, h in rows.items() if k.pid == pid and k.probe == POINT_BY_NAME["avcodec_receive_packet"].id}
    assert frames.get(0) == 30, frames
    # one packet per frame, plus the NULL (flush) packets ffmpeg sends at EOF
    assert packets.get(0, 0) >= 30, packets
    assert encoded.get(0) == 30, encoded  # -f null re-encodes each frame: one packet out each
