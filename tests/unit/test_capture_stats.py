from sits.v4l2.capture import CaptureStats


def test_add_sums_every_counter_and_leaves_the_other_alone():
    a = CaptureStats(dequeued=5, buffer_errors=1, requeue_errors=2)
    b = CaptureStats(dequeued=3, buffer_errors=4, setup_retries=1, stream_restarts=2)
    assert CaptureStats().add(a).add(b) == CaptureStats(dequeued=8, buffer_errors=5, requeue_errors=2,
                                                        setup_retries=1, stream_restarts=2)
    assert b == CaptureStats(dequeued=3, buffer_errors=4, setup_retries=1, stream_restarts=2)
