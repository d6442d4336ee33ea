/* Checks pipewire/camera-format.c: its one-block layout against GStreamer's default layout for the same format
 * and size (gst_video_info_set_format), which pipewiresrc and other one-block consumers assume (every ring pixel
 * format PipeWire has a name for, every size from 1x1 to 40x40 and some large and odd ones), and the frame rates it
 * reads from arrival times. Prints each disagreement; exit status 1 if there is one. Built and run by
 * PipeWireCameraTests:
 *     cc camera-format-check.c ../pipewire/camera-format.c -I../pipewire -I../Sources/CFrameRing/include \
 *        $(pkg-config --cflags --libs libpipewire-0.3 gstreamer-video-1.0) */
#include "camera-format.h"

#include <gst/video/video.h>
#include <stdio.h>
#include <string.h>

static void fill_slot(struct streamrecv_shm_slot *slot, uint32_t pixel_format, uint32_t width, uint32_t height) {
    /* What the daemon publishes: planes of whole samples, chroma rounded up. */
    static const struct { uint32_t format, planes, bytes, x_shift, y_shift, interleaved, rgb; } shapes[] = {
        { STREAMRECV_PIXEL_FORMAT_YUV420P, 3, 1, 1, 1, 0, 0 }, { STREAMRECV_PIXEL_FORMAT_NV12, 2, 1, 1, 1, 1, 0 },
        { STREAMRECV_PIXEL_FORMAT_P010, 2, 2, 1, 1, 1, 0 }, { STREAMRECV_PIXEL_FORMAT_YUV422P, 3, 1, 1, 0, 0, 0 },
        { STREAMRECV_PIXEL_FORMAT_YUV444P, 3, 1, 0, 0, 0, 0 }, { STREAMRECV_PIXEL_FORMAT_GRAY8, 1, 1, 0, 0, 0, 0 },
        { STREAMRECV_PIXEL_FORMAT_YUV420P10, 3, 2, 1, 1, 0, 0 }, { STREAMRECV_PIXEL_FORMAT_YUV422P10, 3, 2, 1, 0, 0, 0 },
        { STREAMRECV_PIXEL_FORMAT_YUV444P10, 3, 2, 0, 0, 0, 0 }, { STREAMRECV_PIXEL_FORMAT_YUV420P12, 3, 2, 1, 1, 0, 0 },
        { STREAMRECV_PIXEL_FORMAT_YUV422P12, 3, 2, 1, 0, 0, 0 }, { STREAMRECV_PIXEL_FORMAT_YUV444P12, 3, 2, 0, 0, 0, 0 },
        { STREAMRECV_PIXEL_FORMAT_GBRP, 3, 1, 0, 0, 0, 1 }, { STREAMRECV_PIXEL_FORMAT_GBRP10, 3, 2, 0, 0, 0, 1 },
    };
    memset(slot, 0, sizeof *slot);
    slot->pixel_format = pixel_format;
    slot->width = width;
    slot->height = height;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        if (shapes[i].format != pixel_format) continue;
        slot->plane_count = shapes[i].planes;
        uint64_t offset = 0;
        for (uint32_t plane = 0; plane < shapes[i].planes; plane++) {
            int chroma = plane > 0 && !shapes[i].rgb;
            uint32_t columns = chroma ? (width + (1u << shapes[i].x_shift) - 1) >> shapes[i].x_shift : width;
            slot->plane_width[plane] = columns * (chroma && shapes[i].interleaved ? 2 : 1) * shapes[i].bytes;
            slot->plane_height[plane] = chroma ? (height + (1u << shapes[i].y_shift) - 1) >> shapes[i].y_shift : height;
            slot->plane_stride[plane] = slot->plane_width[plane] + 64;
            slot->plane_offset[plane] = offset;
            offset += (uint64_t)slot->plane_stride[plane] * slot->plane_height[plane];
        }
    }
}

/* The rate camera_rate_from_times gives for `count` arrivals `interval_ns` apart, each late by `jitter_ns` times
 * (i % 3 - 1). */
static int rate_is(uint64_t interval_ns, int64_t jitter_ns, size_t count, uint32_t num, uint32_t den) {
    uint64_t times[16];
    for (size_t i = 0; i < count; i++) times[i] = 1000000000ULL + i * interval_ns + (uint64_t)(jitter_ns * ((int64_t)(i % 3) - 1));
    uint32_t got_num, got_den;
    camera_rate_from_times(times, count, &got_num, &got_den);
    if (got_num == num && got_den == den) return 1;
    printf("rate of %zu arrivals %llu ns apart (jitter %lld): %u/%u, expected %u/%u\n", count,
           (unsigned long long)interval_ns, (long long)jitter_ns, got_num, got_den, num, den);
    return 0;
}

