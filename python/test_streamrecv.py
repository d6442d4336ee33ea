"""Tests of the pure-Python reader: its offsets against the C header, and reading a ring laid out by hand
(frames, lapping, a torn slot, numpy views). The reader against the real daemon is tested by the Swift suite
(ConsumerToolTests), bit-exact against FFmpeg."""

import mmap
import os
import shutil
import struct
import subprocess
import tempfile
import unittest

import streamrecv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER_INCLUDE = os.path.join(ROOT, "Sources", "CFrameRing", "include")


class OffsetsTest(unittest.TestCase):
    @unittest.skipUnless(shutil.which("cc"), "needs a C compiler")
    def test_offsets_match_the_c_header(self):
        lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "streamrecv_shm.h"', "int main(void) {"]
        for struct_name, fields in (("header", streamrecv.HEADER), ("slot", streamrecv.SLOT)):
            for field in fields:
                lines.append('printf("%s %s %%zu %%zu\\n", offsetof(struct streamrecv_shm_%s, %s), '
                             'sizeof(((struct streamrecv_shm_%s *)0)->%s));'
                             % (struct_name, field, struct_name, field, struct_name, field))
        lines.append("return 0; }")
        with tempfile.TemporaryDirectory() as directory:
            source, binary = os.path.join(directory, "offsets.c"), os.path.join(directory, "offsets")
            with open(source, "w") as handle:
                handle.write("\n".join(lines))
            subprocess.run(["cc", "-std=c11", "-I", HEADER_INCLUDE, source, "-o", binary], check=True)
            output = subprocess.run([binary], check=True, capture_output=True, text=True).stdout
        for line in output.splitlines():
            struct_name, field, offset, size = line.split()
            fields = streamrecv.HEADER if struct_name == "header" else streamrecv.SLOT
            self.assertEqual(fields[field][0], int(offset), "%s.%s offset" % (struct_name, field))
            self.assertEqual(struct.calcsize("<" + fields[field][1]), int(size), "%s.%s size" % (struct_name, field))


class HandMadeRing:
    """A ring written field by field at the documented offsets: 2 slots of 4x2 yuv420p (8 + 2 + 2 bytes)."""

    SLOTS, WIDTH, HEIGHT, STRIDE = 2, 4, 2, 64

    def __init__(self, suffix=""):
        self.name = "streamrecv-pytest-%d%s" % (os.getpid(), suffix)
        self.path = "/dev/shm/" + self.name
        self.slot_table = streamrecv.HEADER_SIZE
        self.slot_data = self.slot_table + self.SLOTS * streamrecv.SLOT_SIZE
        self.data_stride = 4096
        self.total = self.slot_data + self.SLOTS * self.data_stride
        with open(self.path, "wb") as handle:
            handle.write(bytes(self.total))  # every page allocated, as the daemon's posix_fallocate does
        self.file = open(self.path, "r+b")
        self.map = mmap.mmap(self.file.fileno(), self.total)
        self.put(streamrecv.HEADER, 0, magic=streamrecv.MAGIC, abi_version=1, header_size=4096, slot_size=256,
                 slot_count=self.SLOTS, slot_table_offset=self.slot_table, slot_data_offset=self.slot_data,
                 slot_data_stride=self.data_stride, slot_data_capacity=self.data_stride, total_size=self.total,
                 max_width=self.WIDTH, max_height=self.HEIGHT, stream_state=2, stream_name=b"pytest", codec=b"h264")

    def put(self, fields, base, **values):
        for name, value in values.items():
            offset, fmt = fields[name]
            if isinstance(value, tuple):
                struct.pack_into("<" + fmt, self.map, base + offset, *value)
            else:
                struct.pack_into("<" + fmt, self.map, base + offset, value)

    def publish(self, sequence, luma_value, torn=False):
        index = (sequence - 1) % self.SLOTS
        slot, data = self.slot_table + index * 256, self.slot_data + index * self.data_stride
        seqlock = struct.unpack_from("<Q", self.map, slot)[0]
        self.put(streamrecv.SLOT, slot, seqlock=seqlock + 1)
        planes = [(0, 4, 2), (self.STRIDE * 2, 2, 1), (self.STRIDE * 3, 2, 1)]
        for number, (offset, width, rows) in enumerate(planes):
            for row in range(rows):
                self.map[data + offset + row * self.STRIDE:data + offset + row * self.STRIDE + width] = \
                    bytes([luma_value + number] * width)
        self.put(streamrecv.SLOT, slot, sequence=sequence, pixel_format=1, plane_count=3, width=4, height=2,
                 bits_per_sample=8, flags=streamrecv.FLAG_KEYFRAME, plane_offset=(0, 128, 192, 0),
                 plane_stride=(64, 64, 64, 0), plane_width=(4, 2, 2, 0), plane_height=(2, 1, 1, 0), data_size=256,
                 pts=sequence * 3000)
        if not torn:
            self.put(streamrecv.SLOT, slot, seqlock=seqlock + 2)
            self.put(streamrecv.HEADER, 0, latest_sequence=sequence)

    def close(self):
        self.map.close()
        self.file.close()
        os.unlink(self.path)


