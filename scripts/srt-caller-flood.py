#!/usr/bin/env python3
"""SRT callers that a listener must refuse, as fast as they can be made: each connects through libsrt (the same
library FFmpeg's srt:// uses, through ctypes), sends a few packets when the connection is reported, and closes.

    srt-caller-flood.py HOST PORT --callers N [--parallel 8] [--passphrase WRONG] [--sources 127.0.0.2,...]

Prints one line at the end: "callers N connected C failed F". Used by the daemon's tests (SRTIngestTests) and by
hand to watch a listener's memory under a flood of refused callers.
"""

import argparse
import ctypes
import ctypes.util
import socket
import struct
import sys
import threading

SRTO_RCVSYN, SRTO_SNDSYN, SRTO_PASSPHRASE, SRTO_CONNTIMEO, SRTO_TRANSTYPE = 2, 1, 26, 36, 50
SRTO_ENFORCEDENCRYPTION = 53
SRTT_LIVE = 0


def load():
    for name in ("libsrt-gnutls.so.1.5", "libsrt.so.1.5", ctypes.util.find_library("srt-gnutls"),
                 ctypes.util.find_library("srt")):
        if name:
            try:
                return ctypes.CDLL(name)
            except OSError:
                continue
    sys.exit("srt-caller-flood: libsrt not found")


def address(host, port):
    raw = struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + socket.inet_aton(host) + bytes(8)
    return ctypes.create_string_buffer(raw, len(raw))


def set_int(srt, sock, option, value):
    number = ctypes.c_int(value)
    return srt.srt_setsockflag(sock, option, ctypes.byref(number), 4)


def caller(srt, options, source):
    """One caller: True when libsrt reported it connected (the listener then learnt its key state)."""
    sock = srt.srt_create_socket()
    try:
        set_int(srt, sock, SRTO_TRANSTYPE, SRTT_LIVE)
        set_int(srt, sock, SRTO_CONNTIMEO, 3000)
        # Not enforced on this side: the connection is then made, and it is the listener that must refuse it.
        set_int(srt, sock, SRTO_ENFORCEDENCRYPTION, 0)
        if options.passphrase:
            secret = options.passphrase.encode()
            srt.srt_setsockflag(sock, SRTO_PASSPHRASE, ctypes.c_char_p(secret), len(secret))
        if source:
            local = address(source, 0)
            if srt.srt_bind(sock, local, len(local)) != 0:
                return False
        target = address(options.host, options.port)
        if srt.srt_connect(sock, target, len(target)) != 0:
            return False
        payload = ctypes.create_string_buffer(bytes([0x47]) + bytes(187), 188 * 7)
        for _ in range(options.packets):
            if srt.srt_sendmsg(sock, payload, 188 * 7, -1, 1) < 0:
                break
        return True
    finally:
        srt.srt_close(sock)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--callers", type=int, default=100)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--passphrase", default="")
    parser.add_argument("--packets", type=int, default=4)
    parser.add_argument("--sources", default="", help="comma-separated local addresses, used in turn")
    options = parser.parse_args()
    srt = load()
    srt.srt_startup()
    srt.srt_setloglevel(2)  # LOG_CRIT: the refusals are expected
    sources = [s for s in options.sources.split(",") if s] or [None]
    lock = threading.Lock()
    counts = {"next": 0, "connected": 0, "failed": 0}

    def work():
        while True:
            with lock:
                index = counts["next"]
                if index >= options.callers:
                    return
                counts["next"] += 1
            ok = caller(srt, options, sources[index % len(sources)])
            with lock:
                counts["connected" if ok else "failed"] += 1

    threads = [threading.Thread(target=work) for _ in range(options.parallel)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    srt.srt_cleanup()
    print("callers %d connected %d failed %d" % (options.callers, counts["connected"], counts["failed"]))


if __name__ == "__main__":
    main()
