/* The frame queue: buffers and who holds them, in C. A source fills
 * buffers of its own (a V4L2 device, a timer source, a stage's output
 * pool); each of its frames is offered to every sink that takes that
 * source's frames, through the sink's port (a short queue with a policy for
 * the frames that come while the sink cannot take them); a sink that takes
 * a frame holds its buffer until it lets go (sits_let_go), and the buffer
 * goes back to its source when its last holder has let go. The queue never
 * names a sink: a sink is a set of functions (struct sits_sink_ops, its C
 * half, in sits/pipeline/sinks/) and a state of its own, or no functions at
 * all (Python's: its frames are handed to Python, SITS_Q_DELIVER).
 *
 * The Python pipeline (sits/pipeline/pipeline.py) drives it one event at a
 * time, or lets sits_queue_run() take the steady state on the pipeline's
 * own epoll fd; both use the same functions.
 *
 * The part between the cdef markers is also the cffi declaration of this
 * interface (csrc/build_kernel.py reads it): declared once, no preprocessor
 * lines inside.
 */
#ifndef SITS_FRAME_QUEUE_H
#define SITS_FRAME_QUEUE_H

#include <stdint.h>
#include <linux/types.h>
#include "sits_frame.h"     /* sits/include: a frame's record, the kernel journey's too */

/* cdef-begin */
enum {
	SITS_Q_MAX_BUFS = 32,
	SITS_Q_MAX_SINKS = 8,   /* a bit each in a buffer's holders */
	SITS_Q_MAX_SOURCES = 4, /* each with buffers of its own, numbered apart */
	SITS_Q_VALUES = 4,      /* values a frame carries from one holder to another */
	SITS_Q_PORT_DEPTH = 8,  /* the most frames a port keeps */
	SITS_Q_NONE = -1,       /* no buffer */
};

enum {
	SITS_Q_TIMEOUT = 0,     /* timeout_ms passed (step functions: nothing to report) */
	SITS_Q_WAKE = 1,        /* an fd that is not the queue's is ready (signal, uevent, consumer, fence), or EINTR */
	SITS_Q_FRAMES = 2,      /* frames_limit frames captured */
	SITS_Q_SINK = 3,        /* a sink's C half asks its Python half to act (`asking`: which sink) */
	SITS_Q_FULL = 5,        /* the timeline's array is full */
	SITS_Q_ERROR = 6,       /* err_op failed with err (on buffer err_index) */
	SITS_Q_DELIVER = 7,     /* a frame for a Python sink is in `delivered` */
	SITS_Q_BLOCKED = 8,     /* a blocking sink's port is full: the source is not dequeued */
};

/* What a port does with a frame that comes while its sink cannot take it
 * and `depth` frames already wait. */
enum {
	SITS_POLICY_LATEST = 0,         /* only the newest waits: every older one is dropped */
	SITS_POLICY_DROP_OLDEST = 1,    /* the oldest waiting is dropped */
	SITS_POLICY_DROP_NEWEST = 2,    /* the new frame is dropped */
	SITS_POLICY_BLOCK = 3,          /* the source is not dequeued until the sink takes one */
};

/* frames a timeline follows at once: every buffer's, and copies on screen */
enum { SITS_Q_OPEN_RECORDS = SITS_Q_MAX_BUFS + 8 };

enum { SITS_OP_DQBUF = 1, SITS_OP_QBUF = 2, SITS_OP_ATOMIC = 3, SITS_OP_READ = 4, SITS_OP_EPOLL = 5,
       SITS_OP_CUDA = 6, SITS_OP_CHECK = 7, SITS_OP_STAGE = 8 };

