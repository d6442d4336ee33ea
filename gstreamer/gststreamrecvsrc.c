/* streamrecvsrc: a live GStreamer source of the frames streamrecvd publishes in shared memory.
 *
 *   gst-launch-1.0 streamrecvsrc stream=desk ! videoconvert ! autovideosink
 *
 * Caps come from each frame's slot (format, size, pixel aspect, colorimetry); a new caps event precedes the first
 * frame of another format. Frames are copied once, out of the ring under its seqlock, into buffers of GStreamer's
 * default layout: a buffer wrapping the slot would be overwritten by the writer while downstream still reads it.
 * mode=every-frame (default) delivers each frame in order and reports frames the writer overwrote before they
 * were read as a QoS message (format buffers: processed, dropped); mode=newest always delivers the newest frame
 * and skips older ones. It waits for a ring that is not there yet, follows the stream to a new object, and keeps
 * waiting across a daemon restart (the first frame after one carries DISCONT). Buffer PTS is the running time at
 * which the daemon published the frame; OFFSET is the frame's sequence number. */
#include "ring-reader.h"
#include "slot-video.h"

#include <gst/base/gstpushsrc.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

GST_DEBUG_CATEGORY_STATIC(streamrecvsrc_debug);
#define GST_CAT_DEFAULT streamrecvsrc_debug

typedef enum {
    STREAMRECV_SRC_EVERY_FRAME,
    STREAMRECV_SRC_NEWEST,
} StreamrecvSrcMode;

#define GST_TYPE_STREAMRECV_SRC (gst_streamrecv_src_get_type())
G_DECLARE_FINAL_TYPE(GstStreamrecvSrc, gst_streamrecv_src, GST, STREAMRECV_SRC, GstPushSrc)

struct _GstStreamrecvSrc {
    GstPushSrc parent;
    gchar *stream;           /* property "stream": the ring is /dev/shm/streamrecv-STREAM */
    gchar *shm;              /* property "shm": an object name or path, instead of stream */
    StreamrecvSrcMode mode;
    gchar *path;             /* the ring's path, from stream or shm at start() (they change only in READY) */
    /* Streaming thread only, from here on. */
    struct ring_reader ring;
    gboolean attached;
    gboolean warned;         /* the "not a ring" warning was posted for this attempt series */
    guint64 next;            /* next sequence in every-frame mode; in newest mode, one past the last delivered */
    guint64 epoch;           /* writer_epoch seen last: a change is a daemon restart */
    gboolean discont;
    GstVideoInfo info;
    gboolean have_info;
    /* The frame being copied: the buffer the copy callback fills, straight from the slot. */
    GstBuffer *target;
    GstVideoFrame target_frame;
    gboolean target_mapped;
    GstVideoInfo target_info;
    gboolean target_ok;
    /* Why the last copy was not made (target_ok FALSE), for the error. */
    const char *target_problem;
    /* Buffers for the current format, reused once downstream lets go of them: a fresh 3 MB buffer per 1080p frame
     * costs its page faults every time. */
    GstBufferPool *pool;
    GstVideoInfo pool_info;
    guint64 processed, dropped;
    gint flushing;           /* atomic: set by unlock() from another thread */
};

G_DEFINE_TYPE(GstStreamrecvSrc, gst_streamrecv_src, GST_TYPE_PUSH_SRC)

enum { PROP_0, PROP_STREAM, PROP_SHM, PROP_MODE, PROP_DROPPED };

#define FORMATS "{ I420, NV12, P010_10LE, Y42B, Y444, GRAY8, I420_10LE, I422_10LE, Y444_10LE, I420_12LE, " \
                "I422_12LE, Y444_12LE, GBR, GBR_10LE }"
static GstStaticPadTemplate src_template =
    GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE(FORMATS)));

