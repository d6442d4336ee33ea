#ifndef STREAMRECV_CSRTP_SHIM_H
#define STREAMRECV_CSRTP_SHIM_H
// libsrtp2, for the WHIP ingest: SRTP/SRTCP with the keys DTLS exported. Only MediaSecurity imports this module.
#include <srtp2/srtp.h>
#endif
