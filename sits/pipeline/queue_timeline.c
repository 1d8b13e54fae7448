/* The frame queue's timeline (`sits capture --timeline`, timeline.py): each
 * frame's stages timed in C as they happen, one struct sits_frame record a
 * frame (sits/include/sits_frame.h), handed to Python once nothing can add
 * a stage to it. Off, each stage costs the queue one test. */
#include <string.h>

#include "sits_kernel.h"
#include "frame_queue.h"

/* --timeline: a frame's record is open from its dequeue while its buffer
 * is out (until QBUF), while a stage's buffer that it was made into is
 * out, and while it is committed or on screen (until the flip that
 * replaces it); then it moves to Python's array. */
enum { HOLD_BUFFER = 1, HOLD_SCREEN = 2, HOLD_STAGED = 4 };

void sits_timeline_open(struct sits_queue *L, struct sits_q_frame *f)
{
	struct sits_q_source *src = &L->sources[f->source];
	int64_t skipped = src->sequence_gaps - src->gaps_recorded;     /* count_sequence's, since the last */
	src->gaps_recorded = src->sequence_gaps;
	for (uint32_t i = 0; i < SITS_Q_OPEN_RECORDS; i++) {
		struct sits_frame *r = &L->open_records[i];
		if (L->record_holds[i])
			continue;
		memset(r, 0, sizeof *r);
		r->id = L->captured - 1;
		r->buffer = (uint32_t)(f->index - src->first);
		r->source = (uint32_t)f->source;
		r->sequence = f->sequence;
		r->skipped_before = (uint32_t)skipped;
		r->captured_ns = f->timestamp_ns;
		r->dequeued_ns = f->dequeued_ns;
		L->record_holds[i] = HOLD_BUFFER;
		L->buffer_record[f->index] = (uint8_t)(i + 1);
		f->record = i + 1;
		return;
	}
	L->records_lost++;      /* cannot happen: each open record holds a buffer or a display commit */
}

static void timeline_let_go(struct sits_queue *L, uint32_t record, uint32_t hold)
{
	L->record_holds[record - 1] &= ~hold;
	if (L->record_holds[record - 1])
		return;
	if (L->records_n < L->records_cap)
		L->records[L->records_n++] = L->open_records[record - 1];
	else
		L->records_lost++;
}

void sits_timeline_requeued(struct sits_queue *L, int32_t index)
{
	uint32_t record = L->buffer_record[index];
	if (!record)
		return;
	L->buffer_record[index] = 0;
	struct sits_frame *r = &L->open_records[record - 1];
	if (sits_queue_made(L, index)) {        /* a stage's buffer the frame was made into */
		timeline_let_go(L, record, HOLD_STAGED);
		return;
	}
	r->requeued_ns = sits_now_ns();
	timeline_let_go(L, record, HOLD_BUFFER);
}

/* A stage made the frame of buffer `from` into f (its own buffer): the
 * frame's record follows it there. */
void sits_timeline_staged(struct sits_queue *L, int32_t from, struct sits_q_frame *f)
{
	uint32_t record = L->timeline ? L->buffer_record[from] : 0;
	f->record = record;
	if (!record)
		return;
	L->buffer_record[f->index] = (uint8_t)record;
	L->record_holds[record - 1] |= HOLD_STAGED;
	struct sits_frame *r = &L->open_records[record - 1];
	r->made_ns = sits_now_ns();
	r->made_buffer = (uint32_t)(f->index - L->sources[L->buffer_source[f->index]].first + 1);
}

void sits_timeline_committed(struct sits_queue *L, uint32_t record, int64_t started_ns, int64_t late_ns, int copied)
{
	if (!L->timeline || !record)
		return;
	struct sits_frame *r = &L->open_records[record - 1];
	r->committed_ns = started_ns;
	r->flags = copied ? r->flags | SITS_FRAME_COPIED : r->flags & ~SITS_FRAME_COPIED;
	r->late_ns = late_ns;
	L->record_holds[record - 1] |= HOLD_SCREEN;
}

/* A flip event: `shown` went on screen at vblank `ns` (counter `seq`),
 * `replaced` left it. */
void sits_timeline_flip(struct sits_queue *L, uint32_t shown, uint32_t replaced, int64_t ns, uint32_t seq)
{
	if (!L->timeline)
		return;
	if (shown) {
		L->open_records[shown - 1].scanout_ns = ns;
		L->open_records[shown - 1].scanout_seq = seq;
	}
	if (replaced) {
		L->open_records[replaced - 1].replaced_ns = ns;
		L->open_records[replaced - 1].replaced_seq = seq;
		timeline_let_go(L, replaced, HOLD_SCREEN);
	}
}

void sits_queue_timeline_cuda(struct sits_queue *L, int32_t index, int32_t done, int64_t ns)
{
	uint32_t record = L->timeline && index >= 0 && index < SITS_Q_MAX_BUFS ? L->buffer_record[index] : 0;
	if (!record)
		return;
	struct sits_frame *r = &L->open_records[record - 1];
	*(done ? &r->cuda_done_ns : &r->cuda_submitted_ns) = ns ? ns : sits_now_ns();
}

/* The camera went: its buffers are never queued again, so each open
 * record lets go of its buffer with no requeue (a new device's buffer of
 * the same index is another buffer); one on screen stays open until the
 * flip that replaces it. */
void sits_queue_timeline_device_gone(struct sits_queue *L, int32_t source)
{
	struct sits_q_source *src = &L->sources[source];
	for (int32_t i = src->first; i < src->first + src->nbufs; i++) {
		uint32_t record = L->buffer_record[i];
		if (record) {
			L->buffer_record[i] = 0;
			timeline_let_go(L, record, HOLD_BUFFER);
		}
	}
}

/* The run ended: every open record goes to Python as it is. */
void sits_queue_timeline_end(struct sits_queue *L)
{
	for (uint32_t i = 0; i < SITS_Q_OPEN_RECORDS; i++)
		if (L->record_holds[i])
			timeline_let_go(L, i + 1, L->record_holds[i]);
	memset(L->buffer_record, 0, sizeof L->buffer_record);
	L->timeline = 0;
}
