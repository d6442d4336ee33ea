/* streamrecv-camera: a streamrecvd stream as a PipeWire camera (a Video/Source node named streamrecv-NAME), for
 * OBS, browsers and anything else that takes a PipeWire camera. `streamrecvctl camera NAME` runs it. It follows
 * the ring as every reader does (waits for it, follows size changes by renegotiating, and daemon restarts by
 * attaching again) and sends each frame as soon as it is published: every frame in order while the consumers
 * keep up, the newest once they fall behind. Frames are copied once, from the slot into PipeWire's buffer, and
 * sent only when the copy was seen whole (the slot's seqlock). */
#define _GNU_SOURCE
#include "camera-follow.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_stop_signal(int number) { (void)number; camera_stopping = 1; }

static void usage(FILE *to) {
    fputs("usage: streamrecv-camera [--shm SHMNAME] [--node-name NAME] [--description TEXT] [--rate N[/D]] STREAM\n"
          "Offers the frames of streamrecvd's stream STREAM as a PipeWire camera (a Video/Source node named\n"
          "streamrecv-STREAM), until SIGINT or SIGTERM. Exit status 1 when PipeWire cannot be reached or fails,\n"
          "2 on a usage error.\n", to);
}

/* N or N/D, each 1 … 1000000, nothing else. */
static int parse_rate(const char *text, uint32_t *num, uint32_t *den) {
    char *end;
    errno = 0;
    unsigned long n = strtoul(text, &end, 10), d = 1;
    if (end == text || errno || n == 0 || n > 1000000 || text[0] == '-') return -1;
    if (*end == '/') {
        const char *denominator = end + 1;
        d = strtoul(denominator, &end, 10);
        if (end == denominator || errno || d == 0 || d > 1000000 || denominator[0] == '-') return -1;
    }
    if (*end != 0) return -1;
    *num = (uint32_t)n;
    *den = (uint32_t)d;
    return 0;
}

int main(int argc, char **argv) {
    static const struct option options[] = {
        { "shm", required_argument, NULL, 's' }, { "node-name", required_argument, NULL, 'n' },
        { "description", required_argument, NULL, 'd' }, { "rate", required_argument, NULL, 'r' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    const char *shm = NULL, *node_name = NULL, *description = NULL;
    struct camera camera = { 0 };
    for (int option; (option = getopt_long(argc, argv, "h", options, NULL)) != -1;) {
        switch (option) {
        case 's': shm = optarg; break;
        case 'n': node_name = optarg; break;
        case 'd': description = optarg; break;
        case 'r':
            if (parse_rate(optarg, &camera.rate_num, &camera.rate_den) != 0) {
                fprintf(stderr, "streamrecv-camera: --rate takes N or N/D (30, 30000/1001), not %s\n", optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind + 1 != argc && !(optind == argc && shm)) {
        usage(stderr);
        return 2;
    }
    const char *stream = optind < argc ? argv[optind] : NULL;
    if ((stream && !ring_name_valid(stream)) || (shm && !ring_name_valid(shm[0] == '/' ? shm + 1 : shm)) ||
        (node_name && !ring_name_valid(node_name))) {
        fprintf(stderr, "streamrecv-camera: names are letters, digits, '-', '_' and '.', not starting with '.'\n");
        return 2;
    }
    char path[256], default_node[256], default_description[300];
    if (shm) snprintf(path, sizeof path, "/dev/shm/%s", shm[0] == '/' ? shm + 1 : shm);
    else snprintf(path, sizeof path, "/dev/shm/streamrecv-%s", stream);
    snprintf(default_node, sizeof default_node, "%s", path + strlen("/dev/shm/"));
    snprintf(default_description, sizeof default_description, "streamrecv %s", stream ? stream : default_node);
    camera.path = path;

    struct sigaction action = { 0 };
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    /* A parent that blocks them (a test runner's threads do) passes the mask on: stopping must work all the same. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    sigprocmask(SIG_UNBLOCK, &stop_signals, NULL);

    char error[512];
    camera.node = camera_node_new(node_name ? node_name : default_node, description ? description : default_description,
                                  error, sizeof error);
    if (camera.node == NULL) {
        camera_say("%s", error);
        return 1;
    }
    camera_say("node %s for %s", node_name ? node_name : default_node, path);
    int status = camera_follow(&camera);
    struct camera_node_counters counters;
    camera_node_counters(camera.node, &counters);
    camera_say("sent %llu frames, skipped %llu (consumers busy %llu times, slow to finish a frame %llu times), "
               "formats negotiated %llu", (unsigned long long)counters.sent, (unsigned long long)camera.skipped,
               (unsigned long long)counters.busy, (unsigned long long)counters.settle_timeouts,
               (unsigned long long)counters.negotiations);
    if (camera.attached) ring_detach(&camera.ring);
    camera_node_free(camera.node);
    return status;
}