class ReaderTest(unittest.TestCase):
    def setUp(self):
        self.ring = HandMadeRing()

    def tearDown(self):
        self.ring.close()

    def test_reads_planes_without_padding(self):
        self.ring.publish(1, 10)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            self.assertEqual(reader.header()["stream_name"], "pytest")
            frame = reader.read(1)
            self.assertEqual((frame.width, frame.height, frame.pixel_format, frame.pts), (4, 2, "yuv420p", 3000))
            self.assertTrue(frame.keyframe)
            self.assertEqual(frame.packed(), bytes([10] * 8 + [11] * 2 + [12] * 2))
            self.assertIsNone(reader.read(2), "not published yet")

    def test_a_lapped_reader_skips_to_the_oldest_frame_held(self):
        for sequence in (1, 2, 3):
            self.ring.publish(sequence, sequence * 10)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            self.assertEqual(reader.read(1), 2, "slot of frame 1 now holds frame 3; frame 2 is the oldest")
            frames = list(reader.frames(timeout=0.05, start=1))
            self.assertEqual([frame.sequence for frame in frames], [2, 3])
            self.assertEqual(reader.lapped, 1)

    def test_a_slot_being_written_is_not_read(self):
        self.ring.publish(1, 10)
        self.ring.publish(2, 20, torn=True)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            self.assertEqual([frame.sequence for frame in reader.frames(timeout=0.05, start=1)], [1])

    def test_numpy_views(self):
        try:
            import numpy  # noqa: F401
        except ImportError:
            self.skipTest("numpy is not installed (the reader works without it)")
        self.ring.publish(1, 10)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            luma, u, v = reader.read(1).numpy_planes()
            self.assertEqual(luma.shape, (2, 4))
            self.assertEqual(int(luma.sum()), 80)
            self.assertEqual(u.tolist(), [[11, 11]])

    def test_what_is_not_a_ring_is_refused(self):
        with self.assertRaises(streamrecv.RingError):
            streamrecv.FrameRing("no-such-stream-%d" % os.getpid())
        struct.pack_into("<Q", self.ring.map, 0, 0)
        with self.assertRaises(streamrecv.RingError):
            streamrecv.FrameRing(shm_name=self.ring.name)


class UntrustedRingTest(unittest.TestCase):
    """Anyone can create an object under /dev/shm: every lie in it is a RingError, never a crash."""

    def setUp(self):
        self.ring = HandMadeRing()

    def tearDown(self):
        self.ring.close()

    def test_forged_geometry_is_refused_with_a_reason(self):
        for field, value, reason in (("slot_data_stride", 1 << 62, "slot data beyond total_size"),
                                     ("slot_count", 0, "slot count"),
                                     ("slot_data_offset", (1 << 64) - 100, "slot data beyond total_size"),
                                     ("slot_table_offset", 4097, "slot table offset"),
                                     ("total_size", 1 << 40, "total_size larger than the object")):
            saved = streamrecv._unpack(streamrecv.HEADER, self.ring.map, 0, field)
            self.ring.put(streamrecv.HEADER, 0, **{field: value})
            with self.assertRaises(streamrecv.RingError) as caught:
                streamrecv.FrameRing(shm_name=self.ring.name)
            self.assertIn(reason, str(caught.exception))
            self.ring.put(streamrecv.HEADER, 0, **{field: saved})

    def test_a_forged_slot_is_refused_when_read(self):
        self.ring.publish(1, 10)
        self.ring.put(streamrecv.SLOT, self.ring.slot_table, plane_offset=(1 << 40, 128, 192, 0))
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            with self.assertRaises(streamrecv.RingError) as caught:
                reader.read(1)
            self.assertIn("plane outside the data", str(caught.exception))

    def test_a_ring_truncated_under_the_reader_is_an_error_not_a_crash(self):
        self.ring.publish(1, 10)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            os.truncate(self.ring.path, 100)
            with self.assertRaises(streamrecv.RingError) as caught:
                reader.read(1)
            self.assertIn("shrank", str(caught.exception))
            with self.assertRaises(streamrecv.RingError):
                list(reader.frames(timeout=0.1, start=1))

    def test_the_reader_follows_the_stream_to_a_new_object(self):
        self.ring.publish(1, 10)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            self.assertEqual(reader.read(1).sequence, 1)
            old = self.ring
            self.ring = HandMadeRing(suffix="-next")
            self.ring.publish(1, 30)
            self.ring.publish(2, 40)
            os.rename(self.ring.path, old.path)
            self.ring.path = old.path
            old.put(streamrecv.HEADER, 0, stream_state=streamrecv.STATE_REPLACED)
            old.map.close()
            old.file.close()
            frames = list(reader.frames(timeout=0.2, start=2))
            self.assertEqual([(frame.sequence, frame.plane(0)[0]) for frame in frames], [(2, 40)])


if __name__ == "__main__":
    unittest.main()
