#!/usr/bin/python3
"""A WHIP client (RFC 9725) on aiortc (python3-aiortc), for the tests: a WebRTC stack independent of GStreamer's
webrtcbin (its own ICE, DTLS, SRTP and H.264 packetizer), pushing video to a WHIP endpoint.

Two sources:
  --send FILE   an H.264 Annex B file, sent as it is: each access unit goes through aiortc's packetizer
                (STAP-A / FU-A) without being decoded or encoded, so the receiver can be checked bit-exact against
                the file. aiortc ignores keyframe requests here: the file needs SPS/PPS before each IDR.
  (none)        a test pattern (lavfi testsrc2) encoded by aiortc's own encoder (libx264 through PyAV).
--record keeps the exact Annex B that went into the packetizer, whichever the source.

aiortc starts its sender only once DTLS is up, so the first frame sent is the source's first. Ends after --frames
frames or at the end of --send's file (then DELETE, then the peer connection closes), or on SIGTERM. Prints one
line per step to stderr; the last line on stdout is `sent N frames` or `failed: REASON`.

  aiortc-whip-client.py URL --token TOKEN [--send in.h264] [--record sent.h264] [--frames 150] [--size 640x360]
                        [--fps 30] [--timeout 60] [--audio]
"""
import argparse
import asyncio
import fractions
import signal
import sys

import aioice.ice
import av
from aiortc import RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from aiortc.codecs.h264 import H264Encoder
from aiortc.contrib.media import MediaPlayer
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

import whip_http  # scripts/whip_http.py, beside this file


def say(text):
    print(f"aiortc-whip-client: {text}", file=sys.stderr, flush=True)


class AnnexBTrack(MediaStreamTrack):
    """The access units of an Annex B file as av.Packets, paced at --fps. (MediaPlayer(decode=False) would pass
    packets through too, but the raw h264 demuxer gives them no pts, and MediaPlayer drops a packet without one.)"""
    kind = "video"

    def __init__(self, path, fps):
        super().__init__()
        self.container = av.open(path, format="h264")
        self.packets = self.container.demux(video=0)
        self.time_base = fractions.Fraction(1, fps)
        self.index = 0
        self.start = None

    async def recv(self):
        packet = next((p for p in self.packets if p.size), None)
        if packet is None:
            raise MediaStreamError
        loop = asyncio.get_running_loop()
        if self.start is None:
            self.start = loop.time()
        await asyncio.sleep(max(0, self.start + self.index * self.time_base - loop.time()))
        packet.pts, packet.time_base = self.index, self.time_base
        self.index += 1
        return packet


class CountingTrack(MediaStreamTrack):
    """Hands the source's frames to the sender until `limit` have gone, then none: what was counted was sent."""
    kind = "video"

    def __init__(self, source, limit, on_limit):
        super().__init__()
        self.source, self.limit, self.on_limit = source, limit, on_limit
        self.count = 0

    async def recv(self):
        if self.limit and self.count >= self.limit:
            await asyncio.Future()  # never: the sender waits here until the connection closes
        try:
            frame = await self.source.recv()
        except MediaStreamError:
            self.on_limit()  # the source ended first: finish as after the last frame
            raise
        self.count += 1
        if self.count == self.limit:
            self.on_limit()
        return frame

    def stop(self):
        # MediaPlayer's worker thread ends with its last track; a thread left running would keep the script alive.
        super().stop()
        self.source.stop()


def record_packetizer_input(path):
    """Tees every Annex B buffer aiortc's H.264 packetizer splits (its encoder's output, or a passed-through
    packet's bytes) into `path`."""
    output = open(path, "wb")
    split = H264Encoder._split_bitstream

    def recording(buffer):
        output.write(buffer)
        output.flush()
        return split(buffer)

    H264Encoder._split_bitstream = staticmethod(recording)


