"""A release must not wait for a next frame that may never come: with fewer
than two buffers left with the driver, the CUDA sink's C half arms a
deadline of the queue's loop and looks at its stamps then, so a finished
conversion gives its buffer back with no new frame."""
import time

from tests.unit.queue_steps import Steps


def test_a_finished_conversion_goes_back_without_a_next_frame():
    steps = Steps(nbufs=2, cuda=True)
    try:
        q, L = steps.q, steps.c_queue
        steps.tick()                                   # buffer 0 launched: one left with the driver
        assert steps.launched == [0] and q.with_driver() == 1
        assert q.next_deadline() is not None           # armed: nothing else would look
        index = steps.launched.pop(0)
        steps._stamps[2 * index], steps._stamps[2 * index + 1] = 1000, 1500   # the GPU is done
        time.sleep(0.005)
        assert not L.queued[index]
        q.deadlines()                                  # the loop's timeout, no frame
        assert L.queued[index] and q.next_deadline() is None
    finally:
        steps.close()


def test_with_buffers_to_spare_no_deadline_is_armed():
    steps = Steps(nbufs=4, cuda=True)
    try:
        steps.tick()
        assert steps.q.with_driver() == 3 and steps.q.next_deadline() is None   # the next frame looks
    finally:
        steps.close()
