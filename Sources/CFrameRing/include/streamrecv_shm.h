/*
 * streamrecv_shm.h — the shared-memory ABI of streamrecvd (ABI version 1).
 *
 * This header is the contract between the daemon (writer) and any number of consumers (readers). It compiles
 * standalone (`cc -std=c11 -Wall -Werror`) and is all a C consumer needs; docs/shm-abi.md explains it in prose.
 *
 * Layout of one shm object (/dev/shm/<name>), all integers little-endian, host byte order:
 *
 *   offset 0                       struct streamrecv_shm_header      (STREAMRECV_SHM_HEADER_SIZE bytes)
 *   header.slot_table_offset       struct streamrecv_shm_slot[slot_count]
 *   header.slot_data_offset        slot_count data areas, slot_data_stride bytes apart, page aligned
 *
 * Writer rules: the writer never waits for a reader. To publish frame number S (1, 2, 3, ...) it uses slot
 * (S - 1) % slot_count: seqlock becomes odd, the pixels and fields are written, seqlock becomes even again,
 * then header.latest_sequence = S and header.wake_word is incremented and FUTEX_WAKE'd.
 *
 * Reader rules: validate the header once against the size you mapped (streamrecv_shm_check_header) and use only
 * the validated geometry from then on: anyone who can create an object under /dev/shm can write any header. Read
 * latest_sequence (acquire), pick the slot, read its seqlock (acquire; odd means being written: with frame
 * latest + 1, so a frame before latest is lost, lapped; frame latest itself, wait and retry), copy what
 * you need, then re-read the seqlock (after an acquire fence): a different value means the copy is torn and must
 * be discarded. Check the copied slot (streamrecv_shm_check_slot) before using its plane fields. A slot whose
 * `sequence` is not the one you wanted means you were lapped. To wait, FUTEX_WAIT on wake_word with the value you
 * last saw (shared futex: no PRIVATE flag). Readers map the object read-only and never write to it.
 *
 * The writer holds an open-file-description write lock (F_OFD_SETLK, F_WRLCK) on the whole object for as long as
 * it writes it: a lock a read-only descriptor cannot take. streamrecv_shm_writer_present tells whether one does
 * (a daemon killed with SIGKILL leaves its last state in the header, but never its lock). When the writer moves
 * the stream to a new object (a larger format, damage, a restart with other settings), the old object's state
 * becomes STREAMRECV_STATE_REPLACED: open the name again.
 */
#ifndef STREAMRECV_SHM_H
#define STREAMRECV_SHM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__cplusplus)
#define STREAMRECV_STATIC_ASSERT(condition, message) static_assert(condition, message)
#else
#define STREAMRECV_STATIC_ASSERT(condition, message) _Static_assert(condition, message)
#endif

#define STREAMRECV_SHM_MAGIC 0x3156434552545353ull /* "SSTRECV1" read as little-endian bytes */
#define STREAMRECV_SHM_ABI_VERSION 1u
#define STREAMRECV_SHM_HEADER_SIZE 4096u
#define STREAMRECV_SHM_SLOT_SIZE 256u
#define STREAMRECV_SHM_MAX_PLANES 4u

/* header.stream_state */
enum streamrecv_stream_state {
    STREAMRECV_STATE_STARTING = 0,   /* object created, nothing listening yet */
    STREAMRECV_STATE_WAITING = 1,    /* listening, no sender connected */
    STREAMRECV_STATE_STREAMING = 2,  /* a sender is connected and frames flow */
    STREAMRECV_STATE_DEGRADED = 3,   /* decoding failed repeatedly; waiting for the next keyframe */
    STREAMRECV_STATE_STOPPED = 4,    /* the daemon stopped; the last frames stay readable */
    STREAMRECV_STATE_REPLACED = 5,   /* superseded by a new object under the same name: re-open the name */
};

/* slot.pixel_format: planar or semi-planar layouts, samples of 1 byte (8-bit) or 2 bytes (10/12/16-bit,
 * little-endian). P010 keeps 10-bit samples in the high bits of each 16-bit word, as P010 does. */
