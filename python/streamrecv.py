"""Read decoded frames from a running streamrecvd: pure Python, no build step.

    import streamrecv
    with streamrecv.FrameRing("desk") as ring:
        for frame in ring.frames(timeout=10):
            print(frame.sequence, frame.width, frame.height, frame.pixel_format)
            y = frame.plane(0)             # bytes of the luma plane, rows without padding
            array = frame.numpy_planes()   # numpy views (when numpy is installed)

The ring lives in /dev/shm/streamrecv-NAME (layout: docs/shm-abi.md, C header streamrecv_shm.h). A reader never
slows the daemon down: it copies each frame out under the slot's seqlock and retries a copy the writer tore;
a reader that falls more than `slot_count` frames behind is lapped (`ring.lapped` counts the frames it missed).
Waiting uses the header's futex (through ctypes), so an idle reader costs nothing.

Command line: python3 streamrecv.py NAME [--frames N] > frames.yuv writes tightly packed planes, as the C example.
"""

import ctypes
import mmap
import os
import platform
import struct
import sys
import time

MAGIC = 0x3156434552545353
ABI_VERSION = 1
HEADER_SIZE = 4096
SLOT_SIZE = 256
MAX_PLANES = 4

# Byte offsets, from docs/shm-abi.md (checked against the C header by test_streamrecv.py).
HEADER = {
    "magic": (0, "Q"), "abi_version": (8, "I"), "header_size": (12, "I"), "slot_size": (16, "I"),
    "slot_count": (20, "I"), "slot_table_offset": (24, "Q"), "slot_data_offset": (32, "Q"),
    "slot_data_stride": (40, "Q"), "slot_data_capacity": (48, "Q"), "total_size": (56, "Q"),
    "max_width": (64, "I"), "max_height": (68, "I"), "writer_pid": (72, "I"), "stream_state": (76, "I"),
    "writer_epoch": (80, "Q"), "generation": (88, "Q"), "latest_sequence": (96, "Q"), "wake_word": (104, "I"),
    "pts_clock_rate": (108, "I"), "stream_name": (112, "64s"), "codec": (176, "16s"),
    "bytes_received": (192, "Q"), "access_units": (200, "Q"), "frames_decoded": (208, "Q"),
    "frames_published": (216, "Q"), "frames_dropped": (224, "Q"), "decode_errors": (232, "Q"),
    "decoder_recreations": (240, "Q"), "connections": (248, "Q"),
}
SLOT = {
    "seqlock": (0, "Q"), "sequence": (8, "Q"), "generation": (16, "Q"), "pixel_format": (24, "I"),
    "plane_count": (28, "I"), "width": (32, "I"), "height": (36, "I"), "bits_per_sample": (40, "I"),
    "flags": (44, "I"), "plane_offset": (48, "4Q"), "plane_stride": (80, "4I"), "plane_width": (96, "4I"),
    "plane_height": (112, "4I"), "data_size": (128, "Q"), "pts": (136, "q"), "time_first_byte_ns": (144, "Q"),
    "time_au_complete_ns": (152, "Q"), "time_decoded_ns": (160, "Q"), "time_published_ns": (168, "Q"),
    "sample_aspect_num": (176, "I"), "sample_aspect_den": (180, "I"), "color_range": (184, "B"),
    "color_primaries": (185, "B"), "color_transfer": (186, "B"), "color_matrix": (187, "B"), "rotation": (188, "i"),
    "visible_x": (192, "I"), "visible_y": (196, "I"), "visible_width": (200, "I"), "visible_height": (204, "I"),
}

STATES = {0: "starting", 1: "waiting", 2: "streaming", 3: "degraded", 4: "stopped"}
PIXEL_FORMATS = {
    1: "yuv420p", 2: "nv12", 3: "p010", 4: "yuv422p", 5: "yuv444p", 6: "gray", 7: "yuv420p10le", 8: "yuv422p10le",
    9: "yuv444p10le", 10: "gray10le", 11: "yuv420p12le", 12: "yuv422p12le", 13: "yuv444p12le", 14: "gbrp",
    15: "gbrp10le",
}
FLAG_KEYFRAME, FLAG_CORRUPT, FLAG_DISCONTINUITY, FLAG_HFLIP, FLAG_VFLIP = 1, 2, 4, 8, 16
STATE_STOPPED = 4


class RingError(Exception):
    """The object is missing, not a ring, or of another ABI version."""


def _unpack(fields, buffer, base, name):
    offset, fmt = fields[name]
    values = struct.unpack_from("<" + fmt, buffer, base + offset)
    return values if len(values) > 1 else values[0]


