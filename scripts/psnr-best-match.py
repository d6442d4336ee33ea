#!/usr/bin/python3
"""For each frame of a received y4m, the frame of a source y4m it is closest to and the PSNR against it, for the
tests: a browser's camera loops its clip and starts wherever it likes, so frames cannot be paired by position.

Both files are 8-bit 4:2:0 at the same size. Prints one JSON list on stdout, one entry per received frame:
`{"frame": i, "match": j, "psnr_y": dB, "psnr": dB}` (luma only, and all three planes together), the match being
the source frame with the smallest luma error. An identical frame has a PSNR of 100 (infinite, capped).

  psnr-best-match.py SOURCE.y4m RECEIVED.y4m
"""
import json
import sys

import numpy


def read_y4m(path):
    """(width, height, frames as an N × (w·h·3/2) uint8 array)."""
    with open(path, "rb") as file:
        data = file.read()
    header_end = data.index(b"\n")
    fields = data[:header_end].split()
    if fields[0] != b"YUV4MPEG2":
        raise SystemExit(f"{path}: not y4m")
    width = int(next(f[1:] for f in fields if f.startswith(b"W")))
    height = int(next(f[1:] for f in fields if f.startswith(b"H")))
    colour = next((f[1:] for f in fields if f.startswith(b"C")), b"420")
    if not colour.startswith(b"420") or colour[4:5].isdigit():  # 420p10 and the like are not 8-bit
        raise SystemExit(f"{path}: C{colour.decode()} is not 8-bit 4:2:0")
    size = width * height * 3 // 2
    frames = []
    position = header_end + 1
    while position < len(data):
        line_end = data.index(b"\n", position)  # FRAME and its optional parameters
        frames.append(numpy.frombuffer(data, numpy.uint8, size, line_end + 1))
        position = line_end + 1 + size
    return width, height, numpy.stack(frames)


def psnr(mean_squared_error):
    return 100.0 if mean_squared_error == 0 else min(100.0, 10 * numpy.log10(255.0 ** 2 / mean_squared_error))


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    source_width, source_height, source = read_y4m(sys.argv[1])
    width, height, received = read_y4m(sys.argv[2])
    if (width, height) != (source_width, source_height):
        raise SystemExit(f"sizes differ: {source_width}x{source_height} and {width}x{height}")
    luma = width * height
    source_luma = source[:, :luma].astype(numpy.int32)
    results = []
    for index, frame in enumerate(received):
        errors = ((source_luma - frame[:luma].astype(numpy.int32)) ** 2).mean(axis=1)
        match = int(errors.argmin())
        whole = ((source[match].astype(numpy.int32) - frame.astype(numpy.int32)) ** 2).mean()
        results.append({"frame": index, "match": match, "psnr_y": round(psnr(errors[match]), 2), "psnr": round(psnr(whole), 2)})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
