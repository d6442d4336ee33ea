/* A PipeWire camera consumer written against libpipewire, as OBS or a browser is: it links to the node named on
 * the command line (through the session manager), takes whatever raw video format the node offers, follows
 * renegotiation, and prints one JSON line per frame: format, size, stride, the md5 of the chunk's bytes, the
 * header metadata's sequence and flags, and when it arrived (CLOCK_MONOTONIC ns). For PipeWireCameraTests and
 * scripts/bench-camera.py (pipewiresrc of Debian 12's PipeWire 0.3.65 does not pass a new format on as caps).
 *
 *     pipewire-camera-consumer NODE_NAME FRAMES SECONDS [nohash]
 *
 * FRAMES -1: until SECONDS. `nohash` leaves the md5 out (a benchmark's consumer should cost next to nothing).
 * Built by the tests: cc pipewire-camera-consumer.c $(pkg-config --cflags --libs libpipewire-0.3) -lcrypto */
#include <openssl/evp.h>
#include <pipewire/pipewire.h>
#include <spa/param/video/format-utils.h>
#include <spa/debug/types.h>
#include <spa/param/video/type-info.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct consumer {
    struct pw_main_loop *loop;
    struct pw_stream *stream;
    struct spa_video_info_raw format;
    long frames_left;
    int hash;
};

static uint64_t now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

static void take(struct consumer *consumer, struct pw_buffer *buffer);

/* Every buffer the cycle brought, in order (a cycle can bring more than one). */
static void on_process(void *data) {
    struct consumer *consumer = data;
    struct pw_buffer *buffer;
    while ((buffer = pw_stream_dequeue_buffer(consumer->stream)) != NULL) take(consumer, buffer);
}

static void take(struct consumer *consumer, struct pw_buffer *buffer) {
    uint64_t arrived = now_ns();
    struct spa_buffer *spa = buffer->buffer;
    struct spa_data *block = &spa->datas[0];
    if (block->data != NULL && block->chunk->size > 0 && consumer->frames_left != 0) {
        unsigned char digest[16] = { 0 };
        unsigned int length = 0;
        if (consumer->hash)
            EVP_Digest((const uint8_t *)block->data + block->chunk->offset, block->chunk->size, digest, &length,
                       EVP_md5(), NULL);
        char hex[33];
        for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
        struct spa_meta_header *header = spa_buffer_find_meta_data(spa, SPA_META_Header, sizeof *header);
        const char *name = spa_debug_type_find_short_name(spa_type_video_format, consumer->format.format);
        printf("{\"format\": \"%s\", \"width\": %u, \"height\": %u, \"stride\": %d, \"size\": %u, \"md5\": \"%s\", "
               "\"seq\": %llu, \"pts\": %lld, \"flags\": %u, \"corrupted\": %d, \"arrived_ns\": %llu, \"rate\": \"%u/%u\"}\n",
               name ? name : "?", consumer->format.size.width, consumer->format.size.height, block->chunk->stride,
               block->chunk->size, hex, header ? (unsigned long long)header->seq : 0ULL, header ? (long long)header->pts : -1LL, header ? header->flags : 0u,
               (block->chunk->flags & SPA_CHUNK_FLAG_CORRUPTED) != 0, (unsigned long long)arrived,
               consumer->format.framerate.num, consumer->format.framerate.denom);
        fflush(stdout);
        if (consumer->frames_left > 0 && --consumer->frames_left == 0) pw_main_loop_quit(consumer->loop);
    }
    pw_stream_queue_buffer(consumer->stream, buffer);
}

static void on_param_changed(void *data, uint32_t id, const struct spa_pod *param) {
    struct consumer *consumer = data;
    if (param == NULL || id != SPA_PARAM_Format) return;
    if (spa_format_video_raw_parse(param, &consumer->format) < 0) return;
    uint8_t storage[1024];
    struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(storage, sizeof storage);
    const struct spa_pod *params[2];
    params[0] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamBuffers, SPA_PARAM_Buffers,
        SPA_PARAM_BUFFERS_dataType, SPA_POD_CHOICE_FLAGS_Int((1 << SPA_DATA_MemFd) | (1 << SPA_DATA_MemPtr)));
    params[1] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_Header),
        SPA_PARAM_META_size, SPA_POD_Int(sizeof(struct spa_meta_header)));
    pw_stream_update_params(consumer->stream, params, 2);
    fprintf(stderr, "consumer: format %ux%u\n", consumer->format.size.width, consumer->format.size.height);
}

