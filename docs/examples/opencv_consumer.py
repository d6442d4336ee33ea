#!/usr/bin/env python3
"""Frames of a streamrecvd stream into OpenCV: each one as a BGR array, as cv2 wants it.

    python3 docs/examples/opencv_consumer.py desk --frames 100 > frames.bgr

Needs the `streamrecv` package (python3-streamrecv, or `pip install ./python[opencv]`) and OpenCV (python3-opencv).
Writes every frame's BGR pixels to standard output (height × width × 3 bytes each) and, per frame, a line on
standard error with its sequence number, size and the edges OpenCV finds in it (cv2.Canny): replace that with your
own processing. `to_bgr` converts with the frame's own colour matrix and range (through cv2.cvtColor for BT.601
limited-range 4:2:0, with numpy otherwise).
"""

import argparse
import sys

import cv2
import streamrecv


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stream", help="the stream's name, as in streamrecvd.toml")
    parser.add_argument("--frames", type=int, default=0, help="stop after this many frames (0: run until stopped)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the ring and for each frame")
    options = parser.parse_args()

    with streamrecv.FrameRing.wait_for(options.stream, timeout=options.timeout) as ring:
        print("attached to %s (OpenCV %s)" % (options.stream, cv2.__version__), file=sys.stderr, flush=True)
        taken = 0
        for frame in ring.frames(timeout=options.timeout):
            bgr = streamrecv.to_bgr(frame)  # height × width × 3, uint8
            edges = cv2.Canny(cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY), 100, 200)
            sys.stdout.buffer.write(bgr.tobytes())
            print("frame %d: %dx%d, %d edge pixels" % (frame.sequence, bgr.shape[1], bgr.shape[0],
                                                      cv2.countNonZero(edges)), file=sys.stderr)
            taken += 1
            if options.frames and taken == options.frames:
                break
    return 0 if not options.frames or taken == options.frames else 1


if __name__ == "__main__":
    sys.exit(main())
