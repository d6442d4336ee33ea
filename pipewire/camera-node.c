/* See camera-node.h. */
#include "camera-node.h"

#include <errno.h>
#include <pipewire/pipewire.h>
#include <spa/param/video/format-utils.h>
#include <spa/pod/builder.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct camera_node {
    struct pw_thread_loop *loop;
    struct pw_context *context;
    struct pw_core *core;
    struct pw_stream *stream;
    struct spa_hook listener;
    struct spa_hook core_listener;
    int connected;
    enum pw_stream_state state;
    char failure[256]; /* "" while the node works */
    struct camera_format offered;
    uint32_t rate_num, rate_den;
    int negotiated; /* the consumers settled on `offered` */
    int awaiting;   /* consumers were linked when the format changed: they will settle on the new one */
    int buffers;    /* buffers PipeWire gave the stream since the format was negotiated (it replaces them all) */
    int in_flight;                  /* the last frame sent may still be on its way through the graph */
    uint32_t available_after_send;  /* buffers free to dequeue just after it was sent */
    struct pw_buffer *held; /* dequeued, not sent (its frame could not be read): used for the next frame */
    struct camera_node_counters counters;
};

static void on_state_changed(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *error) {
    struct camera_node *node = data;
    (void)old;
    node->state = state;
    if (state == PW_STREAM_STATE_ERROR)
        snprintf(node->failure, sizeof node->failure, "PipeWire: %s", error ? error : "stream error");
    else if (state == PW_STREAM_STATE_UNCONNECTED && node->connected)
        snprintf(node->failure, sizeof node->failure, "PipeWire closed the connection");
    pw_thread_loop_signal(node->loop, false);
}

/* The consumers chose a format (ours: only one is ever offered) or dropped it. Buffers are asked for in one
 * block of GStreamer's default layout, with header and crop metadata. */
static void on_param_changed(void *data, uint32_t id, const struct spa_pod *param) {
    struct camera_node *node = data;
    if (id != SPA_PARAM_Format) return;
    node->negotiated = 0;
    node->buffers = 0; /* the old ones go; frames wait for buffers of the new size */
    struct spa_video_info_raw info;
    uint32_t media_type, media_subtype;
    if (param == NULL || spa_format_parse(param, &media_type, &media_subtype) < 0 ||
        media_type != SPA_MEDIA_TYPE_video || media_subtype != SPA_MEDIA_SUBTYPE_raw ||
        spa_format_video_raw_parse(param, &info) < 0 || info.format != node->offered.spa_format ||
        info.size.width != node->offered.width || info.size.height != node->offered.height) {
        pw_thread_loop_signal(node->loop, false);
        return;
    }
    uint8_t storage[1024];
    struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(storage, sizeof storage);
    const struct spa_pod *params[3];
    params[0] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamBuffers, SPA_PARAM_Buffers,
        SPA_PARAM_BUFFERS_buffers, SPA_POD_CHOICE_RANGE_Int(4, 2, 16),
        SPA_PARAM_BUFFERS_blocks, SPA_POD_Int(1),
        SPA_PARAM_BUFFERS_size, SPA_POD_Int((int32_t)node->offered.size),
        SPA_PARAM_BUFFERS_stride, SPA_POD_Int((int32_t)node->offered.stride[0]),
        SPA_PARAM_BUFFERS_align, SPA_POD_Int(16));
    params[1] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_Header),
        SPA_PARAM_META_size, SPA_POD_Int(sizeof(struct spa_meta_header)));
    params[2] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_VideoCrop),
        SPA_PARAM_META_size, SPA_POD_Int(sizeof(struct spa_meta_region)));
    pw_stream_update_params(node->stream, params, 3);
    node->negotiated = 1;
    node->counters.negotiations++;
    pw_thread_loop_signal(node->loop, false);
}

static void on_add_buffer(void *data, struct pw_buffer *buffer) {
    struct camera_node *node = data;
    (void)buffer;
    node->buffers++;
    pw_thread_loop_signal(node->loop, false);
}

static void on_remove_buffer(void *data, struct pw_buffer *buffer) {
    struct camera_node *node = data;
    if (node->held == buffer) node->held = NULL;
}

/* PipeWire went away (or refused us) before the node had a format: the stream alone would not say so. */
static void on_core_error(void *data, uint32_t id, int seq, int result, const char *message) {
    struct camera_node *node = data;
    (void)seq;
    if (id == PW_ID_CORE && node->failure[0] == 0)
        snprintf(node->failure, sizeof node->failure, "PipeWire: %s (%s)", message ? message : "error", strerror(-result));
    pw_thread_loop_signal(node->loop, false);
}

static const struct pw_core_events core_events = {
    PW_VERSION_CORE_EVENTS,
    .error = on_core_error,
};

static const struct pw_stream_events stream_events = {
    PW_VERSION_STREAM_EVENTS,
    .state_changed = on_state_changed,
    .param_changed = on_param_changed,
    .add_buffer = on_add_buffer,
    .remove_buffer = on_remove_buffer,
};