enum streamrecv_pixel_format {
    STREAMRECV_PIXEL_FORMAT_NONE = 0,
    STREAMRECV_PIXEL_FORMAT_YUV420P = 1,   /* Y, U, V planes; chroma halved both ways */
    STREAMRECV_PIXEL_FORMAT_NV12 = 2,      /* Y plane, interleaved UV plane; chroma halved both ways */
    STREAMRECV_PIXEL_FORMAT_P010 = 3,      /* as NV12 with 16-bit samples, value << 6 */
    STREAMRECV_PIXEL_FORMAT_YUV422P = 4,
    STREAMRECV_PIXEL_FORMAT_YUV444P = 5,
    STREAMRECV_PIXEL_FORMAT_GRAY8 = 6,
    STREAMRECV_PIXEL_FORMAT_YUV420P10 = 7, /* 16-bit samples holding 10-bit values in the low bits */
    STREAMRECV_PIXEL_FORMAT_YUV422P10 = 8,
    STREAMRECV_PIXEL_FORMAT_YUV444P10 = 9,
    STREAMRECV_PIXEL_FORMAT_GRAY10 = 10,
    STREAMRECV_PIXEL_FORMAT_YUV420P12 = 11,
    STREAMRECV_PIXEL_FORMAT_YUV422P12 = 12,
    STREAMRECV_PIXEL_FORMAT_YUV444P12 = 13,
    STREAMRECV_PIXEL_FORMAT_GBRP = 14,     /* planes G, B, R (H.264/H.265 4:4:4 with identity matrix) */
    STREAMRECV_PIXEL_FORMAT_GBRP10 = 15,
};

/* slot.flags */
#define STREAMRECV_FRAME_KEYFRAME (1u << 0)      /* decoded from a random-access point */
#define STREAMRECV_FRAME_CORRUPT (1u << 1)       /* the decoder reported errors or concealment */
#define STREAMRECV_FRAME_DISCONTINUITY (1u << 2) /* first frame after a gap, reconnect or decoder reset */
#define STREAMRECV_FRAME_HFLIP (1u << 3)         /* display orientation: flip horizontally */
#define STREAMRECV_FRAME_VFLIP (1u << 4)         /* display orientation: flip vertically */

struct streamrecv_shm_header {
    uint64_t magic;                 /* STREAMRECV_SHM_MAGIC once the object is fully initialised */
    uint32_t abi_version;           /* STREAMRECV_SHM_ABI_VERSION */
    uint32_t header_size;           /* STREAMRECV_SHM_HEADER_SIZE */
    uint32_t slot_size;             /* STREAMRECV_SHM_SLOT_SIZE */
    uint32_t slot_count;
    uint64_t slot_table_offset;     /* offset of slot 0's struct streamrecv_shm_slot */
    uint64_t slot_data_offset;      /* offset of slot 0's pixel data */
    uint64_t slot_data_stride;      /* bytes from one slot's pixel data to the next */
    uint64_t slot_data_capacity;    /* usable pixel bytes per slot */
    uint64_t total_size;            /* size of the whole object */
    uint32_t max_width;
    uint32_t max_height;
    uint32_t writer_pid;
    uint32_t stream_state;          /* atomic; enum streamrecv_stream_state */
    uint64_t writer_epoch;          /* atomic; changes every time a writer (re)attaches: a daemon restart */
    uint64_t generation;            /* atomic; changes whenever the frame format (size, pixel format) changes */
    uint64_t latest_sequence;       /* atomic; sequence of the newest complete frame; 0 = none yet */
    uint32_t wake_word;             /* atomic futex word: incremented on every publish and state change */
    uint32_t pts_clock_rate;        /* slot.pts ticks per second (90000 for RTP); 0: pts is the access-unit index */
    char stream_name[64];           /* NUL-terminated */
    char codec[16];                 /* "h264", "h265" or "" */
    /* Counters, written by the writer only (relaxed atomic stores; read them with streamrecv_shm_load_u64). */
    uint64_t bytes_received;
    uint64_t access_units;
    uint64_t frames_decoded;
    uint64_t frames_published;
    uint64_t frames_dropped;
    uint64_t decode_errors;
    uint64_t decoder_recreations;
    uint64_t connections;
    char source_status[128];        /* NUL-terminated; rtsp:// sources: where the client stands ("" otherwise).
                                       Advisory text, rewritten as it changes: read it twice and keep equal reads */
    uint8_t reserved[3712];         /* zero; room for later ABI versions */
};