static GType mode_get_type(void) {
    static GType type = 0;
    static const GEnumValue values[] = {
        { STREAMRECV_SRC_EVERY_FRAME, "Every frame, in order; overwritten frames reported as QoS", "every-frame" },
        { STREAMRECV_SRC_NEWEST, "The newest frame; older ones skipped", "newest" },
        { 0, NULL, NULL },
    };
    if (g_once_init_enter(&type)) g_once_init_leave(&type, g_enum_register_static("GstStreamrecvSrcMode", values));
    return type;
}

static gchar *ring_path(GstStreamrecvSrc *self) {
    if (self->shm && *self->shm) {
        if (g_str_has_prefix(self->shm, "/dev/shm/")) return g_strdup(self->shm);
        return g_strdup_printf("/dev/shm/%s", self->shm[0] == '/' ? self->shm + 1 : self->shm);
    }
    return g_strdup_printf("/dev/shm/streamrecv-%s", self->stream ? self->stream : "");
}

static gboolean is_flushing(GstStreamrecvSrc *self) { return g_atomic_int_get(&self->flushing) != 0; }

/* Attaches to the ring, waiting 50 ms at a time for it to appear. Returns FALSE when flushing. */
static gboolean attach(GstStreamrecvSrc *self, const gchar *path) {
    while (!is_flushing(self)) {
        const char *problem = NULL;
        enum ring_attach_result result = ring_attach(path, &self->ring, &problem);
        if (result == RING_ATTACHED) {
            int truncated = 0;
            guint64 latest = ring_latest(&self->ring, &truncated);
            guint64 epoch = ring_epoch(&self->ring, &truncated);
            self->attached = TRUE;
            self->warned = FALSE;
            if (self->next == 0) {
                /* The first attachment: every-frame mode starts with the next frame published, newest mode with
                 * the newest there is. */
                self->next = self->mode == STREAMRECV_SRC_NEWEST ? MAX(latest, 1) : latest + 1;
                self->epoch = epoch;
            } else {
                /* Another object: numbering goes on from the old one (create() starts over where it does not). */
                self->discont = TRUE;
            }
            GST_INFO_OBJECT(self, "attached to %s (%u slots), reading from frame %" G_GUINT64_FORMAT, path,
                            self->ring.geometry.slot_count, self->next);
            return TRUE;
        }
        if (result == RING_NOT_A_RING && !self->warned) {
            GST_ELEMENT_WARNING(self, RESOURCE, OPEN_READ, ("%s is not a streamrecv ring", path),
                                ("%s; waiting for the daemon to replace it", problem));
            self->warned = TRUE;
        } else if (result == RING_MISSING && !self->warned) {
            GST_INFO_OBJECT(self, "waiting for %s (the daemon has not made it yet)", path);
        }
        g_usleep(50000);
    }
    return FALSE;
}

static void post_qos(GstStreamrecvSrc *self, guint64 lost) {
    self->dropped += lost;
    GST_WARNING_OBJECT(self, "lapped: %" G_GUINT64_FORMAT " frames overwritten before being read", lost);
    GstMessage *message = gst_message_new_qos(GST_OBJECT(self), TRUE, GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE,
                                              GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE);
    gst_message_set_qos_stats(message, GST_FORMAT_BUFFERS, self->processed, self->dropped);
    gst_element_post_message(GST_ELEMENT(self), message);
}

static uint64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* The running time at which the daemon published the frame: its CLOCK_MONOTONIC stamp, moved onto the pipeline
 * clock by the age of the frame now. */
static GstClockTime running_time_of(GstStreamrecvSrc *self, uint64_t published_ns) {
    GstClock *clock = gst_element_get_clock(GST_ELEMENT(self));
    if (!clock) return GST_CLOCK_TIME_NONE;
    GstClockTime now = gst_clock_get_time(clock);
    gst_object_unref(clock);
    GstClockTime base = gst_element_get_base_time(GST_ELEMENT(self));
    uint64_t now_ns = monotonic_ns();
    GstClockTime age = now_ns > published_ns ? now_ns - published_ns : 0;
    if (now < base + age) return 0;
    return now - base - age;
}