struct camera_node *camera_node_new(const char *node_name, const char *description, char *error, size_t error_size) {
    pw_init(NULL, NULL);
    struct camera_node *node = calloc(1, sizeof *node);
    if (node == NULL) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    node->loop = pw_thread_loop_new("streamrecv-camera", NULL);
    if (node->loop == NULL || pw_thread_loop_start(node->loop) < 0) {
        snprintf(error, error_size, "cannot start PipeWire's thread: %s", strerror(errno));
        camera_node_free(node);
        return NULL;
    }
    struct pw_properties *properties = pw_properties_new(
        PW_KEY_MEDIA_CLASS, "Video/Source", PW_KEY_MEDIA_TYPE, "Video", PW_KEY_MEDIA_CATEGORY, "Capture",
        PW_KEY_MEDIA_ROLE, "Camera", PW_KEY_NODE_NAME, node_name, PW_KEY_NODE_DESCRIPTION, description, NULL);
    pw_thread_loop_lock(node->loop);
    /* Connected here rather than at the first format, so that a session without PipeWire fails at once. */
    node->context = pw_context_new(pw_thread_loop_get_loop(node->loop), NULL, 0);
    errno = 0;
    node->core = node->context ? pw_context_connect(node->context, NULL, 0) : NULL;
    int saved = errno;
    if (node->core) {
        pw_core_add_listener(node->core, &node->core_listener, &core_events, node);
        node->stream = pw_stream_new(node->core, node_name, properties);
        if (node->stream) pw_stream_add_listener(node->stream, &node->listener, &stream_events, node);
    } else {
        pw_properties_free(properties);
    }
    pw_thread_loop_unlock(node->loop);
    if (node->core == NULL) {
        snprintf(error, error_size, "cannot reach PipeWire (is it running in this session? XDG_RUNTIME_DIR=%s): %s",
                 getenv("XDG_RUNTIME_DIR") ? getenv("XDG_RUNTIME_DIR") : "(unset)", strerror(saved ? saved : EIO));
        camera_node_free(node);
        return NULL;
    }
    if (node->stream == NULL) {
        snprintf(error, error_size, "PipeWire refused the node: %s", strerror(errno ? errno : EIO));
        camera_node_free(node);
        return NULL;
    }
    return node;
}

void camera_node_free(struct camera_node *node) {
    if (node == NULL) return;
    if (node->loop) pw_thread_loop_stop(node->loop);
    if (node->stream) pw_stream_destroy(node->stream);
    if (node->core) pw_core_disconnect(node->core);
    if (node->context) pw_context_destroy(node->context);
    if (node->loop) pw_thread_loop_destroy(node->loop);
    free(node);
    pw_deinit();
}

/* One fixed format: what the ring holds now. Colorimetry and aspect go with it so that consumers convert right. */
static const struct spa_pod *enum_format(struct spa_pod_builder *builder, const struct camera_format *format,
                                         uint32_t rate_num, uint32_t rate_den) {
    struct spa_pod_frame frame;
    spa_pod_builder_push_object(builder, &frame, SPA_TYPE_OBJECT_Format, SPA_PARAM_EnumFormat);
    spa_pod_builder_add(builder,
        SPA_FORMAT_mediaType, SPA_POD_Id(SPA_MEDIA_TYPE_video),
        SPA_FORMAT_mediaSubtype, SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw),
        SPA_FORMAT_VIDEO_format, SPA_POD_Id(format->spa_format),
        SPA_FORMAT_VIDEO_size, SPA_POD_Rectangle(&SPA_RECTANGLE(format->width, format->height)),
        SPA_FORMAT_VIDEO_framerate, SPA_POD_Fraction(&SPA_FRACTION(rate_num, rate_den)),
        SPA_FORMAT_VIDEO_pixelAspectRatio, SPA_POD_Rectangle(&SPA_RECTANGLE(format->aspect_num, format->aspect_den)),
        SPA_FORMAT_VIDEO_colorRange, SPA_POD_Id(format->color_range), 0);
    if (rate_num == 0)
        spa_pod_builder_add(builder, SPA_FORMAT_VIDEO_maxFramerate,
                            SPA_POD_CHOICE_RANGE_Fraction(&SPA_FRACTION(120, 1), &SPA_FRACTION(0, 1), &SPA_FRACTION(240, 1)), 0);
    if (format->color_matrix != SPA_VIDEO_COLOR_MATRIX_UNKNOWN)
        spa_pod_builder_add(builder, SPA_FORMAT_VIDEO_colorMatrix, SPA_POD_Id(format->color_matrix), 0);
    if (format->transfer_function != SPA_VIDEO_TRANSFER_UNKNOWN)
        spa_pod_builder_add(builder, SPA_FORMAT_VIDEO_transferFunction, SPA_POD_Id(format->transfer_function), 0);
    if (format->color_primaries != SPA_VIDEO_COLOR_PRIMARIES_UNKNOWN)
        spa_pod_builder_add(builder, SPA_FORMAT_VIDEO_colorPrimaries, SPA_POD_Id(format->color_primaries), 0);
    return spa_pod_builder_pop(builder, &frame);
}

