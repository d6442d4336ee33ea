#ifndef STREAMRECV_CSYSTEMD_SHIM_H
#define STREAMRECV_CSYSTEMD_SHIM_H
// libsystemd's sd-daemon API for the one file in Pipeline that talks to the service manager. No logic here.
#include <systemd/sd-daemon.h>
#endif
