from sits.v4l2.capture import CaptureStats


def test_add_sums_every_counter_and_leaves_the_other_alone():
    a = CaptureStats(dequeue_errors=5, setup_retries=2)
    b = CaptureStats(dequeue_errors=3, setup_retries=1, stream_restarts=2)
    assert CaptureStats().add(a).add(b) == CaptureStats(dequeue_errors=8, setup_retries=3, stream_restarts=2)
    assert b == CaptureStats(dequeue_errors=3, setup_retries=1, stream_restarts=2)