/* What sits_queue_check() found wrong with a buffer (err, with SITS_OP_CHECK) */
enum {
	SITS_CHECK_DRIVER_AND_HELD = 1,     /* with the driver and held by a sink */
	SITS_CHECK_DRIVER_AND_RETRY = 2,    /* with the driver and waiting for a retried QBUF */
	SITS_CHECK_NOWHERE = 3,             /* streaming, yet with no one: lost */
	SITS_CHECK_PORT_UNHELD = 4,         /* waiting in a port without that sink's hold */
	SITS_CHECK_PORT_TWICE = 5,          /* twice in one port */
	SITS_CHECK_READ_UNHELD = 6,         /* a sink's C half reads it without its hold */
	SITS_CHECK_DELIVERED_UNHELD = 7,    /* handed to Python without the sink's hold */
};

/* A frame: its buffer and what travels with it through the sinks (and
 * through a stage, into the buffer it fills). (source, sequence) is its
 * identity. */
struct sits_q_frame {
	int32_t index;          /* its buffer, or SITS_Q_NONE */
	int32_t source;         /* the source whose frame it is (a stage's: the frame it came from's) */
	uint32_t sequence, bytesused;
	int64_t timestamp_ns;   /* the V4L2 buffer timestamp (CLOCK_MONOTONIC) */
	int64_t dequeued_ns;
	int64_t pts_ns;         /* a stream's presentation time (0: none, as for a camera's frames) */
	uint32_t record;        /* its open timeline record + 1 (0: none) */
	/* values one holder attaches for another (a frame's drawing for the
	 * display), by slot (FrameQueue.value_slot); 0 when captured */
	uint64_t values[SITS_Q_VALUES];
};

/* A latency histogram in sits_hist.h's slots: filled in C every frame, read
 * by Python when it reports (no Python a frame). */
struct sits_q_hist {
	int64_t count, sum_ns, max_ns;
	uint32_t *slots;        /* SITS_HIST_SLOTS counts, Python's array */
};

struct sits_queue;
struct sits_sink;
struct sits_q_source;

/* A sink's C half. Each returns 0 or a SITS_Q_ code for Python. */
struct sits_sink_ops {
	/* take what waits in the port that the sink can take now (sits_port_take) */
	int (*pump)(struct sits_queue *L, struct sits_sink *s);
	/* the sink's fd is readable */
	int (*on_fd)(struct sits_queue *L, struct sits_sink *s);
	/* the source woke: look at completions before its frame (NULL: none) */
	int (*on_wake)(struct sits_queue *L, struct sits_sink *s);
	/* whether its fd is worth a wake-up now (NULL: always while it has one) */
	int (*want_fd)(struct sits_queue *L, struct sits_sink *s);
	/* CLOCK_MONOTONIC passed its deadline_ns (which is then 0 until set again) */
	int (*on_deadline)(struct sits_queue *L, struct sits_sink *s);
	/* whether it still reads or shows buffer `index` (sits_queue_check: such
	 * a buffer must carry its hold; NULL: it keeps none beyond its port) */
	int (*reads)(struct sits_queue *L, struct sits_sink *s, int32_t index);
};

/* A source's C half (sits/pipeline/sources/, or a stage's): it fills its
 * buffers (the queue's `first` .. `first + nbufs - 1`), its fd readable
 * when one is filled. */
enum { SITS_GIVE_RETRY = 0, SITS_GIVE_QUEUED = 1 };
struct sits_source_ops {
	/* the next filled buffer into f: 1, none now 0, or -SITS_Q_ERROR (err set);
	 * each buffer it takes out of its own (a frame, or one it drops) it
	 * reports with sits_source_took() */
	int (*take)(struct sits_queue *L, struct sits_q_source *src, struct sits_q_frame *f);
	/* buffer `index` may be filled again: SITS_GIVE_QUEUED, SITS_GIVE_RETRY
	 * (refused for now: the queue gives it again before the next take), or
	 * -SITS_Q_ERROR (err set: the source is gone) */
	int (*give)(struct sits_queue *L, struct sits_q_source *src, int32_t index);
};

