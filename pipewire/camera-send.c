/* See camera-node.h: frames into PipeWire's buffers, and the graph cycles that carry them. */
#include "camera-node-internal.h"

#include <stdio.h>
#include <string.h>

static struct pw_time stream_time(struct camera_node *node) {
    struct pw_time time;
    memset(&time, 0, sizeof time);
    pw_stream_get_time_n(node->stream, &time, sizeof time);
    return time;
}

/* Starts a graph cycle. A cycle started before the last one completed would take the last frame from a consumer
 * still on its way to it (frames were lost so): one at a time (camera_node_settle). */
static void trigger(struct camera_node *node) {
    node->done_at_trigger = __atomic_load_n(&node->triggers_done, __ATOMIC_ACQUIRE);
    node->triggered = pw_stream_trigger_process(node->stream) >= 0;
}

static int last_cycle_done(struct camera_node *node) {
    return !node->triggered || __atomic_load_n(&node->triggers_done, __ATOMIC_ACQUIRE) > node->done_at_trigger;
}

enum camera_send_result camera_node_send(struct camera_node *node, camera_fill_fn fill, void *context) {
    enum camera_send_result result = CAMERA_SENT;
    camera_node_settle(node, 20000000LL); /* unlocked: a wait under a lock taken twice would keep it */
    pw_thread_loop_lock(node->loop);
    if (!camera_node_ready(node)) {
        result = CAMERA_NO_CONSUMER;
        goto done;
    }
    struct pw_buffer *buffer = node->held ? node->held : pw_stream_dequeue_buffer(node->stream);
    node->held = NULL;
    if (buffer == NULL) {
        node->counters.busy++;
        result = CAMERA_BUSY;
        goto done;
    }
    struct spa_data *block = &buffer->buffer->datas[0];
    struct camera_frame_info info = { 0 };
    enum camera_fill_result filled = CAMERA_FILL_FAILED;
    if (block->data != NULL && block->maxsize >= node->offered.size)
        filled = fill(context, &node->offered, block->data, &info);
    if (filled != CAMERA_FILLED) {
        node->held = buffer; /* kept for the next frame: PipeWire has no way to hand a buffer back unsent */
        result = filled == CAMERA_FILL_OTHER_FORMAT ? CAMERA_OTHER_FORMAT : CAMERA_NOT_READ;
        goto done;
    }
    block->chunk->offset = 0;
    block->chunk->size = node->offered.size;
    block->chunk->stride = (int32_t)node->offered.stride[0];
    block->chunk->flags = info.corrupt ? SPA_CHUNK_FLAG_CORRUPTED : SPA_CHUNK_FLAG_NONE;
    struct spa_meta_header *header = spa_buffer_find_meta_data(buffer->buffer, SPA_META_Header, sizeof *header);
    if (header) {
        header->flags = (info.corrupt ? SPA_META_HEADER_FLAG_CORRUPTED : 0) |
                        (info.discontinuity ? SPA_META_HEADER_FLAG_DISCONT : 0);
        header->offset = 0;
        header->pts = info.pts_ns;
        header->dts_offset = 0;
        header->seq = info.sequence;
    }
    struct spa_meta_region *crop = spa_buffer_find_meta_data(buffer->buffer, SPA_META_VideoCrop, sizeof *crop);
    if (crop) {
        int whole = info.crop_width == 0 || info.crop_height == 0;
        crop->region = SPA_REGION(whole ? 0 : info.crop_x, whole ? 0 : info.crop_y,
                                  whole ? node->offered.width : info.crop_width,
                                  whole ? node->offered.height : info.crop_height);
    }
    pw_stream_queue_buffer(node->stream, buffer);
    trigger(node);
    node->last_sent_ns = camera_monotonic_ns();
    node->counters.sent++;
done:
    pw_thread_loop_unlock(node->loop);
    return result;
}

uint32_t camera_node_kick(struct camera_node *node) {
    pw_thread_loop_lock(node->loop);
    uint32_t queued = camera_node_ready(node) ? stream_time(node).queued_buffers : 0;
    if (queued > 0 && last_cycle_done(node)) trigger(node);
    pw_thread_loop_unlock(node->loop);
    return queued;
}

/* The next frame waits until the last cycle completed, or the timeout (consumers that stall). */
void camera_node_settle(struct camera_node *node, int64_t timeout_ns) {
    uint64_t deadline = camera_monotonic_ns() + (uint64_t)timeout_ns;
    pw_thread_loop_lock(node->loop);
    while (camera_node_ready(node) && !last_cycle_done(node)) {
        if (camera_monotonic_ns() >= deadline) {
            node->counters.settle_timeouts++;
            break;
        }
        struct timespec step;
        pw_thread_loop_get_time(node->loop, &step, 500000);
        pw_thread_loop_timed_wait_full(node->loop, &step);
    }
    pw_thread_loop_unlock(node->loop);
}

int camera_node_linked(struct camera_node *node) {
    pw_thread_loop_lock(node->loop);
    int linked = camera_node_ready(node);
    pw_thread_loop_unlock(node->loop);
    return linked;
}

void camera_node_counters(struct camera_node *node, struct camera_node_counters *counters) {
    pw_thread_loop_lock(node->loop);
    *counters = node->counters;
    pw_thread_loop_unlock(node->loop);
}
