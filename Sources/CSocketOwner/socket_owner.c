#define _GNU_SOURCE
#include "socket_owner.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int streamrecv_loopback_peer_uid(int family, const uint8_t *peer, uint16_t peer_port, const uint8_t *local,
                                 uint16_t local_port, uint32_t *uid) {
    if (family != AF_INET && family != AF_INET6) return -EAFNOSUPPORT;
    size_t length = family == AF_INET ? 4 : 16;
    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST; /* no NLM_F_DUMP: the one socket with these addresses */
    message.request.sdiag_family = (uint8_t)family;
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = ~0U;
    /* The client's socket: its source is the peer we accepted, its destination us. */
    message.request.id.idiag_sport = htons(peer_port);
    message.request.id.idiag_dport = htons(local_port);
    memcpy(message.request.id.idiag_src, peer, length);
    memcpy(message.request.id.idiag_dst, local, length);
    message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

    int descriptor = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (descriptor < 0) return -errno;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    int result = -EIO;
    if (sendto(descriptor, &message, sizeof message, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        result = -errno;
        goto done;
    }
    union {
        struct nlmsghdr header;
        uint8_t bytes[1024];
    } reply;
    ssize_t received;
    do {
        received = recv(descriptor, &reply, sizeof reply, 0);
    } while (received < 0 && errno == EINTR);
    if (received < 0) {
        result = -errno;
        goto done;
    }
    struct nlmsghdr *header = &reply.header;
    if (!NLMSG_OK(header, (size_t)received)) goto done;
    if (header->nlmsg_type == NLMSG_ERROR) {
        const struct nlmsgerr *error = NLMSG_DATA(header);
        result = header->nlmsg_len >= NLMSG_LENGTH(sizeof *error) && error->error < 0 ? error->error : -EIO;
        goto done;
    }
    if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY || header->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg))) goto done;
    const struct inet_diag_msg *answer = NLMSG_DATA(header);
    *uid = answer->idiag_uid;
    result = 0;
done:
    close(descriptor);
    return result;
}