struct streamrecv_shm_slot {
    uint64_t seqlock;       /* atomic; odd while the writer is writing this slot */
    uint64_t sequence;              /* frame sequence number (1-based) */
    uint64_t generation;            /* header.generation when this frame was written */
    uint32_t pixel_format;          /* enum streamrecv_pixel_format */
    uint32_t plane_count;
    uint32_t width;                 /* picture size with cropping applied */
    uint32_t height;
    uint32_t bits_per_sample;       /* 8, 10, 12 or 16 */
    uint32_t flags;                 /* STREAMRECV_FRAME_* */
    uint64_t plane_offset[STREAMRECV_SHM_MAX_PLANES]; /* from the start of this slot's data */
    uint32_t plane_stride[STREAMRECV_SHM_MAX_PLANES]; /* bytes per row */
    uint32_t plane_width[STREAMRECV_SHM_MAX_PLANES];  /* bytes of pixels per row (<= stride) */
    uint32_t plane_height[STREAMRECV_SHM_MAX_PLANES]; /* rows */
    uint64_t data_size;             /* bytes of pixel data used */
    int64_t pts;                    /* stream timestamp (RTP timestamp or access unit index) */
    uint64_t time_first_byte_ns;    /* CLOCK_MONOTONIC: first byte of the access unit received */
    uint64_t time_au_complete_ns;   /* access unit complete */
    uint64_t time_decoded_ns;       /* decoder returned the frame */
    uint64_t time_published_ns;     /* frame readable in this slot */
    uint32_t sample_aspect_num;     /* 0 = unknown */
    uint32_t sample_aspect_den;
    uint8_t color_range;            /* ISO/IEC 23091-2 style: 0 unspecified, 1 limited (tv), 2 full (pc) */
    uint8_t color_primaries;        /* ISO/IEC 23091-2 code points */
    uint8_t color_transfer;
    uint8_t color_matrix;
    int32_t rotation;               /* display rotation anticlockwise, in 1/65536 of a full turn */
    /* The picture the stream asks to display, inside width x height: libavcodec cannot always apply an
     * unaligned left/top crop, so the published frame may be wider; crop to this rectangle to display it. */
    uint32_t visible_x;
    uint32_t visible_y;
    uint32_t visible_width;
    uint32_t visible_height;
    uint8_t reserved[48];           /* zero */
};

STREAMRECV_STATIC_ASSERT(sizeof(struct streamrecv_shm_header) == STREAMRECV_SHM_HEADER_SIZE, "header size");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_header, slot_count) == 20, "slot_count offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_header, slot_table_offset) == 24, "slot_table_offset offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_header, total_size) == 56, "total_size offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_header, stream_state) == 76, "stream_state offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_header, writer_epoch) == 80, "writer_epoch offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_header, generation) == 88, "generation offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_header, latest_sequence) == 96, "latest_sequence offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_header, wake_word) == 104, "wake_word offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_header, stream_name) == 112, "stream_name offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_header, codec) == 176, "codec offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_header, bytes_received) == 192, "counters offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_header, source_status) == 256, "source_status offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_header, reserved) == 384, "reserved offset");
STREAMRECV_STATIC_ASSERT(sizeof(struct streamrecv_shm_slot) == STREAMRECV_SHM_SLOT_SIZE, "slot size");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_slot, pixel_format) == 24, "pixel_format offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_slot, plane_offset) == 48, "plane_offset offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_slot, plane_stride) == 80, "plane_stride offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_slot, plane_width) == 96, "plane_width offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_slot, plane_height) == 112, "plane_height offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_slot, data_size) == 128, "data_size offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_slot, pts) == 136, "pts offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_slot, time_first_byte_ns) == 144, "timestamps offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_slot, sample_aspect_num) == 176, "sample aspect offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_slot, color_range) == 184, "colour offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_slot, rotation) == 188, "rotation offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_slot, visible_x) == 192, "visible rectangle offset");
STREAMRECV_STATIC_ASSERT(offsetof(struct streamrecv_shm_slot, reserved) == 208, "reserved offset");
#if defined(__GCC_ATOMIC_LLONG_LOCK_FREE) && __GCC_ATOMIC_LLONG_LOCK_FREE != 2
#error "streamrecv_shm.h needs lock-free 64-bit atomics: the counters and seqlocks are shared between processes"
#endif