struct sits_q_source {
	/* set by Python */
	const struct sits_source_ops *ops;  /* its C half */
	void *state;                        /* ... and that half's own struct */
	int32_t id;
	int32_t fd;                 /* readable when a buffer is filled; -1: nothing to queue into (stopped, camera lost) */
	int32_t first, nbufs;       /* its buffers in the queue's numbering */
	int32_t counted;            /* its frames count towards frames_limit (a camera's; a stage's come from those) */
	/* state */
	int32_t streaming;          /* buffers are streaming into it (requeue_idle .. forget_queued) */
	int64_t captured;           /* frames taken from it */
	int64_t dequeued, buffer_errors, requeue_errors;   /* Python drains them */
	int64_t sequence_gaps;      /* sequence numbers it skipped (no buffer was queued) */
	int64_t unqueued_fills;     /* frames it put in buffers it did not have (dropped: a sink may read them) */
	int64_t gaps_recorded;      /* ... of which the timeline has told */
	uint32_t last_sequence;
	int32_t sequence_seen;      /* last_sequence is valid (0 after STREAMON: V4L2 starts again at 0) */
};

struct sits_sink {
	const struct sits_sink_ops *ops;   /* NULL: Python's (frames go to Python: SITS_Q_DELIVER) */
	void *state;                       /* the C half's own struct */
	int32_t id;                        /* its bit in a buffer's holders */
	int32_t offered;                   /* every frame of its sources is offered to it (0: it holds only what it is given) */
	uint32_t sources;                  /* the sources whose frames it takes: a bit a source id */
	int32_t ready;                     /* Python's: its Python half takes a frame now */
	int32_t policy, depth;             /* its port */
	int32_t port[SITS_Q_PORT_DEPTH];   /* buffers waiting for it, oldest first */
	int32_t port_n;
	int32_t fd, fd_watched;            /* its fd (-1: none), in the epoll set or not */
	int64_t deadline_ns;               /* on_deadline once CLOCK_MONOTONIC passes it (0: none) */
	int64_t taken, dropped;            /* frames it took; frames its port (or it) dropped */
};

struct sits_queue {
	/* set by Python */
	int32_t epfd;
	int64_t frames_limit;           /* run() stops at this many frames captured (0: none) */
	/* the sources, by id, and the buffers' numbering: each source's own run of it */
	struct sits_q_source sources[SITS_Q_MAX_SOURCES];
	int32_t nsources;
	uint32_t nbufs;                     /* buffers numbered so far */
	int8_t buffer_source[SITS_Q_MAX_BUFS];
	/* the sinks, by id */
	struct sits_sink sinks[SITS_Q_MAX_SINKS];
	int32_t nsinks;
	int32_t asking;             /* the sink of the last SITS_Q_SINK */
	/* the buffers */
	uint32_t holds[SITS_Q_MAX_BUFS];    /* its holders: a bit a sink id */
	struct sits_q_frame frames[SITS_Q_MAX_BUFS];    /* the frame in each buffer not with the driver */
	uint8_t queued[SITS_Q_MAX_BUFS];    /* with the source */
	uint8_t unqueued[SITS_Q_MAX_BUFS];  /* the source refused it: given again before the next take */
	struct sits_q_frame delivered;      /* a frame for a Python sink */
	int32_t delivered_sink;
	int64_t captured, first_frame_ns, last_frame_ns;    /* frames of the counted sources; when the first and last came */
	int64_t wakeups;            /* run()'s epoll_wait returns: the steady state's cost in wake-ups */
	int32_t err, err_op, err_index;
	int32_t err_source;         /* the source whose DQBUF or QBUF failed */
	/* every step ends with sits_queue_check() (the test tiers set it) */
	int32_t check;
	/* --timeline (sits/pipeline/timeline.py): a frame's record stays open
	 * while its buffer is out or it is on screen, then moves to Python's
	 * array, drained after each call. Off, each stage costs one test. */
	int32_t timeline;
	struct sits_frame open_records[SITS_Q_OPEN_RECORDS];
	uint32_t record_holds[SITS_Q_OPEN_RECORDS]; /* what may still add a stage to each (its buffer, the screen); 0: free */
	uint8_t buffer_record[SITS_Q_MAX_BUFS];     /* the open record of the frame in each buffer + 1 */
	struct sits_frame *records;
	int32_t records_cap, records_n;
	int64_t records_lost;
};

