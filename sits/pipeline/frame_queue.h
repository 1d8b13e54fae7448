/* The frame queue of a V4L2 capture pipeline, in C: which buffer is where
 * (with the driver, next for the display, committed, on screen, leaving the
 * screen, held by Python's consumers) and every transition between those
 * places. The Python pipeline (sits/pipeline/pipeline.py) drives it one event
 * at a time, or lets sits_queue_run() take the steady state on the
 * pipeline's own epoll fd; both use the same functions, so each rule of a
 * frame's life is written once, here.
 *
 * The part between the cdef markers is also the cffi declaration of this
 * interface (csrc/build_kernel.py reads it): declared once, no preprocessor
 * lines inside.
 */
#ifndef SITS_FRAME_QUEUE_H
#define SITS_FRAME_QUEUE_H

#include <stdint.h>

/* cdef-begin */
enum {
	SITS_Q_MAX_BUFS = 32,
	SITS_Q_NONE = -1,       /* no frame in this slot */
	SITS_Q_OWN = -2,        /* a commit of a buffer of Python's own (freeze frame) */
	SITS_Q_COPY = -3,       /* a commit of a CPU copy of a captured frame (conversion path) */
};

enum {
	SITS_Q_TIMEOUT = 0,     /* timeout_ms passed (step functions: nothing to report) */
	SITS_Q_WAKE = 1,        /* an fd that is not the queue's is ready (signal, uevent, consumer, fence), or EINTR */
	SITS_Q_FRAMES = 2,      /* frames_limit frames captured */
	SITS_Q_HAND_BACK = 3,   /* the next commit is Python's (writeback, conversion) */
	SITS_Q_RETIRE_WAIT = 4, /* a flip completed before its out-fence said signalled */
	SITS_Q_FULL = 5,        /* the CUDA sample or timeline arrays are full */
	SITS_Q_ERROR = 6,       /* err_op failed with err (on buffer err_index) */
	SITS_Q_DELIVER = 7,     /* a frame for Python's consumers is in `delivered` */
};

enum {
	SITS_Q_CU_SLOTS = 64,           /* launch slots: more than the buffers a run can have in flight, and one */
	SITS_CU_NOT_READY = 600,        /* CUDA_ERROR_NOT_READY (cuda.h): cuStreamQuery's "not yet" */
	SITS_CU_STAMP_WORDS = 2,        /* u64 a buffer's stamp: {begin, end} (sits/cuda/stamp.py) */
	SITS_CU_STAMP_MISSING = 1000001, /* the stream is idle and a launch wrote no end stamp */
};

/* frames a timeline follows at once: every buffer's, and copies on screen */
enum { SITS_Q_OPEN_RECORDS = SITS_Q_MAX_BUFS + 8 };

enum { SITS_OP_DQBUF = 1, SITS_OP_QBUF = 2, SITS_OP_ATOMIC = 3, SITS_OP_READ = 4, SITS_OP_EPOLL = 5,
       SITS_OP_CUDA = 6 };

struct sits_q_frame {
	int32_t index;          /* capture buffer, or SITS_Q_NONE / _OWN / _COPY */
	uint32_t sequence, bytesused, tag;
	int32_t fence;          /* the commit's out-fence (Python's commits), -1 when none or closed */
	int64_t timestamp_ns;   /* the V4L2 buffer timestamp */
	int64_t dequeued_ns;
	int64_t shown_from_ns;  /* the time latency counts from (timestamp, or dequeue when not believable) */
	uint32_t record;        /* its open timeline record + 1 (0: none) */
};

/* One frame's stage times (sits/journey/record.py's schema; times are
 * CLOCK_MONOTONIC ns, 0 where the frame never got there). */
struct sits_q_record {
	int64_t frame;          /* the capture count before it: the timeline's order */
	int32_t buffer;
	uint32_t sequence, skipped_before, copied;
	int64_t captured_ns, dequeued_ns, committed_ns, scanout_ns, replaced_ns, requeued_ns;
	int64_t cuda_submitted_ns, cuda_done_ns;
	int64_t late_ns;                /* 0: not late */
	uint32_t scanout_vblank, replaced_vblank;   /* the flip events' vblank counters */
	uint32_t holds;         /* what may still add a stage (its buffer, the screen); 0: a free slot */
};

/* A latency histogram in sits_hist.h's slots: filled here every frame, read
 * by Python when it reports (no Python a frame). */
struct sits_q_hist {
	int64_t count, sum_ns, max_ns;
	uint32_t *slots;        /* SITS_HIST_SLOTS counts, Python's array */
};