/* ---- Inline helpers (no library to link). Fields marked atomic are accessed with these, which use the
 * GCC/Clang __atomic builtins, so the header works from C, C++ and Swift alike. ---- */

static inline uint64_t streamrecv_shm_load_u64(const uint64_t *field) {
    return __atomic_load_n(field, __ATOMIC_ACQUIRE);
}

static inline uint32_t streamrecv_shm_load_u32(const uint32_t *field) {
    return __atomic_load_n(field, __ATOMIC_ACQUIRE);
}

static inline const struct streamrecv_shm_slot *
streamrecv_shm_slot_at(const struct streamrecv_shm_header *header, uint32_t index) {
    return (const struct streamrecv_shm_slot *)((const char *)header + header->slot_table_offset +
                                               (uint64_t)index * header->slot_size);
}

static inline const uint8_t *
streamrecv_shm_slot_data(const struct streamrecv_shm_header *header, uint32_t index) {
    return (const uint8_t *)header + header->slot_data_offset + (uint64_t)index * header->slot_data_stride;
}

/* Begins a seqlock read of `slot`: returns the even value to pass to streamrecv_shm_read_end, or 0 while the
 * writer is inside the slot (odd value) or it was never written. */
static inline uint64_t streamrecv_shm_read_begin(const struct streamrecv_shm_slot *slot) {
    uint64_t value = __atomic_load_n(&slot->seqlock, __ATOMIC_ACQUIRE);
    return (value & 1u) ? 0 : value;
}

/* Ends a seqlock read: non-zero when everything copied since streamrecv_shm_read_begin is consistent. */
static inline int streamrecv_shm_read_end(const struct streamrecv_shm_slot *slot, uint64_t begin) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return begin != 0 && __atomic_load_n(&slot->seqlock, __ATOMIC_RELAXED) == begin;
}

/* ---- Validation: a reader keeps these values and never reads the header's geometry again. ---- */

struct streamrecv_shm_geometry {
    uint32_t slot_count;
    uint32_t reserved;
    uint64_t slot_table_offset;
    uint64_t slot_data_offset;
    uint64_t slot_data_stride;
    uint64_t slot_data_capacity;
    uint64_t total_size;
};

/* Checks the header of an object mapped with `mapped_size` bytes. Returns NULL and fills `geometry` when it
 * describes a ring that lies inside the mapping; otherwise a short reason. Each field is read once. */