/* A buffer of `info`'s size from the pool for that format (a new pool when the format changed). */
static GstBuffer *acquire_buffer(GstStreamrecvSrc *self, const GstVideoInfo *info) {
    if (!self->pool || !gst_video_info_is_equal(info, &self->pool_info)) {
        if (self->pool) {
            gst_buffer_pool_set_active(self->pool, FALSE);
            gst_object_unref(self->pool);
        }
        self->pool = gst_video_buffer_pool_new();
        GstStructure *config = gst_buffer_pool_get_config(self->pool);
        GstCaps *caps = gst_video_info_to_caps(info);
        gst_buffer_pool_config_set_params(config, caps, (guint)GST_VIDEO_INFO_SIZE(info), 2, 0);
        gst_caps_unref(caps);
        if (!gst_buffer_pool_set_config(self->pool, config) || !gst_buffer_pool_set_active(self->pool, TRUE)) {
            gst_clear_object(&self->pool);
            return gst_buffer_new_allocate(NULL, GST_VIDEO_INFO_SIZE(info), NULL);
        }
        self->pool_info = *info;
    }
    GstBuffer *buffer = NULL;
    if (gst_buffer_pool_acquire_buffer(self->pool, &buffer, NULL) != GST_FLOW_OK)
        return gst_buffer_new_allocate(NULL, GST_VIDEO_INFO_SIZE(info), NULL);
    return buffer;
}

static void drop_pool(GstStreamrecvSrc *self) {
    if (!self->pool) return;
    gst_buffer_pool_set_active(self->pool, FALSE);
    gst_clear_object(&self->pool);
}

static void drop_target(GstStreamrecvSrc *self) {
    if (self->target_mapped) gst_video_frame_unmap(&self->target_frame);
    self->target_mapped = FALSE;
    gst_clear_buffer(&self->target);
}

/* ring_copy_fn: the frame's planes, row by row, from the slot into a buffer of GStreamer's default layout for its
 * format (one copy). The buffer is kept for a retry of a torn copy. */
static void copy_into_target(void *context, const struct streamrecv_shm_slot *slot, const uint8_t *data) {
    GstStreamrecvSrc *self = context;
    GstVideoInfo info;
    gst_video_info_init(&info);
    self->target_ok = FALSE;
    self->target_problem = "a pixel format or picture size GStreamer has no video format for";
    if (!slot_video_info(slot, &info)) return;
    self->target_problem = "planes that are not the ones its format and size make";
    if (!slot_planes_match(slot, &info)) return;
    self->target_problem = "no buffer for it";
    if (!self->target_mapped || !gst_video_info_is_equal(&info, &self->target_info)) {
        drop_target(self);
        self->target = acquire_buffer(self, &info);
        if (!gst_video_frame_map(&self->target_frame, &info, self->target, GST_MAP_WRITE)) {
            gst_clear_buffer(&self->target);
            return;
        }
        self->target_mapped = TRUE;
        self->target_info = info;
    }
    slot_copy_planes(slot, data, &self->target_frame);
    self->target_ok = TRUE;
}

