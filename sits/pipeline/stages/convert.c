/* The CPU conversion stage's work: packed 4:2:2 YUV (YUYV, UYVY) into
 * XRGB8888 for a display whose planes cannot show the camera's format.
 * BT.601 limited range in 8.8 fixed point, the integer arithmetic of
 * sits/pipeline/convert.py's numpy version (the freeze frame's and the
 * tests' oracle), so that both give the same bytes. */
#include <errno.h>
#include <stdint.h>

#include "sits_kernel.h"
#include "frame_queue.h"
#include "stage.h"

/* cdef-begin */
enum { SITS_CONVERT_YUYV = 1, SITS_CONVERT_UYVY = 2 };

struct sits_convert {
	/* set by Python */
	int32_t code;                   /* SITS_CONVERT_: what it converts from */
	uint32_t width, height;
	uint32_t in_stride, out_pitch;  /* bytes a row */
};

const struct sits_stage_work *sits_convert_work(void);
/* cdef-end */

/* (c + k * u) >> 8 spans -227 .. 534 for 8-bit inputs: a table clips it
 * without a branch a channel */
enum { CLIP_LOW = 256, CLIP_SIZE = 1024 };
static uint8_t clip_table[CLIP_SIZE];

static void make_clip_table(void)
{
	for (int i = 0; i < CLIP_SIZE; i++) {
		int v = i - CLIP_LOW;
		clip_table[i] = v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
	}
}

static inline void pixel(uint8_t *o, int32_t y, int32_t bu, int32_t guv, int32_t rv)
{
	const uint8_t *clip = clip_table + CLIP_LOW;
	int32_t c = (y - 16) * 298 + 128;
	o[0] = clip[(c + bu) >> 8];
	o[1] = clip[(c + guv) >> 8];
	o[2] = clip[(c + rv) >> 8];
	o[3] = 255;
}

static int convert(struct sits_stage *S, int32_t in, uint32_t bytesused, int32_t out)
{
	const struct sits_convert *C = S->work_state;
	if (bytesused && bytesused < C->in_stride * (C->height - 1) + C->width * 2)
		return EMSGSIZE;    /* a short frame: not shown as a good one */
	/* YUYV: Y0 U Y1 V; UYVY: U Y0 V Y1 */
	int y0 = C->code == SITS_CONVERT_YUYV ? 0 : 1, u0 = y0 ^ 1;
	for (uint32_t row = 0; row < C->height; row++) {
		const uint8_t *p = S->in_ptr[in] + (size_t)row * C->in_stride;
		uint8_t *o = S->out_ptr[out] + (size_t)row * C->out_pitch;
		for (uint32_t x = 0; x + 1 < C->width; x += 2, p += 4, o += 8) {
			int32_t u = p[u0] - 128, v = p[u0 + 2] - 128;
			int32_t bu = 516 * u, guv = -100 * u - 208 * v, rv = 409 * v;
			pixel(o, p[y0], bu, guv, rv);
			pixel(o + 4, p[y0 + 2], bu, guv, rv);
		}
	}
	return 0;
}

static const struct sits_stage_work work = {.work = convert};

const struct sits_stage_work *sits_convert_work(void)
{
	if (!clip_table[CLIP_SIZE - 1])
		make_clip_table();     /* Python's thread, before any worker runs */
	return &work;
}
