#ifndef STREAMRECV_CSWSCALE_SHIM_H
#define STREAMRECV_CSWSCALE_SHIM_H
// libswscale for FrameExport (its only importer): pixel format conversion for snapshots.
#include <libswscale/swscale.h>
#endif