/* Python's calls */
int sits_queue_add_sink(struct sits_queue *L, const struct sits_sink_ops *ops, void *state,
			int32_t policy, int32_t depth, int32_t offered, uint32_t sources);
int sits_queue_add_source(struct sits_queue *L, int32_t nbufs, int32_t counted);
int sits_queue_run(struct sits_queue *L, int timeout_ms);
int sits_queue_check(struct sits_queue *L);
void sits_queue_forget_queued(struct sits_queue *L, int32_t source);
int sits_queue_capture(struct sits_queue *L, int32_t source);
int sits_queue_pump(struct sits_queue *L, int32_t sink);
int sits_queue_release(struct sits_queue *L, int32_t sink, int32_t index);
int sits_queue_hold(struct sits_queue *L, int32_t sink, int32_t index);
int sits_queue_release_all(struct sits_queue *L, int32_t sink);
int sits_queue_requeue_idle(struct sits_queue *L, int32_t source);
int64_t sits_queue_next_deadline(struct sits_queue *L);
int sits_queue_deadlines(struct sits_queue *L);
int sits_queue_held(struct sits_queue *L, int32_t index);
int sits_queue_blocked(struct sits_queue *L, int32_t source);
void sits_queue_timeline_device_gone(struct sits_queue *L, int32_t source);
void sits_queue_timeline_end(struct sits_queue *L);
void sits_q_hist_add(struct sits_q_hist *h, int64_t ns);

/* the sinks' C halves' calls */
int32_t sits_port_take(struct sits_queue *L, struct sits_sink *s);
/* the frame at port position `at` leaves the port, neither taken nor dropped */
int32_t sits_port_remove(struct sits_sink *s, int32_t at);
int sits_port_drop(struct sits_queue *L, struct sits_sink *s);
int sits_let_go(struct sits_queue *L, struct sits_sink *s, int32_t index);
int sits_drop(struct sits_queue *L, struct sits_sink *s, int32_t index);
int sits_queue_fail(struct sits_queue *L, int op, int index);
int sits_queue_with_driver(struct sits_queue *L, int32_t source);
int sits_queue_short(struct sits_queue *L, const struct sits_sink *s);
int64_t sits_queue_captured(struct sits_queue *L);
const struct sits_q_frame *sits_queue_frame(struct sits_queue *L, int32_t index);
int sits_queue_made(struct sits_queue *L, int32_t index);   /* its frame was made by a stage (a copy) */
void sits_queue_timeline_cuda(struct sits_queue *L, int32_t index, int32_t done, int64_t ns);
void sits_timeline_committed(struct sits_queue *L, uint32_t record, int64_t started_ns, int64_t late_ns, int copied);
void sits_timeline_flip(struct sits_queue *L, uint32_t shown, uint32_t replaced, int64_t ns, uint32_t seq);

/* the timeline's calls (queue_timeline.c) */
void sits_timeline_open(struct sits_queue *L, struct sits_q_frame *f);
void sits_timeline_requeued(struct sits_queue *L, int32_t index);
void sits_timeline_staged(struct sits_queue *L, int32_t from, struct sits_q_frame *f);

/* the sources' C halves' calls */
void sits_source_took(struct sits_queue *L, struct sits_q_source *src, int32_t index, uint32_t sequence);
int sits_give_back(struct sits_queue *L, int32_t index);
/* cdef-end */

int64_t sits_now_ns(void);

#endif