struct sits_queue {
	/* set by Python */
	int32_t epfd, vfd, dfd;     /* vfd -1: nothing to queue into (stopped, camera lost) */
	uint32_t memory, nbufs;
	int32_t dmabuf_fd[SITS_Q_MAX_BUFS];
	uint32_t length[SITS_Q_MAX_BUFS];
	uint32_t fb_id[SITS_Q_MAX_BUFS];
	uint32_t plane_id, fb_prop, crtc_id;
	int64_t vblank_period_ns;   /* the mode's time between vblanks (0: unknown) */
	int32_t display;            /* frames go to the display (next -> pending -> on screen) */
	int32_t python_commits;     /* every commit is Python's (the conversion path) */
	int32_t hold_commits;       /* no commit now (a writeback is in flight) */
	int32_t paused;             /* no display connected: frames are dropped */
	int32_t deliver;            /* every frame is also delivered to Python's consumers */
	int32_t dfd_watched;        /* the DRM fd is in the epoll set */
	int64_t frames_limit;           /* run() stops at this many frames captured (0: none) */
	int64_t hand_back_displayed;    /* the commit made when displayed == this is Python's (-1: none) */
	int64_t hand_back_captured;     /* ... and any commit once captured >= this (0: none) */
	/* state */
	struct sits_q_frame next, pending, on_screen, retire, delivered;
	uint8_t queued[SITS_Q_MAX_BUFS];    /* with the driver */
	uint8_t py_hold[SITS_Q_MAX_BUFS];   /* held by Python's consumers (a Frame with leases) */
	uint8_t unqueued[SITS_Q_MAX_BUFS];  /* QBUF refused: retried before the next DQBUF */
	uint32_t tag;
	int64_t captured, displayed, dropped, anomalies, last_frame_ns;
	int64_t last_vblank_ns;     /* the vblank of the latest flip event (0: none in this mode yet) */
	int64_t dequeued, buffer_errors, requeue_errors;   /* Python drains them */
	int64_t wakeups;            /* run()'s epoll_wait returns: the steady state's cost in wake-ups */
	int64_t sequence_gaps;      /* sequence numbers the driver skipped (no buffer was queued) */
	uint32_t last_sequence;
	int32_t sequence_seen;      /* last_sequence is valid (0 after STREAMON: V4L2 starts again at 0) */
	/* a timer source instead of V4L2 (sits/pipeline/synthetic.py): vfd is a
	 * timerfd; each tick fills the buffer queued longest ago, stamped
	 * timer_first_ns + tick * timer_period_ns; a tick that finds none is a
	 * skipped sequence number, as a driver's */
	int32_t timer;
	int64_t timer_first_ns, timer_period_ns, timer_ticks;
	uint64_t queued_order[SITS_Q_MAX_BUFS];  /* when each was queued: filled oldest first, as drivers do */
	uint64_t queue_clock;
	/* the CUDA consumer's steady state (sits/pipeline/cuda.py): each frame's
	 * buffer's conversion graph is launched here, and the buffer is released
	 * once the graph's last node has written its end stamp (sits/cuda/
	 * stamp.py: the GPU's clock at the graph's first and last node, in
	 * host-mapped memory), seen at the next frame's wake-up: one driver call
	 * a frame (cuGraphLaunch), no CUDA thread, no wake-up of its own. When
	 * the work was done is the GPU's clock placed on CLOCK_MONOTONIC by the
	 * launch clock (cuda_done_ns in frame_queue.c). A launch whose stamp is
	 * late asks the stream (cuStreamQuery) for the error that stopped it.
	 * Function pointers: the driver's cuGraphLaunch and cuStreamQuery,
	 * resolved by Python. */
	int32_t cuda;
	uint64_t cu_graph[SITS_Q_MAX_BUFS];     /* CUgraphExec of each buffer's conversion */
	uint64_t cu_stream;                     /* CUstream */
	uint64_t cu_graph_launch, cu_stream_query;
	uint64_t *cu_stamps;                    /* SITS_CU_STAMP_WORDS a buffer index: {begin, end} GPU ns */
	int32_t cu_slot_index[SITS_Q_CU_SLOTS];         /* the buffer a slot's launch converts */
	int64_t cu_slot_launch_ns[SITS_Q_CU_SLOTS];     /* CLOCK_MONOTONIC before it was launched */
	int64_t cu_slot_from_ns[SITS_Q_CU_SLOTS];       /* the frame's timestamp: latency counts from there */
	int64_t cu_launched, cu_completed;      /* launches made / seen done: slot = n % SITS_Q_CU_SLOTS */
	int64_t cu_start_bound_ns;              /* no later than the last completed launch's begin stamp */
	uint64_t cu_last_begin;                 /* that launch's begin stamp, GPU ns */
	uint8_t cuda_hold[SITS_Q_MAX_BUFS];     /* a conversion in flight reads it */
	int64_t cuda_frames;
	float *cuda_latency_ms;                 /* V4L2 timestamp -> done on the GPU; Python drains it */
	float *cuda_release_ms;                 /* done on the GPU -> the buffer released */
	int32_t cuda_latency_n;
	struct sits_q_hist latency;         /* capture (V4L2 timestamp) -> on screen (flip event) */
	struct sits_q_hist submit;          /* dequeue -> commit */
	int32_t samples_cap;                /* of the CUDA sample arrays */
	int32_t err, err_op, err_index;
	/* --timeline (sits/pipeline/timeline.py): a frame's record stays open
	 * while its buffer is out or it is on screen, then moves to Python's
	 * array, drained after each call. Off, each stage costs one test. */
	int32_t timeline;
	struct sits_q_record open_records[SITS_Q_OPEN_RECORDS];
	uint8_t buffer_record[SITS_Q_MAX_BUFS];     /* the open record of the frame in each buffer + 1 */
	struct sits_q_record *records;
	int32_t records_cap, records_n;
	int64_t records_lost, gaps_recorded;
};

int sits_queue_run(struct sits_queue *L, int timeout_ms);
int sits_queue_capture(struct sits_queue *L);
int sits_queue_flip_events(struct sits_queue *L);
int sits_queue_try_commit(struct sits_queue *L);
void sits_queue_committed(struct sits_queue *L, int32_t kind, int32_t fence, int64_t started_ns);
int sits_queue_retired(struct sits_queue *L);
int sits_queue_release(struct sits_queue *L, int32_t index);
int sits_queue_drop_next(struct sits_queue *L);
int sits_queue_requeue_idle(struct sits_queue *L);
int sits_queue_held(struct sits_queue *L, int32_t index);
int sits_queue_cuda_done(struct sits_queue *L);
void sits_queue_timeline_cuda(struct sits_queue *L, int32_t index, int32_t done, int64_t ns);
void sits_queue_timeline_device_gone(struct sits_queue *L);
void sits_queue_timeline_end(struct sits_queue *L);
void sits_q_hist_add(struct sits_q_hist *h, int64_t ns);
/* cdef-end */

#endif