class Client:
    def __init__(self, options):
        self.options = options
        self.location = None
        self.done = asyncio.Event()
        self.result = "failed: did not finish"
        self.track = None

    def stop(self, result):
        if not self.done.is_set():
            self.result = result
            self.done.set()

    def sent(self):
        return f"sent {self.track.count if self.track else 0} frames"

    async def run(self):
        options = self.options
        if options.send:
            source = AnnexBTrack(options.send, options.fps)
        else:
            self.player = MediaPlayer(f"testsrc2=size={options.size}:rate={options.fps}", format="lavfi")
            source = self.player.video
        loop = asyncio.get_running_loop()
        self.track = CountingTrack(source, options.frames,
                                   lambda: loop.call_later(options.linger_ms / 1000, self.stop, self.sent()))
        peer = RTCPeerConnection()
        # --audio: Opus beside the video, as OBS and browsers send it. The daemon takes it into the BUNDLE and drops
        # its packets; aiortc could not take an answer that rejected it (port 0: "Failed to set remote audio
        # description send parameters", or with an rtpmap, ICE waited for on the rejected section for ever).
        if options.audio:
            self.audio_player = MediaPlayer("sine=frequency=440:sample_rate=48000", format="lavfi")
            peer.addTransceiver(self.audio_player.audio, direction="sendonly")
        transceiver = peer.addTransceiver(self.track, direction="sendonly")
        transceiver.setCodecPreferences([codec for codec in RTCRtpSender.getCapabilities("video").codecs
                                         if codec.mimeType in ("video/H264", "video/rtx")])

        @peer.on("connectionstatechange")
        def on_connection():
            say(f"connection {peer.connectionState}")
            if peer.connectionState == "failed":
                self.stop("failed: the peer connection failed")

        try:
            # Not trickle: setLocalDescription returns once gathering is complete, with every candidate in it.
            await peer.setLocalDescription(await peer.createOffer())
            answer = await loop.run_in_executor(None, self.post, peer.localDescription.sdp)
            if answer is not None:
                await peer.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
                await asyncio.wait_for(self.done.wait(), options.timeout)
        except asyncio.TimeoutError:
            self.stop(f"failed: timed out after {self.sent()}")
        except Exception as error:  # aiortc's refusals of an answer are ValueError, OperationError, ...
            self.stop(f"failed: {type(error).__name__}: {error}")
        # DELETE first: closing first would end the session by DTLS close_notify instead.
        await loop.run_in_executor(None, self.delete)
        await peer.close()
        self.track.stop()
        if options.audio:
            self.audio_player.audio.stop()
        print(self.result, flush=True)
        return 0 if self.result.startswith("sent") else 1

    def post(self, offer):
        try:
            answer, self.location = whip_http.post_offer(self.options.url, self.options.token, offer, say)
        except whip_http.WHIPFailure as failure:
            self.stop(f"failed: {failure}")
            return None
        if self.options.verbose:
            say("offer:\n" + offer + "\nanswer:\n" + answer)
        return answer

    def delete(self):
        if self.location:
            whip_http.delete_session(self.options.url, self.options.token, self.location, say)


def main():
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # a parent's blocked mask is inherited
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--token", default="")
    parser.add_argument("--send", help="an H.264 Annex B file to send as it is (default: encode a test pattern)")
    parser.add_argument("--record", help="write the Annex B that went into the packetizer here")
    parser.add_argument("--frames", type=int, default=150)
    parser.add_argument("--size", default="640x360", help="of the test pattern")
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--timeout", type=int, default=60)
    parser.add_argument("--linger-ms", type=int, default=500, help="after the last frame, before DELETE")
    parser.add_argument("--local-address", default="127.0.0.1", help="the address ICE gathers on ('' for every interface)")
    parser.add_argument("--audio", action="store_true", help="send a 440 Hz tone as Opus beside the video")
    parser.add_argument("--verbose", action="store_true", help="print the offer and the answer")
    options = parser.parse_args()
    if options.local_address:
        # aioice leaves 127.0.0.1 out of its host candidates: name the address, as whip-client.py does for libnice.
        aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: [options.local_address]
    if options.record:
        record_packetizer_input(options.record)
    client = Client(options)
    loop = asyncio.new_event_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: client.stop(client.sent()))
    sys.exit(loop.run_until_complete(client.run()))


if __name__ == "__main__":
    main()
