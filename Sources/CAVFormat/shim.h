#ifndef STREAMRECV_CAVFORMAT_SHIM_H
#define STREAMRECV_CAVFORMAT_SHIM_H
// libavformat (demuxing MP4/MOV/MKV, muxing raw Annex B and RTP over tcp/udp/rtp URLs) and libavcodec's bitstream
// filters, for StreamSending (their only importer). Macros Swift cannot import are wrapped; nothing holds logic.
#include <libavformat/avformat.h>
#include <libavcodec/bsf.h>
#include <libavutil/error.h>
#include <libavutil/mathematics.h>

static inline int streamrecv_avf_averror_eof(void) { return AVERROR_EOF; }
static inline int streamrecv_avf_averror_eagain(void) { return AVERROR(EAGAIN); }
static inline int64_t streamrecv_avf_nopts_value(void) { return AV_NOPTS_VALUE; }
static inline const char *streamrecv_avf_err2str(int error, char *buffer, size_t size) {
    av_strerror(error, buffer, size);
    return buffer;
}
#endif