static GstFlowReturn deliver(GstStreamrecvSrc *self, const struct streamrecv_shm_slot *slot, GstBuffer **out) {
    if (!self->target_ok || !self->target_mapped) {
        drop_target(self);
        GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("frame %" G_GUINT64_FORMAT ": %s", slot->sequence,
                          self->target_problem ? self->target_problem : "not copied"),
                          ("pixel format %u, %ux%u, %u planes", slot->pixel_format, slot->width, slot->height, slot->plane_count));
        return GST_FLOW_NOT_NEGOTIATED;
    }
    GstVideoInfo info = self->target_info;
    gst_video_frame_unmap(&self->target_frame);
    self->target_mapped = FALSE;
    GstBuffer *buffer = g_steal_pointer(&self->target);
    if (!self->have_info || !gst_video_info_is_equal(&info, &self->info)) {
        GstCaps *caps = gst_video_info_to_caps(&info);
        GST_INFO_OBJECT(self, "caps %" GST_PTR_FORMAT, caps);
        gboolean accepted = gst_base_src_set_caps(GST_BASE_SRC(self), caps);
        if (!accepted) {
            gchar *text = gst_caps_to_string(caps);
            GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("downstream does not accept the stream's frames"),
                              ("%s (add videoconvert after streamrecvsrc)", text));
            g_free(text);
        }
        gst_caps_unref(caps);
        if (!accepted) {
            gst_buffer_unref(buffer);
            return GST_FLOW_NOT_NEGOTIATED;
        }
        self->info = info;
        self->have_info = TRUE;
    }
    GST_BUFFER_PTS(buffer) = running_time_of(self, slot->time_published_ns);
    GST_BUFFER_OFFSET(buffer) = slot->sequence;
    GST_BUFFER_OFFSET_END(buffer) = slot->sequence + 1;
    if (self->discont || (slot->flags & STREAMRECV_FRAME_DISCONTINUITY))
        GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DISCONT);
    if (slot->flags & STREAMRECV_FRAME_CORRUPT) GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_CORRUPTED);
    if (!(slot->flags & STREAMRECV_FRAME_KEYFRAME)) GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT);
    /* The visible rectangle, where it lies inside the picture (64-bit sums: a forged one must not wrap). */
    if (slot->visible_width > 0 && slot->visible_height > 0 &&
        (guint64)slot->visible_x + slot->visible_width <= slot->width &&
        (guint64)slot->visible_y + slot->visible_height <= slot->height &&
        (slot->visible_width != slot->width || slot->visible_height != slot->height)) {
        GstVideoCropMeta *crop = gst_buffer_add_video_crop_meta(buffer);
        crop->x = slot->visible_x;
        crop->y = slot->visible_y;
        crop->width = slot->visible_width;
        crop->height = slot->visible_height;
    }
    self->discont = FALSE;
    self->processed++;
    /* For scripts/bench-gstreamer.py: how long after its publication the frame leaves the element. */
    GST_LOG_OBJECT(self, "frame %" G_GUINT64_FORMAT " published %" G_GUINT64_FORMAT " pushed %" G_GUINT64_FORMAT,
                   slot->sequence, slot->time_published_ns, monotonic_ns());
    *out = buffer;
    return GST_FLOW_OK;
}

static GstFlowReturn gst_streamrecv_src_create(GstPushSrc *push, GstBuffer **out) {
    GstStreamrecvSrc *self = GST_STREAMRECV_SRC(push);
    const gchar *path = self->path;
    GstFlowReturn flow = GST_FLOW_FLUSHING;
    unsigned laps = 0;
    struct streamrecv_shm_slot slot;
    while (!is_flushing(self)) {
        if (!self->attached && !attach(self, path)) break;
        int truncated = 0;
        uint32_t seen = ring_wake_word(&self->ring, &truncated);
        uint64_t latest = ring_latest(&self->ring, &truncated);
        uint64_t epoch = ring_epoch(&self->ring, &truncated);
        if (latest == UINT64_MAX && !truncated) {
            /* No writer numbers that far (a frame a nanosecond would take 584 years); the next would wrap to 0. */
            GST_ELEMENT_ERROR(self, STREAM, DECODE, ("%s is not a valid ring: its latest frame number is 2^64 - 1", path),
                              (NULL));
            flow = GST_FLOW_ERROR;
            break;
        }
        uint64_t wanted = self->mode == STREAMRECV_SRC_NEWEST ? MAX(latest, self->next) : self->next;
        enum ring_read_result result =
            truncated ? RING_READ_TRUNCATED : ring_read(&self->ring, wanted, &slot, copy_into_target, self);
        if (result == RING_READ_DONE) {
            if (epoch != self->epoch) self->discont = TRUE; /* the daemon restarted on this object */
            self->epoch = epoch;
            self->next = wanted + 1;
            flow = deliver(self, &slot, out);
            break;
        }
        if (result == RING_READ_INVALID) {
            GST_ELEMENT_ERROR(self, STREAM, DECODE,
                              ("frame %" G_GUINT64_FORMAT " in %s is not a valid frame", wanted, path), (NULL));
            flow = GST_FLOW_ERROR;
            break;
        }
        if (result == RING_READ_LAPPED) {
            /* A real writer laps a reader a few times in a row at most; a forged ring (every slot "being written",
             * its latest moving on) can do it for ever: from the 64th lap, back off (and post fewer QoS messages).
             * A sleep, not a wait on the wake word, which a forger can keep changing. */
            if (++laps > 64) g_usleep(10000);
            uint64_t oldest = ring_oldest_after(&self->ring, wanted, latest);
            if (self->mode == STREAMRECV_SRC_EVERY_FRAME && oldest > wanted) post_qos(self, oldest - wanted);
            self->next = oldest;
            self->discont = TRUE;
            continue;
        }
        uint32_t state = truncated ? STREAMRECV_STATE_REPLACED : ring_state(&self->ring, &truncated);
        if (result == RING_READ_TRUNCATED || truncated || state == STREAMRECV_STATE_REPLACED ||
            ring_replaced(path, &self->ring)) {
            GST_INFO_OBJECT(self, "%s was replaced or truncated: attaching again", path);
            ring_detach(&self->ring);
            self->attached = FALSE;
            continue;
        }
        if (latest + 1 < self->next) {
            /* Numbering started over (a new object, or a writer that began this one again): all it holds. */
            self->next = ring_oldest_after(&self->ring, 0, latest);
            self->discont = TRUE;
            if (self->next <= latest) continue;
        }
        /* Not published yet (or the daemon stopped: it may come back). Wake at its next publish, checking for
         * flushing every 100 ms. */
        ring_wait(&self->ring, seen, 100000000LL);
    }
    return flow;
}

