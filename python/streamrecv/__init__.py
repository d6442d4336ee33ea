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

Nothing in the object is trusted (anyone can create one under /dev/shm): the header's geometry is checked once
against the object's size and only the checked values are used, every slot is checked before its planes are, and
anything inconsistent raises RingError. Everything is read with pread(2), never through a mapping, so an object
truncated under the reader cannot kill it with SIGBUS (only the futex word is mapped: a futex on a vanished page
fails harmlessly). When the daemon moves the stream to a new object (a larger format, damage, a restart with
other settings), the reader opens the name again and goes on.

Command line: `python -m streamrecv NAME [--frames N] > frames.yuv` writes tightly packed planes, as the C example;
it waits for a ring that is not there yet (`FrameRing.wait_for`). `streamrecv.to_rgb` / `to_bgr` convert a frame
for OpenCV and numpy users (numpy needed; OpenCV used when installed).
"""

import ctypes
import errno
import mmap
import os
import platform
import stat
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
    "decoder_recreations": (240, "Q"), "connections": (248, "Q"), "source_status": (256, "128s"),
}
# The header fields above end here: what a reader reads of it in one go.
HEADER_FIELDS_END = 384
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

STATES = {0: "starting", 1: "waiting", 2: "streaming", 3: "degraded", 4: "stopped", 5: "replaced"}
PIXEL_FORMATS = {
    1: "yuv420p", 2: "nv12", 3: "p010", 4: "yuv422p", 5: "yuv444p", 6: "gray", 7: "yuv420p10le", 8: "yuv422p10le",
    9: "yuv444p10le", 10: "gray10le", 11: "yuv420p12le", 12: "yuv422p12le", 13: "yuv444p12le", 14: "gbrp",
    15: "gbrp10le",
}
# Per pixel format: bytes per sample, chroma subsampling as (log2 horizontal, log2 vertical) or None for grey, and
# whether chroma is one interleaved plane (as PixelFormat.planes in the daemon's FrameFormats module).
PIXEL_LAYOUTS = {
    1: (1, (1, 1), False), 2: (1, (1, 1), True), 3: (2, (1, 1), True), 4: (1, (1, 0), False),
    5: (1, (0, 0), False), 6: (1, None, False), 7: (2, (1, 1), False), 8: (2, (1, 0), False), 9: (2, (0, 0), False),
    10: (2, None, False), 11: (2, (1, 1), False), 12: (2, (1, 0), False), 13: (2, (0, 0), False),
    14: (1, (0, 0), False), 15: (2, (0, 0), False),
}
FLAG_KEYFRAME, FLAG_CORRUPT, FLAG_DISCONTINUITY, FLAG_HFLIP, FLAG_VFLIP = 1, 2, 4, 8, 16
STATE_STOPPED, STATE_REPLACED = 4, 5


__version__ = "0.1.0"


class RingError(Exception):
    """The object is missing, not a ring, of another ABI version, or inconsistent (damaged or forged)."""


class RingMissing(RingError):
    """No object of that name (yet): the daemon has not made the ring, or has removed it."""


class _Shrunk(Exception):
    """The object became smaller than what was read from it."""


def _unpack(fields, buffer, base, name):
    offset, fmt = fields[name]
    values = struct.unpack_from("<" + fmt, buffer, base + offset)
    return values if len(values) > 1 else values[0]


def _check_header(header, size):
    """The ring's geometry if the header describes one inside `size` bytes (as streamrecv_shm_check_header)."""
    if header["magic"] != MAGIC:
        return None, "no magic (not a ring, or not initialised yet)"
    if header["abi_version"] != ABI_VERSION:
        return None, "ABI version %d" % header["abi_version"]
    if header["header_size"] != HEADER_SIZE or header["slot_size"] != SLOT_SIZE:
        return None, "unexpected header or slot size"
    count, table, data = header["slot_count"], header["slot_table_offset"], header["slot_data_offset"]
    stride, capacity, total = header["slot_data_stride"], header["slot_data_capacity"], header["total_size"]
    if not 1 <= count <= 1 << 20:
        return None, "slot count out of range"
    if table < HEADER_SIZE or table % 64:
        return None, "slot table offset out of range"
    if capacity > stride:
        return None, "slot capacity larger than its stride"
    if table + count * SLOT_SIZE > data:
        return None, "slot table overlaps the data"
    if data + count * stride > total:
        return None, "slot data beyond total_size"
    if total > size:
        return None, "total_size larger than the object"
    return {"slot_count": count, "slot_table_offset": table, "slot_data_offset": data, "slot_data_stride": stride,
            "slot_data_capacity": capacity}, None


