"""A frame queue stage driven one event at a time: the timer source stands
in for a camera whose buffers hold the given frames (bytesused: each
frame's length, unless told), the stage made by `maker(queue, inputs,
outputs)` works on them, and a Python sink of the stage's frames takes what
it makes."""
import select

import numpy as np

from sits._kernel import lib
from sits.pipeline.frame_queue import NONE, FrameQueue
from tests.unit.queue_steps import Ticks


class StageChain:
    def __init__(self, maker, frames: list[bytes], room: int, output_shape: tuple[int, int],
                 bytesused: dict[int, int] | None = None, outputs: int = 2):
        self.epoll = select.epoll()
        self.q = FrameQueue(self.epoll.fileno())
        self.inputs = {}
        for i, data in enumerate(frames):
            buf = np.zeros(room, np.uint8)
            buf[:len(data)] = np.frombuffer(data, np.uint8)
            self.inputs[i] = buf
        used = {i: len(data) for i, data in enumerate(frames)}
        used.update(bytesused or {})
        self.ticks = Ticks(self.q, len(frames), used)
        self.outputs = [np.zeros(output_shape, np.uint8) for _ in range(outputs)]
        self.stage = maker(self.q, self.inputs, self.outputs)
        self.sink = self.q.add_sink(None, None, "latest", 1, takes=self.stage.source)

    def frame(self) -> None:
        self.ticks.tick()
        assert self.q.capture() == 0

    def made(self) -> int:
        """The worker's answer, taken by the stage's source: the buffer the
        Python sink was handed (NONE: nothing made)."""
        r, _, _ = select.select([self.stage.fileno()], [], [], 10)
        assert r, "the worker answered nothing in 10 s"
        L = self.q.c_queue
        self.q.capture(self.stage.source)
        if L.delivered.index == NONE:
            lib.sits_queue_pump(L, self.sink)
        index = L.delivered.index
        L.delivered.index = NONE
        if index != NONE:
            lib.sits_queue_release(L, self.sink, index)
        return index

    def output(self, index: int) -> np.ndarray:
        first = self.q.c_queue.sources[self.stage.source].first
        return self.outputs[index - first]

    def close(self):
        self.stage.close()
        self.ticks.close()
        self.epoll.close()