static gboolean gst_streamrecv_src_unlock(GstBaseSrc *base) {
    g_atomic_int_set(&GST_STREAMRECV_SRC(base)->flushing, 1);
    return TRUE;
}

static gboolean gst_streamrecv_src_unlock_stop(GstBaseSrc *base) {
    g_atomic_int_set(&GST_STREAMRECV_SRC(base)->flushing, 0);
    return TRUE;
}

/* Caps are set from the first frame (and each change of format), not negotiated up front. */
static gboolean gst_streamrecv_src_negotiate(GstBaseSrc *base) {
    (void)base;
    return TRUE;
}

/* Frames are copied into buffers of the element's own pool (acquire_buffer), never into one downstream offers: such a
 * pool is left alone rather than activated by GstBaseSrc's default and never used. pipewiresink failed on its first
 * frame with its pool activated so (SIGSEGV, Debian 12's GStreamer 1.22 and PipeWire 0.3.65). */
static gboolean gst_streamrecv_src_decide_allocation(GstBaseSrc *base, GstQuery *query) {
    while (gst_query_get_n_allocation_pools(query) > 0) gst_query_remove_nth_allocation_pool(query, 0);
    return GST_BASE_SRC_CLASS(gst_streamrecv_src_parent_class)->decide_allocation(base, query);
}

static gboolean gst_streamrecv_src_start(GstBaseSrc *base) {
    GstStreamrecvSrc *self = GST_STREAMRECV_SRC(base);
    g_free(self->path);
    self->path = ring_path(self);
    return TRUE;
}

static gboolean gst_streamrecv_src_stop(GstBaseSrc *base) {
    GstStreamrecvSrc *self = GST_STREAMRECV_SRC(base);
    g_clear_pointer(&self->path, g_free);
    if (self->attached) ring_detach(&self->ring);
    self->attached = FALSE;
    self->next = 0;
    self->epoch = 0;
    self->have_info = FALSE;
    drop_target(self);
    drop_pool(self);
    return TRUE;
}

static void gst_streamrecv_src_set_property(GObject *object, guint id, const GValue *value, GParamSpec *spec) {
    GstStreamrecvSrc *self = GST_STREAMRECV_SRC(object);
    switch (id) {
    case PROP_STREAM: g_free(self->stream); self->stream = g_value_dup_string(value); break;
    case PROP_SHM: g_free(self->shm); self->shm = g_value_dup_string(value); break;
    case PROP_MODE: self->mode = (StreamrecvSrcMode)g_value_get_enum(value); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, spec);
    }
}

