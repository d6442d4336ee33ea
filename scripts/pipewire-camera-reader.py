#!/usr/bin/python3
"""Reads a PipeWire camera with GStreamer's pipewiresrc, as an application would, and prints one JSON line per
frame: its caps (format, width, height), the md5 of its pixels in the format's tight layout, its size in bytes, and
when it arrived (CLOCK_MONOTONIC ns). For PipeWireCameraTests and scripts/bench-camera.py.

    pipewire-camera-reader.py NODE_NAME [--frames N] [--seconds S]

pipewiresrc names no media type on its own stream, and WirePlumber 0.4 then cannot pick it a target: the stream
properties below say "Video" (an application such as OBS says so itself)."""
import argparse
import hashlib
import json
import sys
import time

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstVideo", "1.0")
from gi.repository import Gst, GstVideo  # noqa: E402


def tight_pixels(info, offsets, strides, mapped):
    """The frame's planes without row padding, as ffmpeg's framemd5 hashes them."""
    data = bytes(mapped)
    out = bytearray()
    for plane in range(info.finfo.n_planes):
        stride = strides[plane]
        offset = offsets[plane]
        # Rows and row bytes from the format's subsampling (the formats used here keep component N in plane N;
        # NV12's second plane holds U and V side by side: its pixel stride is 2).
        component = plane
        h_sub = info.finfo.h_sub[component]
        w_sub = info.finfo.w_sub[component]
        rows = -((-info.height) >> h_sub)
        width = -((-info.width) >> w_sub)
        pixel_stride = info.finfo.pixel_stride[component]
        row_bytes = width * pixel_stride
        for row in range(rows):
            start = offset + row * stride
            out += data[start:start + row_bytes]
    return bytes(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("node")
    parser.add_argument("--frames", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()
    Gst.init(None)
    pipeline = Gst.parse_launch(
        # always-copy: each buffer goes back to the camera at once, so a reader stalled by a loaded machine while
        # it hashes queues copies instead of holding all of the node's buffers (the camera then skips frames).
        f'pipewiresrc target-object={args.node} always-copy=true '
        'stream-properties="props,media.type=Video,media.category=Capture,media.role=Camera" '
        '! appsink name=sink sync=false max-buffers=0 drop=false')
    sink = pipeline.get_by_name("sink")
    pipeline.set_state(Gst.State.PLAYING)
    deadline = time.monotonic() + args.seconds
    count = 0
    while time.monotonic() < deadline and (args.frames == 0 or count < args.frames):
        sample = sink.emit("try-pull-sample", 100 * Gst.MSECOND)
        if sample is None:
            message = pipeline.get_bus().pop_filtered(Gst.MessageType.ERROR)
            if message is not None:
                error, debug = message.parse_error()
                print(json.dumps({"error": error.message, "debug": debug}), flush=True)
                break
            continue
        arrived = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        info = GstVideo.VideoInfo.new_from_caps(sample.get_caps())
        buffer = sample.get_buffer()
        meta = GstVideo.buffer_get_video_meta(buffer)
        planes = range(info.finfo.n_planes)
        offsets = [meta.offset[p] if meta else info.offset[p] for p in planes]
        strides = [meta.stride[p] if meta else info.stride[p] for p in planes]
        ok, mapped = buffer.map(Gst.MapFlags.READ)
        pixels = tight_pixels(info, offsets, strides, mapped.data)
        buffer.unmap(mapped)
        count += 1
        print(json.dumps({
            "format": info.finfo.name, "width": info.width, "height": info.height,
            "md5": hashlib.md5(pixels).hexdigest(), "size": buffer.get_size(), "arrived_ns": arrived,
            "flags": int(buffer.get_flags()),
        }), flush=True)
    pipeline.set_state(Gst.State.NULL)
    return 0 if count > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