def _check_slot(slot, geometry):
    """None when the planes of a copied slot lie inside its data (as streamrecv_shm_check_slot) and are the planes
    its pixel format and picture size make (as the Swift reader's FrameLayout), else why not."""
    count = slot["plane_count"]
    if not 1 <= count <= MAX_PLANES:
        return "plane count out of range"
    if not (1 <= slot["width"] <= 65535 and 1 <= slot["height"] <= 65535):
        return "picture size out of range"
    if slot["data_size"] > geometry["slot_data_capacity"]:
        return "data larger than the slot"
    for plane in range(count):
        rows, stride, width = slot["plane_height"][plane], slot["plane_stride"][plane], slot["plane_width"][plane]
        if rows == 0 or width == 0 or width > stride:
            return "plane rows out of range"
        if slot["plane_offset"][plane] + stride * (rows - 1) + width > slot["data_size"]:
            return "plane outside the data"
    if slot["pixel_format"] not in PIXEL_FORMATS:
        return "unknown pixel format"
    # The planes must be the picture's: a slot claiming 65535x65535 with 64x48 planes is not a frame.
    expected = expected_planes(slot["pixel_format"], slot["width"], slot["height"])
    actual = [(slot["plane_width"][plane], slot["plane_height"][plane]) for plane in range(count)]
    if actual != expected:
        return "planes do not match the picture size (%dx%d %s)" % (
            slot["width"], slot["height"], PIXEL_FORMATS[slot["pixel_format"]])
    return None