static void gst_streamrecv_src_get_property(GObject *object, guint id, GValue *value, GParamSpec *spec) {
    GstStreamrecvSrc *self = GST_STREAMRECV_SRC(object);
    switch (id) {
    case PROP_STREAM: g_value_set_string(value, self->stream); break;
    case PROP_SHM: g_value_set_string(value, self->shm); break;
    case PROP_MODE: g_value_set_enum(value, self->mode); break;
    case PROP_DROPPED: g_value_set_uint64(value, self->dropped); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, spec);
    }
}

static void gst_streamrecv_src_finalize(GObject *object) {
    GstStreamrecvSrc *self = GST_STREAMRECV_SRC(object);
    g_free(self->stream);
    g_free(self->shm);
    g_free(self->path);
    drop_target(self);
    G_OBJECT_CLASS(gst_streamrecv_src_parent_class)->finalize(object);
}

static void gst_streamrecv_src_class_init(GstStreamrecvSrcClass *klass) {
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
    GstBaseSrcClass *base_class = GST_BASE_SRC_CLASS(klass);
    object_class->set_property = gst_streamrecv_src_set_property;
    object_class->get_property = gst_streamrecv_src_get_property;
    object_class->finalize = gst_streamrecv_src_finalize;
    GParamFlags flags = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY;
    g_object_class_install_property(object_class, PROP_STREAM,
        g_param_spec_string("stream", "Stream", "Stream name: reads /dev/shm/streamrecv-NAME", "desk", flags));
    g_object_class_install_property(object_class, PROP_SHM,
        g_param_spec_string("shm", "Shared memory object", "Object name or /dev/shm path, instead of stream", NULL,
                            flags));
    g_object_class_install_property(object_class, PROP_MODE,
        g_param_spec_enum("mode", "Mode", "Which frames to deliver", mode_get_type(), STREAMRECV_SRC_EVERY_FRAME,
                          flags));
    g_object_class_install_property(object_class, PROP_DROPPED,
        g_param_spec_uint64("dropped", "Dropped", "Frames overwritten before they could be read (every-frame mode)",
                            0, G_MAXUINT64, 0, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
    gst_element_class_set_static_metadata(element_class, "streamrecvd shared-memory source", "Source/Video",
        "Frames decoded by streamrecvd, read from its shared-memory ring", "streamrecvd developers");
    gst_element_class_add_static_pad_template(element_class, &src_template);
    base_class->unlock = gst_streamrecv_src_unlock;
    base_class->unlock_stop = gst_streamrecv_src_unlock_stop;
    base_class->negotiate = gst_streamrecv_src_negotiate;
    base_class->decide_allocation = gst_streamrecv_src_decide_allocation;
    base_class->start = gst_streamrecv_src_start;
    base_class->stop = gst_streamrecv_src_stop;
    GST_PUSH_SRC_CLASS(klass)->create = gst_streamrecv_src_create;
    GST_DEBUG_CATEGORY_INIT(streamrecvsrc_debug, "streamrecvsrc", 0, "streamrecvd shared-memory source");
}

static void gst_streamrecv_src_init(GstStreamrecvSrc *self) {
    self->stream = g_strdup("desk");
    self->mode = STREAMRECV_SRC_EVERY_FRAME;
    gst_base_src_set_live(GST_BASE_SRC(self), TRUE);
    gst_base_src_set_format(GST_BASE_SRC(self), GST_FORMAT_TIME);
}

static gboolean plugin_init(GstPlugin *plugin) {
    return gst_element_register(plugin, "streamrecvsrc", GST_RANK_NONE, GST_TYPE_STREAMRECV_SRC);
}

#ifndef PACKAGE
#define PACKAGE "streamrecvd"
#endif
GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, streamrecv, "Frames from streamrecvd's shared memory",
                  plugin_init, STREAMRECV_VERSION, GST_LICENSE_UNKNOWN, "streamrecvd", "streamrecvd")