int camera_node_offer(struct camera_node *node, const struct camera_format *format, uint32_t rate_num,
                      uint32_t rate_den, char *error, size_t error_size) {
    /* Frames sent in the old format go out first: a new format takes the buffers back, queued ones with them. */
    camera_node_settle(node, 200000000LL);
    uint8_t storage[1024];
    struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(storage, sizeof storage);
    pw_thread_loop_lock(node->loop);
    node->offered = *format;
    node->rate_num = rate_num;
    node->rate_den = rate_den;
    node->awaiting = node->negotiated || node->state == PW_STREAM_STATE_STREAMING;
    node->negotiated = 0;
    const struct spa_pod *params[1] = { enum_format(&builder, format, rate_num, rate_den) };
    int result;
    if (!node->connected) {
        result = pw_stream_connect(node->stream, PW_DIRECTION_OUTPUT, PW_ID_ANY,
                                   PW_STREAM_FLAG_DRIVER | PW_STREAM_FLAG_MAP_BUFFERS, params, 1);
        node->connected = result >= 0;
    } else {
        result = pw_stream_update_params(node->stream, params, 1);
    }
    pw_thread_loop_unlock(node->loop);
    if (result < 0) snprintf(error, error_size, "PipeWire refused the format: %s", strerror(-result));
    return result < 0 ? -1 : 0;
}

static struct pw_time stream_time(struct camera_node *node) {
    struct pw_time time;
    memset(&time, 0, sizeof time);
    pw_stream_get_time_n(node->stream, &time, sizeof time);
    return time;
}

static uint64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

void camera_node_settle(struct camera_node *node, int64_t timeout_ns);

static int ready(const struct camera_node *node) {
    return node->negotiated && node->buffers > 0 && node->state == PW_STREAM_STATE_STREAMING;
}

int camera_node_wait_negotiated(struct camera_node *node, int64_t timeout_ns) {
    struct timespec deadline;
    pw_thread_loop_get_time(node->loop, &deadline, timeout_ns);
    pw_thread_loop_lock(node->loop);
    /* Nobody linked when the format was offered: nothing to wait for; frames go nowhere until someone links. */
    while (!ready(node) && node->failure[0] == 0 && node->awaiting &&
           pw_thread_loop_timed_wait_full(node->loop, &deadline) == 0) {
    }
    int result = ready(node);
    pw_thread_loop_unlock(node->loop);
    return result;
}

enum camera_send_result camera_node_send(struct camera_node *node, camera_fill_fn fill, void *context) {
    enum camera_send_result result = CAMERA_SENT;
    pw_thread_loop_lock(node->loop);
    camera_node_settle(node, 20000000LL);
    if (!ready(node)) {
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
    pw_stream_trigger_process(node->stream);
    node->in_flight = 1;
    node->available_after_send = stream_time(node).avail_buffers;
    node->counters.sent++;
done:
    pw_thread_loop_unlock(node->loop);
    return result;
}

uint32_t camera_node_kick(struct camera_node *node) {
    pw_thread_loop_lock(node->loop);
    uint32_t queued = ready(node) ? stream_time(node).queued_buffers : 0;
    if (queued > 0) pw_stream_trigger_process(node->stream);
    pw_thread_loop_unlock(node->loop);
    return queued;
}

/* A new graph cycle started before the consumers finished the last one would take its frame from them: the next
 * frame waits until the last one's buffer is back (every consumer let go of it), or the timeout for consumers
 * that keep buffers. A trigger that found the graph busy left the frame queued: it is triggered again. */
void camera_node_settle(struct camera_node *node, int64_t timeout_ns) {
    uint64_t deadline = monotonic_ns() + (uint64_t)timeout_ns;
    pw_thread_loop_lock(node->loop);
    while (ready(node) && node->in_flight) {
        struct pw_time time = stream_time(node);
        if (time.queued_buffers == 0 && time.avail_buffers > node->available_after_send) {
            node->in_flight = 0;
            break;
        }
        if (monotonic_ns() >= deadline) break;
        if (time.queued_buffers > 0) pw_stream_trigger_process(node->stream);
        struct timespec step;
        pw_thread_loop_get_time(node->loop, &step, 1000000);
        pw_thread_loop_timed_wait_full(node->loop, &step);
    }
    pw_thread_loop_unlock(node->loop);
}

const char *camera_node_failure(struct camera_node *node, char *copy, size_t copy_size) {
    pw_thread_loop_lock(node->loop);
    int failed = node->failure[0] != 0;
    if (failed) snprintf(copy, copy_size, "%s", node->failure);
    pw_thread_loop_unlock(node->loop);
    return failed ? copy : NULL;
}

uint32_t camera_node_id(struct camera_node *node) {
    pw_thread_loop_lock(node->loop);
    uint32_t id = pw_stream_get_node_id(node->stream);
    pw_thread_loop_unlock(node->loop);
    return id;
}

void camera_node_counters(struct camera_node *node, struct camera_node_counters *counters) {
    pw_thread_loop_lock(node->loop);
    *counters = node->counters;
    pw_thread_loop_unlock(node->loop);
}