static inline const char *streamrecv_shm_check_header(const struct streamrecv_shm_header *header, uint64_t mapped_size,
                                                      struct streamrecv_shm_geometry *geometry) {
    if (mapped_size < STREAMRECV_SHM_HEADER_SIZE) return "smaller than a header";
    if (__atomic_load_n(&header->magic, __ATOMIC_ACQUIRE) != STREAMRECV_SHM_MAGIC) return "no magic (not a ring, or not initialised yet)";
    if (__atomic_load_n(&header->abi_version, __ATOMIC_RELAXED) != STREAMRECV_SHM_ABI_VERSION) return "another ABI version";
    if (__atomic_load_n(&header->header_size, __ATOMIC_RELAXED) != STREAMRECV_SHM_HEADER_SIZE ||
        __atomic_load_n(&header->slot_size, __ATOMIC_RELAXED) != STREAMRECV_SHM_SLOT_SIZE) return "unexpected header or slot size";
    struct streamrecv_shm_geometry g;
    g.slot_count = __atomic_load_n(&header->slot_count, __ATOMIC_RELAXED);
    g.reserved = 0;
    g.slot_table_offset = __atomic_load_n(&header->slot_table_offset, __ATOMIC_RELAXED);
    g.slot_data_offset = __atomic_load_n(&header->slot_data_offset, __ATOMIC_RELAXED);
    g.slot_data_stride = __atomic_load_n(&header->slot_data_stride, __ATOMIC_RELAXED);
    g.slot_data_capacity = __atomic_load_n(&header->slot_data_capacity, __ATOMIC_RELAXED);
    g.total_size = __atomic_load_n(&header->total_size, __ATOMIC_RELAXED);
    uint64_t table_bytes, data_bytes, table_end, data_end;
    if (g.slot_count == 0 || g.slot_count > (1u << 20)) return "slot count out of range";
    if (g.slot_table_offset < STREAMRECV_SHM_HEADER_SIZE || g.slot_table_offset % 64 != 0) return "slot table offset out of range";
    if (g.slot_data_capacity > g.slot_data_stride) return "slot capacity larger than its stride";
    if (__builtin_mul_overflow((uint64_t)g.slot_count, (uint64_t)STREAMRECV_SHM_SLOT_SIZE, &table_bytes) ||
        __builtin_add_overflow(g.slot_table_offset, table_bytes, &table_end) || table_end > g.slot_data_offset)
        return "slot table overlaps the data";
    if (__builtin_mul_overflow((uint64_t)g.slot_count, g.slot_data_stride, &data_bytes) ||
        __builtin_add_overflow(g.slot_data_offset, data_bytes, &data_end) || data_end > g.total_size)
        return "slot data beyond total_size";
    if (g.total_size > mapped_size) return "total_size larger than the object";
    *geometry = g;
    return NULL;
}

/* The slot `index` (< geometry->slot_count) and its pixel data, from validated geometry. */
static inline const struct streamrecv_shm_slot *
streamrecv_shm_slot_in(const void *base, const struct streamrecv_shm_geometry *geometry, uint32_t index) {
    return (const struct streamrecv_shm_slot *)((const char *)base + geometry->slot_table_offset +
                                               (uint64_t)index * STREAMRECV_SHM_SLOT_SIZE);
}

static inline const uint8_t *
streamrecv_shm_data_in(const void *base, const struct streamrecv_shm_geometry *geometry, uint32_t index) {
    return (const uint8_t *)base + geometry->slot_data_offset + (uint64_t)index * geometry->slot_data_stride;
}

/* Checks a slot copied out under its seqlock: every plane it describes lies inside data_size, which lies inside
 * the slot's capacity. Returns NULL when consistent, otherwise a short reason. */
static inline const char *streamrecv_shm_check_slot(const struct streamrecv_shm_slot *copy,
                                                    const struct streamrecv_shm_geometry *geometry) {
    if (copy->plane_count == 0 || copy->plane_count > STREAMRECV_SHM_MAX_PLANES) return "plane count out of range";
    if (copy->width == 0 || copy->height == 0 || copy->width > 65535 || copy->height > 65535) return "picture size out of range";
    if (copy->data_size > geometry->slot_data_capacity) return "data larger than the slot";
    for (uint32_t plane = 0; plane < copy->plane_count; plane++) {
        uint64_t rows = copy->plane_height[plane], stride = copy->plane_stride[plane], width = copy->plane_width[plane];
        uint64_t last_row, end;
        if (rows == 0 || width == 0 || width > stride) return "plane rows out of range";
        if (__builtin_mul_overflow(stride, rows - 1, &last_row) ||
            __builtin_add_overflow(last_row, copy->plane_offset[plane], &end) ||
            __builtin_add_overflow(end, width, &end) || end > copy->data_size) return "plane outside the data";
    }
    return NULL;
}

/* ---- Borrowing a frame: looking at its planes where they lie, without copying them out. ----
 *
 *   struct streamrecv_shm_borrowed frame;
 *   if (streamrecv_shm_borrow(base, &geometry, sequence, &frame) == STREAMRECV_SHM_FRAME) {
 *       ... read the planes at frame.pixels + frame.slot.plane_offset[i] ...
 *       if (!streamrecv_shm_borrow_held(&frame)) ... the writer reused the slot meanwhile: discard the result ...
 *   }
 *
 * The writer never waits for a reader, so it may overwrite the slot while it is borrowed: whatever was computed
 * from the pixels counts only if streamrecv_shm_borrow_held says so afterwards (a seqlock read spanning the
 * borrow). Borrow for as long as the work takes, not longer; copy what you keep. The slot's fields in `frame`
 * are a checked copy and stay valid. */