class _Futex:
    """FUTEX_WAIT on a shared word, through libc's syscall(2) (Python has no futex binding)."""

    SYS_FUTEX = {"x86_64": 202, "aarch64": 98, "armv7l": 240, "riscv64": 98}.get(platform.machine())

    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long

    def wait(self, address, expected, timeout):
        """Sleeps while the 32-bit word at `address` equals `expected`, at most `timeout` seconds."""
        if self.SYS_FUTEX is None:
            time.sleep(min(timeout, 0.005))  # unknown architecture: poll
            return
        seconds = int(timeout)
        spec = (ctypes.c_long * 2)(seconds, int((timeout - seconds) * 1e9))
        # FUTEX_WAIT (0), not FUTEX_PRIVATE: the word lives in memory shared with another process.
        self.libc.syscall(ctypes.c_long(self.SYS_FUTEX), ctypes.c_void_p(address), ctypes.c_int(0),
                          ctypes.c_uint32(expected), spec, None, ctypes.c_int(0))


class Frame:
    """One frame copied out of the ring: its planes (`data`, at `plane_offset`/`plane_stride`) and metadata."""

    def __init__(self, slot, data):
        self.sequence = slot["sequence"]
        self.generation = slot["generation"]
        self.pixel_format = PIXEL_FORMATS.get(slot["pixel_format"], "unknown")
        self.width, self.height = slot["width"], slot["height"]
        self.bits_per_sample = slot["bits_per_sample"]
        self.flags = slot["flags"]
        self.pts = slot["pts"]
        self.plane_count = slot["plane_count"]
        self.plane_offset, self.plane_stride = slot["plane_offset"], slot["plane_stride"]
        self.plane_width, self.plane_height = slot["plane_width"], slot["plane_height"]
        self.rotation = slot["rotation"] / 65536 * 360
        self.visible = (slot["visible_x"], slot["visible_y"], slot["visible_width"], slot["visible_height"])
        self.times_ns = (slot["time_first_byte_ns"], slot["time_au_complete_ns"], slot["time_decoded_ns"],
                         slot["time_published_ns"])
        self.data = data

    keyframe = property(lambda self: bool(self.flags & FLAG_KEYFRAME))
    corrupt = property(lambda self: bool(self.flags & FLAG_CORRUPT))
    discontinuity = property(lambda self: bool(self.flags & FLAG_DISCONTINUITY))

    def plane(self, index):
        """Plane `index` as bytes, rows without their padding."""
        start, stride = self.plane_offset[index], self.plane_stride[index]
        width, rows = self.plane_width[index], self.plane_height[index]
        if stride == width:
            return bytes(self.data[start:start + width * rows])
        return b"".join(bytes(self.data[start + row * stride:start + row * stride + width]) for row in range(rows))

    def packed(self):
        """All planes, rows without padding: what `ffplay -f rawvideo -pix_fmt FORMAT -video_size WxH` plays."""
        return b"".join(self.plane(index) for index in range(self.plane_count))

    def numpy_planes(self):
        """numpy views of the planes (no copy): uint8 or, for more than 8 bits per sample, uint16 arrays of
        shape (rows, samples per row); NV12/P010's chroma plane is (rows, width/2, 2). Needs numpy."""
        import numpy
        dtype = numpy.uint16 if self.bits_per_sample > 8 else numpy.uint8
        size = numpy.dtype(dtype).itemsize
        planes = []
        for index in range(self.plane_count):
            samples = self.plane_width[index] // size
            array = numpy.ndarray((self.plane_height[index], samples), dtype=dtype, buffer=self.data,
                                  offset=self.plane_offset[index], strides=(self.plane_stride[index], size))
            if index == 1 and self.pixel_format in ("nv12", "p010"):
                array = array.reshape(self.plane_height[index], samples // 2, 2)
            planes.append(array)
        return planes


class FrameRing:
    """A read-only attachment to one stream's ring."""

    def __init__(self, name=None, shm_name=None):
        self.shm_name = shm_name or "streamrecv-" + name
        path = "/dev/shm/" + self.shm_name
        try:
            descriptor = os.open(path, os.O_RDONLY)
        except OSError as error:
            raise RingError("%s: %s" % (path, error.strerror)) from None
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.mmap.restype = ctypes.c_void_p
        self._libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_long]
        self._libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self._address = None
        try:
            self._size = os.fstat(descriptor).st_size
            if self._size < HEADER_SIZE:
                raise RingError("%s: too small for a ring" % path)
            # libc's mmap, not Python's: the futex needs the shared word's address, which a read-only
            # mmap.mmap does not give out. PROT_READ, MAP_SHARED: a reader can never write into the ring.
            address = self._libc.mmap(None, self._size, mmap.PROT_READ, mmap.MAP_SHARED, descriptor, 0)
            if address in (None, ctypes.c_void_p(-1).value):
                raise RingError("%s: mmap: %s" % (path, os.strerror(ctypes.get_errno())))
            self._address = address
        finally:
            os.close(descriptor)
        self._map = memoryview((ctypes.c_char * self._size).from_address(self._address)).cast("B")
        header = self.header()
        if header["magic"] != MAGIC or header["abi_version"] != ABI_VERSION or header["slot_size"] != SLOT_SIZE \
                or header["header_size"] != HEADER_SIZE or header["total_size"] > self._size:
            self.close()
            raise RingError("%s: not a streamrecv ring of ABI %d" % (path, ABI_VERSION))
        self.slot_count = header["slot_count"]
        self.lapped = 0
        self._futex = _Futex()
        self._wake_address = self._address + HEADER["wake_word"][0]

    def close(self):
        if getattr(self, "_map", None) is not None:
            self._map.release()
            self._map = None
        if getattr(self, "_address", None) is not None:
            self._libc.munmap(self._address, self._size)
            self._address = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def header(self):
        """The header's fields as a dict (counters are read without tearing: each is one aligned load)."""
        values = {name: _unpack(HEADER, self._map, 0, name) for name in HEADER}
        for key in ("stream_name", "codec"):
            values[key] = values[key].split(b"\0", 1)[0].decode("utf-8", "replace")
        values["state"] = STATES.get(values["stream_state"], "unknown")
        return values

    @property
    def latest_sequence(self):
        return _unpack(HEADER, self._map, 0, "latest_sequence")

    def read(self, sequence):
        """Frame `sequence` if the ring still holds it: a Frame, None when not published yet, or the int sequence of
        the oldest frame still held when it was overwritten (lapped)."""
        header = self.header()
        index = (sequence - 1) % self.slot_count
        slot_base = header["slot_table_offset"] + index * SLOT_SIZE
        data_base = header["slot_data_offset"] + index * header["slot_data_stride"]
        while True:
            begin = _unpack(SLOT, self._map, slot_base, "seqlock")
            if begin & 1:
                return None  # being written: the writer wakes the futex when done (or died mid-write)
            slot = {name: _unpack(SLOT, self._map, slot_base, name) for name in SLOT}
            data = None
            if slot["sequence"] == sequence and slot["data_size"] <= header["slot_data_capacity"]:
                data = bytearray(self._map[data_base:data_base + slot["data_size"]])
            if _unpack(SLOT, self._map, slot_base, "seqlock") != begin:
                continue  # torn: the writer was here meanwhile
            if slot["sequence"] == sequence and data is not None:
                return Frame(slot, data)
            if slot["sequence"] > sequence:
                latest = header["latest_sequence"]
                return max(1, latest - self.slot_count + 1)
            return None

    def frames(self, timeout=None, start=None):
        """Yields frames from `start` (default: the next one published) on; ends when the daemon stops the
        stream or no frame arrives for `timeout` seconds."""
        wanted = start if start is not None else self.latest_sequence + 1
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            seen = _unpack(HEADER, self._map, 0, "wake_word")
            result = self.read(wanted)
            if isinstance(result, Frame):
                yield result
                wanted += 1
                deadline = None if timeout is None else time.monotonic() + timeout
                continue
            if isinstance(result, int):
                self.lapped += result - wanted
                wanted = result
                continue
            if self.header()["stream_state"] == STATE_STOPPED:
                return
            remaining = 1.0 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                return
            self._futex.wait(self._wake_address, seen, min(remaining, 1.0))


def main(arguments):
    import argparse
    parser = argparse.ArgumentParser(description="Write a stream's frames as packed planes to standard output.")
    parser.add_argument("name")
    parser.add_argument("--frames", type=int)
    parser.add_argument("--timeout", type=float, default=10)
    options = parser.parse_args(arguments)
    with FrameRing(options.name) as ring:
        print("streamrecv.py: attached to %s" % ring.shm_name, file=sys.stderr, flush=True)
        written = 0
        for frame in ring.frames(timeout=options.timeout):
            sys.stdout.buffer.write(frame.packed())
            written += 1
            if options.frames is not None and written >= options.frames:
                break
        sys.stdout.flush()
        if ring.lapped:
            print("streamrecv.py: lapped: %d frame(s) skipped" % ring.lapped, file=sys.stderr)
        return 0 if options.frames is None or written >= options.frames else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
