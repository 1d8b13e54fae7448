// The GPU's clock at the two ends of a conversion graph, written to
// host-mapped memory that the frame queue's C reads at its next wake-up
// (sits/pipeline/frame_queue.c): a frame's completion and its GPU time
// with no driver call on the host (an event record, query or elapsed time
// costs tens of µs under a sandboxed kernel). One stamp a capture buffer:
// {begin, end}, %globaltimer nanoseconds; the host zeroes `end` before
// each launch, so a non-zero `end` is this launch's.

extern "C" __global__ void sits_stamp_begin(unsigned long long *stamp)
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	stamp[0] = t;
}

// Last in the graph: every node before it has completed. `begin` is
// written again, before the fence, so that a host that sees `end` sees it.
extern "C" __global__ void sits_stamp_end(unsigned long long *stamp)
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	volatile unsigned long long *s = stamp;
	s[0] = s[0];
	__threadfence_system();
	s[1] = t;
}
