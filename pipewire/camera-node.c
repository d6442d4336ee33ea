/* See camera-node.h. */
#include "camera-node-internal.h"

#include <errno.h>
#include <pipewire/pipewire.h>
#include <spa/param/video/format-utils.h>
#include <spa/pod/builder.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Says when consumers become able to take frames (at most every 10 s: a forged ring can renegotiate per frame). */
static void note_readiness(struct camera_node *node) {
    int ready = camera_node_ready(node);
    uint64_t now = camera_monotonic_ns();
    if (ready && !node->was_ready && (node->ready_noted_ns == 0 || now - node->ready_noted_ns >= 10000000000ULL)) {
        fprintf(stderr, "streamrecv-camera: consumers linked: %ux%u %s\n", node->offered.width, node->offered.height,
                camera_spa_format_name(node->offered.spa_format));
        node->ready_noted_ns = now;
    }
    node->was_ready = ready;
}

static void on_state_changed(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *error) {
    struct camera_node *node = data;
    (void)old;
    node->state = state;
    if (state == PW_STREAM_STATE_ERROR)
        snprintf(node->failure, sizeof node->failure, "PipeWire: %s", error ? error : "stream error");
    else if (state == PW_STREAM_STATE_UNCONNECTED && node->connected)
        snprintf(node->failure, sizeof node->failure, "PipeWire closed the connection");
    note_readiness(node);
    pw_thread_loop_signal(node->loop, false);
}

/* A field of a negotiated format agrees with the offer when it is the offer's, or absent (0: unknown). */
static int agrees(uint32_t negotiated, uint32_t offered) { return negotiated == 0 || negotiated == offered; }

/* The consumers chose a format (ours: only one is ever offered) or dropped it. Buffers are asked for in one
 * block of GStreamer's default layout, with header and crop metadata. */
static void on_param_changed(void *data, uint32_t id, const struct spa_pod *param) {
    struct camera_node *node = data;
    if (id != SPA_PARAM_Format) return;
    node->negotiated = 0;
    node->buffers = 0; /* the old ones go; frames wait for buffers of the new size */
    struct spa_video_info_raw info;
    uint32_t media_type, media_subtype;
    const struct camera_format *offered = &node->offered;
    memset(&info, 0, sizeof info);
    /* Colorimetry and aspect too, where the format names them (a consumer that asks for none gets a format without
     * them): a format left over from an offer that differed only in those would label frames wrongly. */
    if (param == NULL || spa_format_parse(param, &media_type, &media_subtype) < 0 ||
        media_type != SPA_MEDIA_TYPE_video || media_subtype != SPA_MEDIA_SUBTYPE_raw ||
        spa_format_video_raw_parse(param, &info) < 0 || info.format != offered->spa_format ||
        info.size.width != offered->width || info.size.height != offered->height ||
        !agrees(info.color_range, offered->color_range) || !agrees(info.color_matrix, offered->color_matrix) ||
        !agrees(info.transfer_function, offered->transfer_function) ||
        !agrees(info.color_primaries, offered->color_primaries) ||
        (info.pixel_aspect_ratio.denom != 0 && (info.pixel_aspect_ratio.num != offered->aspect_num ||
                                                info.pixel_aspect_ratio.denom != offered->aspect_den))) {
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
        SPA_PARAM_BUFFERS_align, SPA_POD_Int(16),
        SPA_PARAM_BUFFERS_dataType, SPA_POD_CHOICE_FLAGS_Int((1 << SPA_DATA_MemFd) | (1 << SPA_DATA_MemPtr)));
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

static void on_trigger_done(void *data) {
    struct camera_node *node = data;
    __atomic_add_fetch(&node->triggers_done, 1, __ATOMIC_RELEASE);
    pw_thread_loop_signal(node->loop, false);
}

static void on_add_buffer(void *data, struct pw_buffer *buffer) {
    struct camera_node *node = data;
    (void)buffer;
    node->buffers++;
    note_readiness(node);
    pw_thread_loop_signal(node->loop, false);
}

static void on_remove_buffer(void *data, struct pw_buffer *buffer) {
    struct camera_node *node = data;
    if (node->buffers > 0) node->buffers--;
    if (node->held == buffer) node->held = NULL;
    note_readiness(node);
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
    .trigger_done = on_trigger_done,
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
    errno = 0;
    node->context = pw_context_new(pw_thread_loop_get_loop(node->loop), NULL, 0);
    int context_error = errno;
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
    if (node->context == NULL) {
        snprintf(error, error_size, "PipeWire's client configuration or modules are missing (client.conf in pipewire-bin, "
                 "libpipewire-0.3-modules): %s", strerror(context_error ? context_error : EIO));
        camera_node_free(node);
        return NULL;
    }
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
        SPA_FORMAT_VIDEO_pixelAspectRatio, SPA_POD_Fraction(&SPA_FRACTION(format->aspect_num, format->aspect_den)),
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
    /* Frames sent in the old format go out first: a new format takes the buffers back, queued ones with them, and
     * also those a consumer's graph side has taken but its own thread not yet seen (the last frame before a size
     * change was lost so, now and then): that thread is given 30 ms. */
    camera_node_settle(node, 200000000LL);
    pw_thread_loop_lock(node->loop);
    uint64_t sent_at = node->last_sent_ns;
    pw_thread_loop_unlock(node->loop);
    uint64_t now = camera_monotonic_ns();
    if (sent_at != 0 && now < sent_at + 30000000ULL) usleep((useconds_t)((sent_at + 30000000ULL - now) / 1000));
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

enum camera_negotiation camera_node_wait_negotiated(struct camera_node *node, int64_t timeout_ns) {
    struct timespec deadline;
    pw_thread_loop_get_time(node->loop, &deadline, timeout_ns);
    pw_thread_loop_lock(node->loop);
    /* Nobody linked when the format was offered: nothing to wait for; frames go nowhere until someone links. */
    while (!camera_node_ready(node) && node->failure[0] == 0 && node->awaiting &&
           pw_thread_loop_timed_wait_full(node->loop, &deadline) == 0) {
    }
    int ready = camera_node_ready(node), awaiting = node->awaiting;
    pw_thread_loop_unlock(node->loop);
    if (!awaiting) return ready ? CAMERA_NEGOTIATED : CAMERA_NOBODY_LINKED;
    if (!ready) return CAMERA_NOT_TAKEN;
    /* Ready here is ready on this side: a consumer still setting up its side of the new format lost the first
     * frame in it now and then. It is given 50 ms (a size change is rare; a frame that goes nowhere is worse). */
    usleep(50000);
    pw_thread_loop_lock(node->loop);
    ready = camera_node_ready(node);
    pw_thread_loop_unlock(node->loop);
    return ready ? CAMERA_NEGOTIATED : CAMERA_NOT_TAKEN;
}

const char *camera_node_failure(struct camera_node *node, char *copy, size_t copy_size) {
    pw_thread_loop_lock(node->loop);
    int failed = node->failure[0] != 0;
    if (failed) snprintf(copy, copy_size, "%s", node->failure);
    pw_thread_loop_unlock(node->loop);
    return failed ? copy : NULL;
}

int camera_node_ready(const struct camera_node *node) {
    return node->negotiated && node->buffers > 0 && node->state == PW_STREAM_STATE_STREAMING;
}

uint64_t camera_monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}
