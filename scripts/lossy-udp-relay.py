#!/usr/bin/python3
"""A lossy UDP path for the tests, where tc netem is not available (containers without sch_netem): datagrams to
--listen go to --to, replies come back to the first sender; each way, a fraction is dropped (--loss) and the rest
is delayed (--delay-ms). Seeded: the same run drops the same datagrams. Prints `ready` once bound, and on SIGTERM
the counts: `forwarded N dropped M` (last), after `duplicated D replayed R` when either option is given.

A hostile path, client to server only, SRTP and SRTCP only (first byte 128-191, RFC 7983: what a replay check
sees; STUN and DTLS have checks of their own): --duplicate sends a fraction of them twice at once, --replay a
fraction again --replay-delay-ms later, when the receiver's replay window has moved on.

  lossy-udp-relay.py --listen 127.0.0.1:20000 --to 127.0.0.1:8189 --loss 0.02 --delay-ms 10
  lossy-udp-relay.py --listen 127.0.0.1:20000 --to 127.0.0.1:8189 --loss 0 --duplicate 0.05 --replay 0.02
"""
import argparse
import asyncio
import random
import signal
import sys


class Relay:
    def __init__(self, options):
        self.options = options
        self.random = random.Random(options.seed)
        # Its own generator: the copies leave the loss pattern of a seed as it was.
        self.copies = random.Random(options.seed + 1)
        self.client = None
        self.forwarded = 0
        self.dropped = 0
        self.duplicated = 0
        self.replayed = 0

    def later(self, transport, data, address):
        if self.random.random() < self.options.loss:
            self.dropped += 1
            return
        self.forwarded += 1
        asyncio.get_running_loop().call_later(self.options.delay_ms / 1000, transport.sendto, data, address)

    def hostile(self, transport, data):
        """Copies of the client's SRTP/SRTCP, counted when sent (a replay still pending at SIGTERM is not)."""
        if not data or not 128 <= data[0] <= 191:
            return
        loop = asyncio.get_running_loop()
        if self.copies.random() < self.options.duplicate:
            loop.call_later(self.options.delay_ms / 1000, self.send_copy, transport, data, "duplicated")
        if self.copies.random() < self.options.replay:
            loop.call_later((self.options.delay_ms + self.options.replay_delay_ms) / 1000, self.send_copy, transport, data, "replayed")

    def send_copy(self, transport, data, kind):
        transport.sendto(data, None)
        setattr(self, kind, getattr(self, kind) + 1)


class Front(asyncio.DatagramProtocol):
    def __init__(self, relay):
        self.relay = relay

    def connection_made(self, transport):
        self.relay.front = transport

    def datagram_received(self, data, address):
        self.relay.client = self.relay.client or address
        if address == self.relay.client:
            self.relay.later(self.relay.back, data, None)
            self.relay.hostile(self.relay.back, data)


class Back(asyncio.DatagramProtocol):
    def __init__(self, relay):
        self.relay = relay

    def connection_made(self, transport):
        self.relay.back = transport

    def datagram_received(self, data, _address):
        if self.relay.client:
            self.relay.later(self.relay.front, data, self.relay.client)


def split(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True)
    parser.add_argument("--to", required=True)
    parser.add_argument("--loss", type=float, default=0.02)
    parser.add_argument("--delay-ms", type=float, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--duplicate", type=float, default=0, help="client's SRTP/SRTCP sent twice at once")
    parser.add_argument("--replay", type=float, default=0, help="client's SRTP/SRTCP sent again later")
    parser.add_argument("--replay-delay-ms", type=float, default=500)
    options = parser.parse_args()
    relay = Relay(options)
    loop = asyncio.get_running_loop()
    await loop.create_datagram_endpoint(lambda: Front(relay), local_addr=split(options.listen))
    await loop.create_datagram_endpoint(lambda: Back(relay), remote_addr=split(options.to))
    done = loop.create_future()
    # A parent may have SIGTERM blocked (the mask is inherited): unblock it, or terminate() never arrives.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    loop.add_signal_handler(signal.SIGTERM, done.set_result, None)
    print("ready", flush=True)
    await done
    if options.duplicate or options.replay:
        print(f"duplicated {relay.duplicated} replayed {relay.replayed}", flush=True)
    print(f"forwarded {relay.forwarded} dropped {relay.dropped}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