static void on_state_changed(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *error) {
    struct consumer *consumer = data;
    (void)old;
    fprintf(stderr, "consumer: %s%s%s\n", pw_stream_state_as_string(state), error ? ": " : "", error ? error : "");
    if (state == PW_STREAM_STATE_ERROR || state == PW_STREAM_STATE_UNCONNECTED) pw_main_loop_quit(consumer->loop);
}

static const struct pw_stream_events events = {
    PW_VERSION_STREAM_EVENTS,
    .state_changed = on_state_changed,
    .param_changed = on_param_changed,
    .process = on_process,
};

static void on_timeout(void *data, uint64_t expirations) {
    (void)expirations;
    pw_main_loop_quit(((struct consumer *)data)->loop);
}

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && strcmp(argv[4], "nohash") == 0)) {
        fprintf(stderr, "usage: pipewire-camera-consumer NODE_NAME FRAMES SECONDS [nohash]\n");
        return 2;
    }
    pw_init(&argc, &argv);
    struct consumer consumer = { .frames_left = atol(argv[2]), .hash = argc == 4 };
    consumer.loop = pw_main_loop_new(NULL);
    struct spa_source *timer = pw_loop_add_timer(pw_main_loop_get_loop(consumer.loop), on_timeout, &consumer);
    struct timespec timeout = { .tv_sec = atol(argv[3]) };
    pw_loop_update_timer(pw_main_loop_get_loop(consumer.loop), timer, &timeout, NULL, false);
    consumer.stream = pw_stream_new_simple(pw_main_loop_get_loop(consumer.loop), "camera-consumer",
        pw_properties_new(PW_KEY_MEDIA_TYPE, "Video", PW_KEY_MEDIA_CATEGORY, "Capture", PW_KEY_MEDIA_ROLE, "Camera",
                          PW_KEY_TARGET_OBJECT, argv[1], NULL), &events, &consumer);
    if (consumer.stream == NULL) {
        fprintf(stderr, "consumer: cannot reach PipeWire\n");
        return 1;
    }
    uint8_t storage[1024];
    struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(storage, sizeof storage);
    const struct spa_pod *params[1];
    params[0] = spa_pod_builder_add_object(&builder, SPA_TYPE_OBJECT_Format, SPA_PARAM_EnumFormat,
        SPA_FORMAT_mediaType, SPA_POD_Id(SPA_MEDIA_TYPE_video),
        SPA_FORMAT_mediaSubtype, SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw),
        SPA_FORMAT_VIDEO_format, SPA_POD_CHOICE_ENUM_Id(5, SPA_VIDEO_FORMAT_NV12, SPA_VIDEO_FORMAT_NV12,
                                                        SPA_VIDEO_FORMAT_I420, SPA_VIDEO_FORMAT_P010_10LE,
                                                        SPA_VIDEO_FORMAT_Y444),
        SPA_FORMAT_VIDEO_size, SPA_POD_CHOICE_RANGE_Rectangle(&SPA_RECTANGLE(320, 240), &SPA_RECTANGLE(1, 1),
                                                              &SPA_RECTANGLE(16384, 16384)),
        SPA_FORMAT_VIDEO_framerate, SPA_POD_CHOICE_RANGE_Fraction(&SPA_FRACTION(30, 1), &SPA_FRACTION(0, 1),
                                                                  &SPA_FRACTION(1000, 1)));
    pw_stream_connect(consumer.stream, PW_DIRECTION_INPUT, PW_ID_ANY,
                      PW_STREAM_FLAG_AUTOCONNECT | PW_STREAM_FLAG_MAP_BUFFERS, params, 1);
    pw_main_loop_run(consumer.loop);
    pw_stream_destroy(consumer.stream);
    pw_main_loop_destroy(consumer.loop);
    pw_deinit();
    return 0;
}