struct streamrecv_shm_borrowed {
    struct streamrecv_shm_slot slot;          /* the slot's fields, copied and checked */
    const uint8_t *pixels;                    /* slot.data_size bytes of planes, in the mapping */
    const struct streamrecv_shm_slot *in_ring;
    uint64_t begin;                           /* the seqlock when the fields were copied */
};

enum streamrecv_shm_read_result {
    STREAMRECV_SHM_FRAME = 1,        /* the frame is borrowed (or copied) */
    STREAMRECV_SHM_NOT_YET = 0,      /* not published yet, or still being written: wait on the futex */
    STREAMRECV_SHM_LAPPED = -1,      /* overwritten, or older than this object: read from the oldest held */
    STREAMRECV_SHM_OVERWRITING = -2, /* being overwritten now: the next frame is whole */
    STREAMRECV_SHM_INVALID = -3,     /* the slot is not a valid frame (a damaged or forged ring) */
};

/* Borrows frame `sequence` of a ring mapped at `base` with validated `geometry`. A slot the writer tears while
 * its fields are copied is tried again, up to 64 times (only a forged ring tears more: STREAMRECV_SHM_NOT_YET). */
static inline int streamrecv_shm_borrow(const void *base, const struct streamrecv_shm_geometry *geometry,
                                        uint64_t sequence, struct streamrecv_shm_borrowed *frame) {
    const struct streamrecv_shm_header *header = (const struct streamrecv_shm_header *)base;
    if (sequence == 0) return STREAMRECV_SHM_LAPPED;
    uint32_t index = (uint32_t)((sequence - 1) % geometry->slot_count);
    const struct streamrecv_shm_slot *slot = streamrecv_shm_slot_in(base, geometry, index);
    for (int torn = 0; torn < 64; torn++) {
        uint64_t latest = streamrecv_shm_load_u64(&header->latest_sequence);
        if (sequence > latest) return STREAMRECV_SHM_NOT_YET;
        /* Never written while latest says the frame exists: this object began after it. */
        if (streamrecv_shm_load_u64(&slot->seqlock) == 0) return STREAMRECV_SHM_LAPPED;
        uint64_t begin = streamrecv_shm_read_begin(slot);
        /* The writer only ever fills a slot with frame latest + 1: a frame before latest is being overwritten;
         * frame latest itself, wait for the writer's wake-up (or it died mid-write). */
        if (begin == 0) return sequence < latest ? STREAMRECV_SHM_OVERWRITING : STREAMRECV_SHM_NOT_YET;
        memcpy(&frame->slot, slot, sizeof frame->slot);
        if (!streamrecv_shm_read_end(slot, begin)) continue;
        if (frame->slot.sequence != sequence) return STREAMRECV_SHM_LAPPED;
        if (streamrecv_shm_check_slot(&frame->slot, geometry) != NULL) return STREAMRECV_SHM_INVALID;
        frame->pixels = streamrecv_shm_data_in(base, geometry, index);
        frame->in_ring = slot;
        frame->begin = begin;
        return STREAMRECV_SHM_FRAME;
    }
    return STREAMRECV_SHM_NOT_YET;
}

/* Non-zero when the writer has not touched the borrowed slot since streamrecv_shm_borrow: everything read from
 * `pixels` in between is the frame's. Ordered after those reads (an acquire fence). */
static inline int streamrecv_shm_borrow_held(const struct streamrecv_shm_borrowed *frame) {
    return streamrecv_shm_read_end(frame->in_ring, frame->begin);
}

/* Copies frame `sequence` out: its fields into `frame->slot` and its planes into `pixels` (at least
 * geometry->slot_data_capacity bytes), retrying a copy the writer tore. Same results as streamrecv_shm_borrow;
 * on STREAMRECV_SHM_FRAME, frame->pixels points at `pixels`. */
