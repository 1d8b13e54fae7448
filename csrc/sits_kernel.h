/* The C side of sits' kernel binding (cffi API mode).
 *
 * Everything here comes from the system's kernel UAPI headers and libdrm, so
 * struct layouts and ioctl numbers are whatever the compiler says they are on
 * this architecture (x86_64, aarch64). Nothing is hand-encoded. Only
 * system headers and csrc's own: the binding's builder (build_kernel.py)
 * puts the product's headers after this one.
 */
#ifndef SITS_KERNEL_H
#define SITS_KERNEL_H

#include <sys/types.h>
#include <sys/time.h>      /* struct timeval, used by linux/videodev2.h */
#include <sys/ioctl.h>
#include <fcntl.h>
#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sys/timerfd.h>
#include <linux/types.h>
#include <linux/videodev2.h>
#include <linux/dma-buf.h>
#include <linux/dma-heap.h>
#include <linux/udmabuf.h>
#include <linux/sync_file.h>
#include <xf86drm.h>
#include <xf86drmMode.h>
#include <drm_fourcc.h>

/* One entry point for every ioctl: a real function (not the variadic libc
 * one), so cffi can call it with the GIL released and read errno after it. */
static inline int sits_ioctl(int fd, unsigned long request, void *arg)
{
	return ioctl(fd, request, arg);
}

/* A host function for cuLaunchHostFunc. CUDA runs it on a driver thread
 * once the work before it on the stream is done; it writes one completion
 * record, {id, CLOCK_MONOTONIC ns}, to the pipe whose write end is the low
 * 32 bits of `arg` (`id` is the high 32). Being C, it wakes the poll loop
 * without taking the GIL (a Python host function would wait for the loop
 * thread to let go of it), and the record says when the work was done,
 * however late the loop reads it. 16 bytes: one atomic pipe write. */
struct sits_completion { uint64_t id; uint64_t done_ns; };

static inline void sits_completion_host_fn(void *arg)
{
	uintptr_t v = (uintptr_t)arg;
	struct sits_completion rec;
	struct timespec ts;
	ssize_t n;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	rec.id = v >> 32;
	rec.done_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	do
		n = write((int)(v & 0xffffffffu), &rec, sizeof rec);
	while (n < 0 && errno == EINTR);
}

/* Names for unions the UAPI headers leave anonymous (see kernel.cdef). */
typedef __typeof__(((struct v4l2_plane *)0)->m) sits_v4l2_plane_m;
typedef __typeof__(((struct v4l2_buffer *)0)->m) sits_v4l2_buffer_m;
typedef __typeof__(((struct v4l2_format *)0)->fmt) sits_v4l2_format_fmt;
typedef __typeof__(((struct v4l2_streamparm *)0)->parm) sits_v4l2_streamparm_parm;

#include "sits_ioctls.h"

/* V4L2's colorimetry defaults (videodev2.h's macros): the encoding and
 * range a driver means when its format says "default" */
static inline __u32 sits_v4l2_ycbcr_enc_default(__u32 colorspace)
{
	return V4L2_MAP_YCBCR_ENC_DEFAULT(colorspace);
}

static inline __u32 sits_v4l2_quantization_default(int is_rgb, __u32 colorspace, __u32 ycbcr_enc)
{
	return V4L2_MAP_QUANTIZATION_DEFAULT(is_rgb, colorspace, ycbcr_enc);
}

/* the pix format's ycbcr_enc, a member of an unnamed union */
static inline __u32 sits_v4l2_pix_ycbcr_enc(const struct v4l2_pix_format *p)
{
	return p->ycbcr_enc;
}

#endif
