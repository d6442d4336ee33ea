#ifndef STREAMRECV_CSRT_SHIM_H
#define STREAMRECV_CSRT_SHIM_H
// libsrt (Debian's GnuTLS flavour, the one FFmpeg links), for the srt:// listener. Socket options are set and read
// through these two wrappers: every option the daemon uses is an int.
#include <srt/srt.h>
/* malloc_trim: what libsrt freed on its own threads is handed back to the system (SRTListenerThread). */
#include <malloc.h>

static inline int streamrecv_srt_set_int(SRTSOCKET socket, SRT_SOCKOPT option, int value) {
    return srt_setsockflag(socket, option, &value, sizeof value);
}

static inline int streamrecv_srt_get_int(SRTSOCKET socket, SRT_SOCKOPT option) {
    int value = -1;
    int length = sizeof value;
    return srt_getsockflag(socket, option, &value, &length) == 0 ? value : -1;
}
#endif