def expected_planes(pixel_format, width, height):
    """(bytes per row, rows) of each plane of a `width` x `height` picture in `pixel_format` (an ABI number)."""
    sample, shift, interleaved = PIXEL_LAYOUTS[pixel_format]
    luma = (width * sample, height)
    if shift is None:
        return [luma]
    chroma_width, chroma_height = (width + (1 << shift[0]) - 1) >> shift[0], (height + (1 << shift[1]) - 1) >> shift[1]
    if interleaved:
        return [luma, (2 * chroma_width * sample, chroma_height)]
    return [luma, (chroma_width * sample, chroma_height), (chroma_width * sample, chroma_height)]


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
        # ISO/IEC 23091-2 code points as the slot carries them: range 1 limited, 2 full; matrix 1 BT.709,
        # 5 and 6 BT.601, 9 BT.2020, 2 unspecified.
        self.color_range, self.color_matrix = slot["color_range"], slot["color_matrix"]
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
        self.path = "/dev/shm/" + self.shm_name
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.mmap.restype = ctypes.c_void_p
        self._libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_long]
        self._libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self._fd = None
        self._address = None
        self.lapped = 0
        self._futex = _Futex()
        self._attach()

    @classmethod
    def wait_for(cls, name=None, shm_name=None, timeout=None, waiting=None):
        """Attaches once the ring exists. Consumers often start before the daemon has made it: socket activation
        starts the daemon at the first connection, and a restart with other settings makes a new object. Looks
        every 50 ms and calls `waiting()` (if given) once, when the first look finds nothing. Raises RingError at
        once for an object that is not a ring, TimeoutError when `timeout` seconds pass without one (None: wait
        for ever)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        told = False
        while True:
            try:
                return cls(name=name, shm_name=shm_name)
            except RingMissing:
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError("%s did not appear within %g s" % (
                        "/dev/shm/" + (shm_name or "streamrecv-" + name), timeout)) from None
                if not told and waiting is not None:
                    waiting()
                told = True
                time.sleep(0.05)

    def _attach(self):
        """Opens the object behind the name and checks it; raises RingError (nothing is kept) when it is no ring."""
        try:
            # O_NONBLOCK: a FIFO planted under the name must not hang open(2).
            descriptor = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as error:
            kind = RingMissing if error.errno == errno.ENOENT else RingError
            raise kind("%s: %s" % (self.path, error.strerror)) from None
        try:
            status = os.fstat(descriptor)
            if not stat.S_ISREG(status.st_mode) or status.st_size < HEADER_SIZE:
                raise RingError("%s: not a plain object as large as a ring header" % self.path)
            # The writer reserves every page: a sparse object claiming terabytes is a forgery.
            if status.st_blocks * 512 < status.st_size:
                raise RingError("%s: not a ring (a sparse object)" % self.path)
            raw = os.pread(descriptor, HEADER_FIELDS_END, 0)
            if len(raw) < HEADER_FIELDS_END:
                raise RingError("%s: shrank while being read" % self.path)
            geometry, problem = _check_header(self._parse_header(raw), status.st_size)
            if problem:
                raise RingError("%s: not a streamrecv ring of ABI %d: %s" % (self.path, ABI_VERSION, problem))
            # Only the header page is mapped, for the futex word; nothing is read through the mapping.
            address = self._libc.mmap(None, HEADER_SIZE, mmap.PROT_READ, mmap.MAP_SHARED, descriptor, 0)
            if address in (None, ctypes.c_void_p(-1).value):
                raise RingError("%s: mmap: %s" % (self.path, os.strerror(ctypes.get_errno())))
        except BaseException:
            os.close(descriptor)
            raise
        self.close()
        self._fd, self._address, self._inode, self._geometry = descriptor, address, status.st_ino, geometry
        self.slot_count = geometry["slot_count"]
        self._wake_address = address + HEADER["wake_word"][0]

    def close(self):
        if getattr(self, "_address", None) is not None:
            self._libc.munmap(self._address, HEADER_SIZE)
            self._address = None
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _pread(self, size, offset):
        data = os.pread(self._fd, size, offset)
        if len(data) < size:
            raise _Shrunk()
        return data

    @staticmethod
    def _parse_header(raw):
        values = {name: _unpack(HEADER, raw, 0, name) for name in HEADER}
        for key in ("stream_name", "codec", "source_status"):
            values[key] = values[key].split(b"\0", 1)[0].decode("utf-8", "replace")
        values["state"] = STATES.get(values["stream_state"], "unknown")
        return values

    def header(self):
        """The header's fields as a dict (its first HEADER_FIELDS_END bytes, read in one go). `source_status`: where
        a pulled (rtsp://) stream's source stands, "" otherwise."""
        try:
            return self._parse_header(self._pread(HEADER_FIELDS_END, 0))
        except _Shrunk:
            raise RingError("%s: the object shrank (truncated by someone)" % self.path) from None

    @property
    def latest_sequence(self):
        return self.header()["latest_sequence"]

    def replaced(self):
        """Whether the name now leads to another object (the daemon moved the stream on)."""
        try:
            return os.stat(self.path).st_ino != self._inode
        except OSError:
            return False

    def read(self, sequence):
        """Frame `sequence` if the ring still holds it: a Frame, None when not published yet (or torn 64 times in a
        row, which only a forged ring does: try again later), or the int sequence of the oldest frame still held
        when it was overwritten (lapped). Raises RingError on a damaged slot."""
        geometry = self._geometry
        count = geometry["slot_count"]
        index = (sequence - 1) % count
        slot_base = geometry["slot_table_offset"] + index * SLOT_SIZE
        data_base = geometry["slot_data_offset"] + index * geometry["slot_data_stride"]
        try:
            for _ in range(64):
                latest = self.header()["latest_sequence"]
                if sequence > latest:
                    return None
                if latest - sequence >= count:
                    return latest - count + 1
                begin = struct.unpack("<Q", self._pread(8, slot_base))[0]
                if begin == 0:
                    return latest + 1  # never written, though latest says the frame exists: this object began after it
                if begin & 1:
                    # Being written, which the writer only ever does with frame latest + 1: a frame before latest is
                    # being overwritten (lost; the next one is whole). Frame `latest` itself: wait for the futex
                    # (one slot, or a writer that died mid-write).
                    return sequence + 1 if sequence < latest else None
                raw = self._pread(SLOT_SIZE, slot_base)
                slot = {name: _unpack(SLOT, raw, 0, name) for name in SLOT}
                problem = _check_slot(slot, geometry) if slot["sequence"] == sequence else None
                data = None
                if slot["sequence"] == sequence and problem is None:
                    data = bytearray(slot["data_size"])
                    if os.preadv(self._fd, [data], data_base) < len(data):
                        raise _Shrunk()
                if struct.unpack("<Q", self._pread(8, slot_base))[0] != begin:
                    continue  # torn: the writer was here meanwhile
                if slot["sequence"] == sequence:
                    if problem:
                        raise RingError("%s: frame %d is not a valid frame: %s" % (self.path, sequence, problem))
                    return Frame(slot, data)
                # Newer: lapped (the writer only ever fills a slot with a frame up to latest, and the frame that
                # overwrote this one is `count` later: anything else is a damaged or forged ring, which would
                # otherwise send the reader back and round for ever). Older than latest says: this object began
                # after that frame.
                if slot["sequence"] > latest or (slot["sequence"] > sequence and latest - count + 1 <= sequence):
                    raise RingError("%s: slot %d claims frame %d while the ring's latest is %d: not a valid ring"
                                    % (self.path, index, slot["sequence"], latest))
                return latest - count + 1 if slot["sequence"] > sequence else latest + 1
            return None
        except _Shrunk:
            raise RingError("%s: the object shrank (truncated by someone)" % self.path) from None

    def _follow(self, patience=2.0):
        """Opens the name again once it leads to a new object; False if none came within `patience` seconds."""
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            if self.replaced():
                try:
                    self._attach()
                    return True
                except RingError:
                    pass
            time.sleep(0.01)
        return False

    def frames(self, timeout=None, start=None):
        """Yields frames from `start` (default: the next one published) on; ends when the daemon stops the
        stream or no frame arrives for `timeout` seconds. Follows the stream to a new object when the daemon
        moves it (or the object is truncated and re-created)."""
        wanted = start if start is not None else self.latest_sequence + 1
        deadline = None if timeout is None else time.monotonic() + timeout
        laps = 0
        waits = 0
        while True:
            try:
                seen = self.header()["wake_word"]
                result = self.read(wanted)
                state = self.header()["stream_state"] if result is None else None
            except RingError:
                if self._follow():
                    continue
                raise
            if isinstance(result, Frame):
                yield result
                laps = waits = 0
                wanted += 1
                deadline = None if timeout is None else time.monotonic() + timeout
                continue
            if isinstance(result, int):
                self.lapped += max(0, result - wanted)
                wanted = result
                # A real writer laps a reader a few times in a row at most; a forged ring (every slot "being
                # written", its latest moving on) can do it for ever: from the 64th lap, back off and keep the deadline.
                laps += 1
                if laps > 64:
                    time.sleep(0.001)
                    if deadline is not None and time.monotonic() >= deadline:
                        return
                continue
            if (state == STATE_REPLACED or self.replaced()) and self._follow():
                continue
            if state == STATE_STOPPED:
                return
            remaining = 1.0 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                return
            # A real writer wakes readers once a frame; a forger can change the wake word for ever, which would make
            # this loop spin: from the 64th wait in a row without a frame, each one starts with a short sleep.
            waits += 1
            if waits > 64:
                time.sleep(0.001)
            # In short waits: the waiters of a truncated object are never woken, so the name is checked between.
            self._futex.wait(self._wake_address, seen, min(remaining, 0.2))


from .color import to_bgr, to_rgb  # noqa: E402  (needs Frame above)

__all__ = ["FrameRing", "Frame", "RingError", "RingMissing", "to_rgb", "to_bgr", "PIXEL_FORMATS"]
