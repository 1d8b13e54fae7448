import pytest

from sits.ebpf.export import classic_buckets, native, parse_listen
from sits.ebpf.histogram import Histogram
from sits.ebpf.histogram import RowKey
from sits.ebpf.points import POINT_BY_NAME
from sits.ebpf.report import Aggregate, hot_spots, key_label, parse_thresholds
from sits.errors import UsageError


def rk(probe, key=0, pid=1):
    return RowKey(pid, 0, POINT_BY_NAME[probe].id, key)


def test_decode_rows_over_12ms_p95_are_hot_and_others_not():
    agg = Aggregate()
    agg.add({rk("avcodec_send_packet"): Histogram.from_values([13_000_000] * 20),
             rk("avcodec_receive_frame"): Histogram.from_values([11_000_000] * 20),
             rk("sys_read", 3): Histogram.from_values([50_000_000] * 20)}, 1.0)
    rows = {r["probe"]: r for r in agg.rows()}
    assert rows["avcodec_send_packet"]["hot"] and "decode 12 ms" in rows["avcodec_send_packet"]["hot_reason"]
    assert not rows["avcodec_receive_frame"]["hot"]
    assert not rows["sys_read"]["hot"]  # no threshold for plain reads unless asked


def test_dqbuf_ioctl_is_a_buffer_wait():
    from sits._kernel import ioctl_number
    agg = Aggregate()
    agg.add({rk("sys_ioctl", ioctl_number("VIDIOC_DQBUF")): Histogram.from_values([9_000_000] * 10)}, 1.0)
    (row,) = agg.rows()
    assert row["key"] == "VIDIOC_DQBUF" and row["hot"]


def test_thresholds_parse_and_reject_unknown_names():
    t = parse_thresholds(["decode=20", "sys_read=1.5"])
    assert t == {"decode": 20.0, "buffer_wait": 8.0, "sys_read": 1.5}
    with pytest.raises(UsageError):
        parse_thresholds(["nosuch=1"])
    with pytest.raises(UsageError):
        parse_thresholds(["decode"])


def test_intervals_accumulate_into_the_run():
    agg = Aggregate()
    agg.add({rk("sys_write", 1): Histogram.from_values([1000] * 3)}, 1.0)
    agg.add({rk("sys_write", 1): Histogram.from_values([3000] * 2)}, 1.0)
    (total,) = agg.rows()
    (last,) = agg.rows(interval=True)
    assert total["count"] == 5 and last["count"] == 2
    assert total["max_us"] == 3.0


def test_hot_spot_lists():
    rows = [{"pid": i, "comm": "x", "probe": "sys_read", "key": "", "count": 1, "p95_us": i,
             "p99_us": 10 - i, "total_ms": i, "hot": i == 3, "hot_reason": "r"} for i in range(10)]
    hs = hot_spots(rows, 3)
    assert [r["pid"] for r in hs["by_p95"]] == [9, 8, 7]
    assert [r["pid"] for r in hs["by_p99"]] == [0, 1, 2]
    assert [r["pid"] for r in hs["flagged"]] == [3]


def test_key_labels():
    assert key_label(POINT_BY_NAME["avcodec_receive_frame"].id, (1 << 64) - 11, 1) == "EAGAIN"
    assert key_label(POINT_BY_NAME["avcodec_receive_frame"].id, 0, 1) == "ok"
    assert key_label(POINT_BY_NAME["fence_signal"].id, 7, 1, {7: "i915:ring0"}) == "i915:ring0"
    assert key_label(POINT_BY_NAME["v4l2_done_dqbuf"].id, 1, 1) == "VIDEO_CAPTURE"


def test_classic_buckets_are_cumulative_and_exact_at_powers_of_two():
    h = Histogram.from_values([1000, 1024, 1025, 5000, 10**9])
    b = dict(classic_buckets(h))
    # a bound 2^e ns counts the values below it (slots are [lo, hi))
    assert b[repr(1024 / 1e9)] == 1
    assert b[repr(2048 / 1e9)] == 3
    assert b[repr(8192 / 1e9)] == 4
    assert b["+Inf"] == 5
    counts = [c for _, c in classic_buckets(h)]
    assert counts == sorted(counts)


def test_native_histogram_counts_add_up():
    h = Histogram.from_values([0, 1500, 1600, 2_000_000, 2_100_000, 9_000_000])
    nh = native(h)
    assert nh.schema == 3 and nh.count_value == 6 and nh.zero_count == 1
    counts, c = [], 0
    for d in nh.pos_deltas:
        c += d
        counts.append(c)
    assert sum(counts) == 5
    assert sum(span.length for span in nh.pos_spans) == len(nh.pos_deltas)


def test_parse_listen():
    assert parse_listen("127.0.0.1:9435") == ("127.0.0.1", 9435)
    assert parse_listen(":9") == ("0.0.0.0", 9)
    assert parse_listen("[::1]:80") == ("::1", 80)
    with pytest.raises(UsageError):
        parse_listen("nope")