static inline int streamrecv_shm_copy(const void *base, const struct streamrecv_shm_geometry *geometry,
                                      uint64_t sequence, struct streamrecv_shm_borrowed *frame, uint8_t *pixels) {
    for (int torn = 0; torn < 64; torn++) {
        int result = streamrecv_shm_borrow(base, geometry, sequence, frame);
        if (result != STREAMRECV_SHM_FRAME) return result;
        memcpy(pixels, frame->pixels, frame->slot.data_size);
        if (streamrecv_shm_borrow_held(frame)) {
            frame->pixels = pixels;
            return STREAMRECV_SHM_FRAME;
        }
    }
    return STREAMRECV_SHM_NOT_YET;
}

/* ---- Writer helpers (used by streamrecvd; a reader never calls these). ---- */

static inline void streamrecv_shm_store_u64(uint64_t *field, uint64_t value) {
    __atomic_store_n(field, value, __ATOMIC_RELEASE);
}

static inline void streamrecv_shm_store_u32(uint32_t *field, uint32_t value) {
    __atomic_store_n(field, value, __ATOMIC_RELEASE);
}

static inline void streamrecv_shm_add_u64(uint64_t *field, uint64_t value) {
    __atomic_fetch_add(field, value, __ATOMIC_RELAXED);
}

/* Makes the slot's seqlock odd: readers now discard what they copy from it. */
static inline void streamrecv_shm_write_begin(struct streamrecv_shm_slot *slot) {
    uint64_t value = __atomic_load_n(&slot->seqlock, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->seqlock, (value | 1u), __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

/* Makes the seqlock even again (and different from before the write). */
static inline void streamrecv_shm_write_end(struct streamrecv_shm_slot *slot) {
    uint64_t value = __atomic_load_n(&slot->seqlock, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->seqlock, value + 1u, __ATOMIC_RELEASE);
}

#ifdef __linux__
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if !defined(__cplusplus) && !defined(__USE_MISC)
/* unistd.h declares syscall() only outside strict ISO C; this is glibc's declaration. */
extern long syscall(long number, ...);
#endif

/* Waits until header->wake_word differs from `seen`, or `timeout_ns` passes (negative: no limit).
 * Returns 0 when woken or the word already differs, ETIMEDOUT, or EINTR. */
static inline int streamrecv_shm_wait(const struct streamrecv_shm_header *header, uint32_t seen, int64_t timeout_ns) {
    struct timespec timeout = { (time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000) };
    long result = syscall(SYS_futex, &header->wake_word, FUTEX_WAIT, seen, timeout_ns < 0 ? NULL : &timeout, NULL, 0);
    if (result == 0 || errno == EAGAIN) return 0;
    return errno;
}

#ifndef F_OFD_GETLK
#define F_OFD_GETLK 36 /* Linux 3.15; glibc names them only with _GNU_SOURCE */
#endif
#ifndef F_OFD_SETLK
#define F_OFD_SETLK 37
#endif

/* 1 when a writer holds the object open by `descriptor` (any access mode), 0 when none does, -1 with errno set
 * when it cannot be told. */
static inline int streamrecv_shm_writer_present(int descriptor) {
    struct flock probe = { 0 };
    probe.l_type = F_RDLCK;
    probe.l_whence = SEEK_SET;
    if (fcntl(descriptor, F_OFD_GETLK, &probe) != 0) return -1;
    return probe.l_type == F_WRLCK ? 1 : 0;
}

/* Writer: takes the writer's lock on the object open read-write by `descriptor`, without waiting. Returns 0, or -1
 * with errno EAGAIN when another writer holds it. */
static inline int streamrecv_shm_lock_for_writing(int descriptor) {
    struct flock lock = { 0 };
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    return fcntl(descriptor, F_OFD_SETLK, &lock);
}

/* Writer: bumps the futex word and wakes every waiting reader (shared futex: readers are other processes). */
static inline void streamrecv_shm_wake_all(struct streamrecv_shm_header *header) {
    __atomic_fetch_add(&header->wake_word, 1u, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &header->wake_word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
#endif

#ifdef __cplusplus
}
#endif
#endif /* STREAMRECV_SHM_H */
