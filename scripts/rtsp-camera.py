#!/usr/bin/python3
"""An RTSP camera for the tests: GStreamer's gst-rtsp-server serving one H.264 or H.265 clip (Matroska, made by
the test with ffmpeg) at its own pace, over UDP and interleaved TCP, optionally behind Digest authentication.

    rtsp-camera.py --port 8554 --clip clip.mkv --codec h264 [--user U --password P] [--loop]

Prints "ready" once it listens. Every second it prints "rtcp-rr SSRC LOST HIGHEST" for each receiver report its
RTP session has received from a client (gst's rtpsession statistics), so a test can see that RRs arrive.
"""
import argparse
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
gi.require_version("GstRtsp", "1.0")
from gi.repository import GLib, Gst, GstRtsp, GstRtspServer  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--clip", required=True)
    parser.add_argument("--codec", choices=["h264", "h265"], default="h264")
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--path", default="/cam")
    arguments = parser.parse_args()
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(arguments.port))
    factory = GstRtspServer.RTSPMediaFactory()
    depay = "h264parse" if arguments.codec == "h264" else "h265parse"
    pay = "rtph264pay" if arguments.codec == "h264" else "rtph265pay"
    # Matroska keeps the parameter sets in its codec private data, not in the frames: the payloader sends them only
    # in the SDP (sprop-parameter-sets, sprop-vps/sps/pps), as many cameras do.
    factory.set_launch(f"( filesrc location={arguments.clip} ! matroskademux ! {depay} ! {pay} name=pay0 pt=96 mtu=1400 )")
    factory.set_shared(False)
    medias = []

    def on_configure(_factory, media):
        medias.append(media)

    factory.connect("media-configure", on_configure)
    if arguments.user:
        auth = GstRtspServer.RTSPAuth()
        auth.set_supported_methods(GstRtsp.RTSPAuthMethod.DIGEST)
        token = GstRtspServer.RTSPToken()
        token.set_string(GstRtspServer.RTSP_TOKEN_MEDIA_FACTORY_ROLE, "user")
        auth.add_digest(arguments.user, arguments.password, token)
        server.set_auth(auth)
        permissions = GstRtspServer.RTSPPermissions()
        permissions.add_permission_for_role("user", GstRtspServer.RTSP_PERM_MEDIA_FACTORY_ACCESS, True)
        permissions.add_permission_for_role("user", GstRtspServer.RTSP_PERM_MEDIA_FACTORY_CONSTRUCT, True)
        factory.set_permissions(permissions)
    server.get_mount_points().add_factory(arguments.path, factory)
    if server.attach(None) == 0:
        print("cannot listen", flush=True)
        sys.exit(1)

    def report():
        for media in medias:
            stream = media.get_stream(0)
            session = stream.get_rtpsession() if stream else None
            if session is None:
                continue
            stats = session.get_property("stats")
            sources = stats.get_value("source-stats") or []
            for source in sources:
                have, has_rb = source.get_boolean("have-rb")
                if have and has_rb:
                    _, lost = source.get_int("rb-packetslost")
                    _, highest = source.get_uint("rb-exthighestseq")
                    _, ssrc = source.get_uint("ssrc")
                    print(f"rtcp-rr {ssrc} {lost} {highest}", flush=True)
        return True

    GLib.timeout_add(1000, report)
    print("ready", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main()
