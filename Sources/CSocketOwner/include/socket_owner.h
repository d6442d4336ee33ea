#ifndef STREAMRECV_SOCKET_OWNER_H
#define STREAMRECV_SOCKET_OWNER_H

#include <stdint.h>

/* The user that owns the client end of a TCP connection made from this machine (on loopback or any of its
 * addresses), asked of the kernel through sock_diag (NETLINK_SOCK_DIAG, an exact lookup by the connection's four
 * addresses, as `ss -e` shows it; ENOENT for another machine's). On loopback every client comes from 127.0.0.1: the
 * owner's uid is what tells one local user's connections from another's.
 *
 * `family` is AF_INET (addresses of 4 bytes) or AF_INET6 (16 bytes); `peer` and `peer_port` are the client's end
 * as accept() saw it, `local` and `local_port` ours. Ports in host order. Returns 0 and sets *uid, or -errno
 * (ENOENT: the client's socket is gone; EAFNOSUPPORT or EPERM: netlink not allowed, e.g. a unit's
 * RestrictAddressFamilies=). Blocking, a few microseconds: one request and one reply on a socket of its own. */
int streamrecv_loopback_peer_uid(int family, const uint8_t *peer, uint16_t peer_port, const uint8_t *local,
                                 uint16_t local_port, uint32_t *uid);

#endif