static int rates_are_right(void) {
    return rate_is(33333333, 0, 8, 30, 1) & rate_is(33366667, 0, 8, 30000, 1001) & rate_is(40000000, 2000000, 8, 25, 1) &
           rate_is(16683350, 0, 8, 60000, 1001) & rate_is(41708333, 0, 8, 24000, 1001) & rate_is(100000000, 0, 5, 10, 1) &
           rate_is(100000000, 9000000, 8, 10, 1) & rate_is(33333333, 0, 1, 0, 1) & rate_is(500000, 0, 8, 0, 1) &
           rate_is(20000000000ULL, 0, 3, 0, 1) & rate_is(83333333, 0, 4, 12, 1);
}

int main(void) {
    static const uint32_t formats[] = {
        STREAMRECV_PIXEL_FORMAT_YUV420P, STREAMRECV_PIXEL_FORMAT_NV12, STREAMRECV_PIXEL_FORMAT_P010,
        STREAMRECV_PIXEL_FORMAT_YUV422P, STREAMRECV_PIXEL_FORMAT_YUV444P, STREAMRECV_PIXEL_FORMAT_GRAY8,
        STREAMRECV_PIXEL_FORMAT_YUV420P10, STREAMRECV_PIXEL_FORMAT_YUV422P10, STREAMRECV_PIXEL_FORMAT_YUV444P10,
        STREAMRECV_PIXEL_FORMAT_YUV420P12, STREAMRECV_PIXEL_FORMAT_YUV422P12, STREAMRECV_PIXEL_FORMAT_YUV444P12,
        STREAMRECV_PIXEL_FORMAT_GBRP, STREAMRECV_PIXEL_FORMAT_GBRP10,
    };
    static const uint32_t large[][2] = { { 1920, 1080 }, { 1921, 1081 }, { 3840, 2160 }, { 1366, 768 }, { 4095, 2161 } };
    gst_init(NULL, NULL);
    unsigned checked = 0, wrong = 0;
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        for (uint32_t i = 0; i < 40 * 40 + 5; i++) {
            uint32_t width = i < 1600 ? i % 40 + 1 : large[i - 1600][0];
            uint32_t height = i < 1600 ? i / 40 + 1 : large[i - 1600][1];
            struct streamrecv_shm_slot slot;
            fill_slot(&slot, formats[f], width, height);
            struct camera_format format;
            if (camera_format_from_slot(&slot, &format) != 0) {
                printf("format %u %ux%u: refused\n", formats[f], width, height);
                wrong++;
                continue;
            }
            GstVideoInfo info;
            GstVideoFormat gst_format = gst_video_format_from_string(camera_spa_format_name(format.spa_format));
            if (gst_format == GST_VIDEO_FORMAT_UNKNOWN || !gst_video_info_set_format(&info, gst_format, width, height)) {
                printf("%s: GStreamer does not know it\n", camera_spa_format_name(format.spa_format));
                return 1;
            }
            int same = GST_VIDEO_INFO_N_PLANES(&info) == format.plane_count && GST_VIDEO_INFO_SIZE(&info) == format.size;
            for (uint32_t plane = 0; same && plane < format.plane_count; plane++)
                same = GST_VIDEO_INFO_PLANE_STRIDE(&info, plane) == (gint)format.stride[plane] &&
                       GST_VIDEO_INFO_PLANE_OFFSET(&info, plane) == format.offset[plane];
            checked++;
            if (!same) {
                wrong++;
                if (wrong <= 20)
                    printf("%s %ux%u: ours size %u strides %u/%u/%u offsets %u/%u/%u, GStreamer's size %zu strides "
                           "%d/%d/%d offsets %zu/%zu/%zu\n", camera_spa_format_name(format.spa_format), width, height,
                           format.size, format.stride[0], format.stride[1], format.stride[2], format.offset[0],
                           format.offset[1], format.offset[2], GST_VIDEO_INFO_SIZE(&info),
                           GST_VIDEO_INFO_PLANE_STRIDE(&info, 0), GST_VIDEO_INFO_PLANE_STRIDE(&info, 1),
                           GST_VIDEO_INFO_PLANE_STRIDE(&info, 2), GST_VIDEO_INFO_PLANE_OFFSET(&info, 0),
                           GST_VIDEO_INFO_PLANE_OFFSET(&info, 1), GST_VIDEO_INFO_PLANE_OFFSET(&info, 2));
            }
        }
    }
    printf("%u layouts checked, %u differ from GStreamer's\n", checked, wrong);
    int rates = rates_are_right();
    printf("frame rates: %s\n", rates ? "right" : "wrong");
    return wrong == 0 && rates ? 0 : 1;
}
