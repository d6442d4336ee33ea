/* See slot-video.h. */
#include "slot-video.h"

#include <string.h>

static GstVideoFormat video_format(uint32_t format) {
    switch (format) {
    case STREAMRECV_PIXEL_FORMAT_YUV420P: return GST_VIDEO_FORMAT_I420;
    case STREAMRECV_PIXEL_FORMAT_NV12: return GST_VIDEO_FORMAT_NV12;
    case STREAMRECV_PIXEL_FORMAT_P010: return GST_VIDEO_FORMAT_P010_10LE;
    case STREAMRECV_PIXEL_FORMAT_YUV422P: return GST_VIDEO_FORMAT_Y42B;
    case STREAMRECV_PIXEL_FORMAT_YUV444P: return GST_VIDEO_FORMAT_Y444;
    case STREAMRECV_PIXEL_FORMAT_GRAY8: return GST_VIDEO_FORMAT_GRAY8;
    case STREAMRECV_PIXEL_FORMAT_YUV420P10: return GST_VIDEO_FORMAT_I420_10LE;
    case STREAMRECV_PIXEL_FORMAT_YUV422P10: return GST_VIDEO_FORMAT_I422_10LE;
    case STREAMRECV_PIXEL_FORMAT_YUV444P10: return GST_VIDEO_FORMAT_Y444_10LE;
    case STREAMRECV_PIXEL_FORMAT_YUV420P12: return GST_VIDEO_FORMAT_I420_12LE;
    case STREAMRECV_PIXEL_FORMAT_YUV422P12: return GST_VIDEO_FORMAT_I422_12LE;
    case STREAMRECV_PIXEL_FORMAT_YUV444P12: return GST_VIDEO_FORMAT_Y444_12LE;
    case STREAMRECV_PIXEL_FORMAT_GBRP: return GST_VIDEO_FORMAT_GBR;
    case STREAMRECV_PIXEL_FORMAT_GBRP10: return GST_VIDEO_FORMAT_GBR_10LE;
    default: return GST_VIDEO_FORMAT_UNKNOWN; /* GRAY10 in 16-bit words has no GStreamer format */
    }
}

gboolean slot_video_info(const struct streamrecv_shm_slot *slot, GstVideoInfo *info) {
    GstVideoFormat format = video_format(slot->pixel_format);
    if (format == GST_VIDEO_FORMAT_UNKNOWN) return FALSE;
    if (!gst_video_info_set_format(info, format, slot->width, slot->height)) return FALSE;
    info->fps_n = 0;
    info->fps_d = 1;
    /* H.264 and H.265 put 4:2:0 chroma left of centre unless the VUI says otherwise (the slot does not carry it). */
    if (GST_VIDEO_INFO_IS_YUV(info) && GST_VIDEO_FORMAT_INFO_W_SUB(info->finfo, 1) == 1 &&
        GST_VIDEO_FORMAT_INFO_H_SUB(info->finfo, 1) == 1)
        info->chroma_site = GST_VIDEO_CHROMA_SITE_MPEG2;
    /* A ratio GstFraction cannot hold (over G_MAXINT) is no ratio a writer made: left unknown. */
    if (slot->sample_aspect_num > 0 && slot->sample_aspect_den > 0 && slot->sample_aspect_num <= G_MAXINT &&
        slot->sample_aspect_den <= G_MAXINT) {
        info->par_n = (gint)slot->sample_aspect_num;
        info->par_d = (gint)slot->sample_aspect_den;
    }
    if (GST_VIDEO_INFO_IS_YUV(info)) {
        /* Unspecified is limited range: video_full_range_flag defaults to 0 in H.264 and H.265. */
        info->colorimetry.range = slot->color_range == 2 ? GST_VIDEO_COLOR_RANGE_0_255 : GST_VIDEO_COLOR_RANGE_16_235;
        if (slot->color_matrix != 2) info->colorimetry.matrix = gst_video_color_matrix_from_iso(slot->color_matrix);
        if (slot->color_transfer != 2)
            info->colorimetry.transfer = gst_video_transfer_function_from_iso(slot->color_transfer);
        if (slot->color_primaries != 2)
            info->colorimetry.primaries = gst_video_color_primaries_from_iso(slot->color_primaries);
    }
    return TRUE;
}

gboolean slot_planes_match(const struct streamrecv_shm_slot *slot, const GstVideoInfo *info) {
    if ((guint)slot->plane_count != GST_VIDEO_INFO_N_PLANES(info)) return FALSE;
    for (guint plane = 0; plane < slot->plane_count; plane++) {
        /* Any component stored in the plane gives its rows and bytes a row (NV12's U and V alike). */
        guint component = 0;
        while (component < GST_VIDEO_INFO_N_COMPONENTS(info) && (guint)GST_VIDEO_INFO_COMP_PLANE(info, component) != plane)
            component++;
        if (component == GST_VIDEO_INFO_N_COMPONENTS(info)) return FALSE;
        guint64 row_bytes = (guint64)GST_VIDEO_INFO_COMP_WIDTH(info, component) * GST_VIDEO_INFO_COMP_PSTRIDE(info, component);
        if (slot->plane_width[plane] != row_bytes || slot->plane_height[plane] != (guint)GST_VIDEO_INFO_COMP_HEIGHT(info, component))
            return FALSE;
    }
    return TRUE;
}

void slot_copy_planes(const struct streamrecv_shm_slot *slot, const uint8_t *data, GstVideoFrame *frame) {
    for (guint plane = 0; plane < slot->plane_count; plane++) {
        guint8 *destination = GST_VIDEO_FRAME_PLANE_DATA(frame, plane);
        gsize stride = (gsize)GST_VIDEO_FRAME_PLANE_STRIDE(frame, plane);
        guint rows = MIN(slot->plane_height[plane], (guint)GST_VIDEO_FRAME_COMP_HEIGHT(frame, plane));
        gsize width = MIN((gsize)slot->plane_width[plane], stride);
        for (guint row = 0; row < rows; row++)
            memcpy(destination + row * stride,
                   data + slot->plane_offset[plane] + (gsize)row * slot->plane_stride[plane], width);
    }
}
