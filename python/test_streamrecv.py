"""Tests of the pure-Python reader: its offsets against the C header, and reading a ring laid out by hand
(frames, lapping, a torn slot, numpy views). The reader against the real daemon is tested by the Swift suite
(ConsumerToolTests), bit-exact against FFmpeg."""

import mmap
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import streamrecv

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
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

    def test_a_frame_whose_slot_is_being_overwritten_is_skipped(self):
        # A slow reader lapped to the oldest frame finds the writer in its slot: that frame is gone, the next is
        # whole (waiting instead chased the slot the writer fills next, for as long as the writer kept up).
        for sequence in range(1, HandMadeRing.SLOTS + 2):
            self.ring.publish(sequence, sequence * 10)
        self.ring.publish(HandMadeRing.SLOTS + 2, 99, torn=True)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            self.assertEqual(reader.read(2), 3)
            frames = list(reader.frames(timeout=0.05, start=2))
            self.assertEqual([frame.sequence for frame in frames], list(range(3, HandMadeRing.SLOTS + 2)))
            self.assertEqual(reader.lapped, 1)

    def test_a_slot_torn_at_every_copy_does_not_hold_read(self):
        # Only a forger rewrites a slot between every two reads of its seqlock: read() gives up after 64 torn copies
        # and answers "not now" (it looped for ever before), so frames() keeps its deadline.
        self.ring.publish(1, 10)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            seqlock_at = reader._geometry["slot_table_offset"]
            original, reads = reader._pread, [0]

            def forged(size, offset):
                if size == 8 and offset == seqlock_at:
                    reads[0] += 1
                    if reads[0] > 1000:
                        raise AssertionError("read() kept copying a slot torn every time")
                    return struct.pack("<Q", 2 * reads[0])
                return original(size, offset)

            reader._pread = forged
            self.assertIsNone(reader.read(1))
            self.assertEqual(list(reader.frames(timeout=0.05, start=1)), [])

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

    def test_a_name_that_is_a_path_is_refused(self):
        link = "streamrecv-link-%d" % os.getpid()
        os.symlink("/dev/shm", "/dev/shm/" + link)
        try:
            for name in (link + "/" + self.ring.name, "..", ".", "../shm/" + self.ring.name):
                with self.assertRaises(streamrecv.RingError) as caught:
                    streamrecv.FrameRing(shm_name=name)
                self.assertIn("not a plain name", str(caught.exception))
            with self.assertRaises(streamrecv.RingError):
                streamrecv.FrameRing("a/b")
        finally:
            os.unlink("/dev/shm/" + link)

    def test_what_is_not_a_ring_is_refused(self):
        with self.assertRaises(streamrecv.RingError):
            streamrecv.FrameRing("no-such-stream-%d" % os.getpid())
        struct.pack_into("<Q", self.ring.map, 0, 0)
        with self.assertRaises(streamrecv.RingError):
            streamrecv.FrameRing(shm_name=self.ring.name)


class BorrowedFrameTest(unittest.TestCase):
    """Frames read where they lie (no copy), and told apart from ones the writer reused meanwhile."""

    def setUp(self):
        self.ring = HandMadeRing("-borrow")

    def tearDown(self):
        self.ring.close()

    def test_a_borrowed_frame_is_the_slot_and_knows_when_it_was_overtaken(self):
        self.ring.publish(1, 10)
        self.ring.publish(2, 20)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            frame = reader.read(1, borrow=True)
            self.assertIsInstance(frame, streamrecv.BorrowedFrame)
            self.assertEqual(frame.packed(), bytes([10] * 8 + [11] * 2 + [12] * 2))
            self.assertTrue(frame.still_valid())
            # The slot itself, not a copy: the writer's next bytes there show through.
            data = self.ring.slot_data
            self.ring.map[data] = 77
            self.assertEqual(frame.data[0], 77)
            self.ring.map[data] = 10
            self.ring.publish(3, 30)  # into frame 1's slot
            self.assertFalse(frame.still_valid())
            self.assertEqual(reader.read(1, borrow=True), 2, "lapped, as a copying read says")
            self.assertIsNone(reader.read(4, borrow=True))
            frames = list(reader.frames(timeout=0.05, start=2, borrow=True))
            self.assertEqual([(f.sequence, f.plane(0)[0], f.still_valid()) for f in frames], [(2, 20, True), (3, 30, True)])
            self.assertTrue(reader.read(2).still_valid(), "a copy is always its frame")

    def test_numpy_planes_of_a_borrowed_frame_are_views_of_the_ring(self):
        try:
            import numpy  # noqa: F401
        except ImportError:
            self.skipTest("numpy is not installed (the reader works without it)")
        self.ring.publish(1, 10)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            frame = reader.read(1, borrow=True)
            luma, u, v = frame.numpy_planes()
            self.assertEqual(int(luma.sum()), 80)
            self.assertFalse(luma.flags.writeable, "the ring is mapped read-only")
            self.ring.map[self.ring.slot_data + 1] = 50
            self.assertEqual(int(luma[0, 1]), 50, "a view of the slot, not a copy")
            self.assertTrue(frame.still_valid(), "a byte changed behind the seqlock's back is not the writer's doing")

    def test_the_reader_can_close_while_borrowed_frames_live(self):
        self.ring.publish(1, 10)
        reader = streamrecv.FrameRing(shm_name=self.ring.name)
        frame = reader.read(1, borrow=True)
        reader.close()
        self.assertEqual(frame.plane(0), bytes([10] * 8))
        self.assertTrue(frame.still_valid())

    @unittest.skipUnless(os.geteuid() == 0, "needs root to give the object to another user")
    def test_an_object_no_trusted_user_owns_is_not_mapped(self):
        self.ring.publish(1, 10)
        os.chown(self.ring.path, 65534, 65534)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            self.assertEqual(reader.read(1).plane(0), bytes([10] * 8), "copies are read from anyone's object")
            with self.assertRaises(streamrecv.RingError) as caught:
                reader.read(1, borrow=True)
            self.assertIn("uid 65534, not a trusted user", str(caught.exception))
            with self.assertRaises(streamrecv.RingError):
                next(reader.frames(timeout=0.05, borrow=True))
        with streamrecv.FrameRing(shm_name=self.ring.name, trusted_uids=[65534]) as reader:
            self.assertTrue(reader.read(1, borrow=True).still_valid())

    def test_an_object_others_could_shrink_is_not_mapped(self):
        # Found by attacking the reader: write permission for a group, or a second name made by someone who can
        # write a trusted object, lets them truncate it under a borrowing reader (SIGBUS) whoever owns it.
        self.ring.publish(1, 10)
        os.chmod(self.ring.path, 0o660)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            with self.assertRaises(streamrecv.RingError) as caught:
                reader.read(1, borrow=True)
            self.assertIn("writable by its group or others (mode 0660)", str(caught.exception))
        os.chmod(self.ring.path, 0o644)
        link = self.ring.path + "-link"
        os.link(self.ring.path, link)
        try:
            with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
                with self.assertRaises(streamrecv.RingError) as caught:
                    reader.read(1, borrow=True)
                self.assertIn("2 names (hard links)", str(caught.exception))
        finally:
            os.unlink(link)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            os.truncate(self.ring.path, streamrecv.HEADER_SIZE)  # after attaching, before the first borrow
            with self.assertRaises(streamrecv.RingError) as caught:
                reader.read(1, borrow=True)
            self.assertIn("it shrank", str(caught.exception))

    def test_no_overtaken_borrow_is_ever_valid(self):
        # A writer thread rewrites both slots as fast as it can while frames are borrowed and looked at: every
        # frame still valid afterwards saw its own bytes, and some were overtaken.
        self.ring.publish(1, 1)
        stop = threading.Event()

        def write():
            sequence = 1
            while not stop.is_set():
                sequence += 1
                self.ring.publish(sequence, sequence % 200)
                time.sleep(0)  # hand the GIL over: the reader must get whole frames as well as overtaken ones

        writer = threading.Thread(target=write)
        writer.start()
        held = overtaken = torn = 0
        try:
            with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline and (held < 100 or overtaken < 5):
                    frame = reader.read(reader.latest_sequence, borrow=True)
                    if not isinstance(frame, streamrecv.BorrowedFrame):
                        continue
                    looked = frame.packed()
                    time.sleep(0)  # let the writer in
                    whole = looked == bytes([frame.sequence % 200] * 8 + [frame.sequence % 200 + 1] * 2 + [frame.sequence % 200 + 2] * 2)
                    if frame.still_valid():
                        held += 1
                        torn += not whole
                    else:
                        overtaken += 1
        finally:
            stop.set()
            writer.join()
        self.assertEqual(torn, 0, "torn frames were valid")
        self.assertGreater(held, 0)
        self.assertGreater(overtaken, 0)


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

    def test_slots_claiming_frames_past_latest_end_the_reader(self):
        # Every slot claims frame 1000 while latest says 10, then 11: a reader trusting "newer, so I was lapped"
        # went back to frame 4 and round again for ever, at full CPU (found by attacking the reader).
        for index in range(self.ring.SLOTS):
            self.ring.publish(index + 1, 10)
        for index in range(self.ring.SLOTS):
            self.ring.put(streamrecv.SLOT, self.ring.slot_table + index * 256, sequence=1000)
        self.ring.put(streamrecv.HEADER, 0, latest_sequence=11)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            with self.assertRaises(streamrecv.RingError) as caught:
                for _ in reader.frames(timeout=2, start=10):
                    pass
            self.assertIn("not a valid ring", str(caught.exception))

    def test_bits_per_sample_must_be_the_formats(self):
        # numpy views take their sample type from it: 16 bits in an 8-bit format made numpy_planes() raise
        # ValueError instead of the reader refusing the slot.
        self.ring.publish(1, 10)
        self.ring.put(streamrecv.SLOT, self.ring.slot_table, bits_per_sample=16)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            for borrow in (False, True):
                with self.assertRaises(streamrecv.RingError) as caught:
                    reader.read(1, borrow=borrow)
                self.assertIn("16 bits per sample in yuv420p", str(caught.exception))

    def test_a_reader_that_stalled_after_reading_latest_is_lapped_not_refused(self):
        # A reader paused between reading latest and the slot finds a frame newer than the latest it read: the
        # writer went on meanwhile. It was taken for a forged ring ("not a valid ring") after a 100 ms stall.
        for sequence in range(1, 6):
            self.ring.publish(sequence, sequence * 10)  # slot 0 holds 5, slot 1 holds 4
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            real, calls = reader.header, [0]

            def stale():
                calls[0] += 1
                values = real()
                if calls[0] == 1:
                    values["latest_sequence"] = 2
                return values

            reader.header = stale
            self.assertEqual(reader.read(1), 4, "lapped to the oldest frame slot 0's frame 5 leaves")

    def test_a_name_replaced_again_and_again_keeps_the_deadline(self):
        # Someone who owns the name renames a new object over it every 0.2 s, each saying "replaced": the reader
        # followed each one for ever, whatever its timeout.
        self.ring.publish(1, 10)
        stop = threading.Event()

        def replace():
            # For 12 s at most: a reader that follows for ever then ends late and fails, instead of hanging the run.
            number, until = 0, time.monotonic() + 12
            while not stop.wait(0.2) and time.monotonic() < until:
                number += 1
                planted = HandMadeRing("-planted%d" % number)
                planted.put(streamrecv.HEADER, 0, stream_state=streamrecv.STATE_REPLACED)
                os.rename(planted.path, self.ring.path)
                planted.map.close()
                planted.file.close()

        replacer = threading.Thread(target=replace)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            self.ring.put(streamrecv.HEADER, 0, stream_state=streamrecv.STATE_REPLACED)
            replacer.start()
            try:
                began = time.monotonic()
                self.assertEqual(list(reader.frames(timeout=1, start=2)), [])
                self.assertLess(time.monotonic() - began, 8, "timeout=1 must hold across the replacements")
            finally:
                stop.set()
                replacer.join()

    def test_a_slot_whose_planes_are_not_its_picture_is_refused(self):
        """Each lie about a slot's planes, one at a time, on a good 4x2 yuv420p frame: a RingError naming it."""
        lies = (
            ({"width": 65535, "height": 65535}, "planes do not match the picture size (65535x65535"),
            ({"width": 0}, "picture size out of range"),
            ({"width": 65536}, "picture size out of range"),
            ({"plane_width": (64, 2, 2, 0), "plane_stride": (64, 64, 64, 0)}, "planes do not match"),
            ({"plane_height": (48, 1, 1, 0)}, "plane outside the data"),
            ({"plane_height": (1, 1, 1, 0)}, "planes do not match"),
            ({"plane_count": 2}, "planes do not match"),
            ({"plane_count": 5}, "plane count out of range"),
            ({"pixel_format": 2}, "planes do not match"),  # nv12 has two planes
            ({"pixel_format": 99}, "unknown pixel format"),
            ({"plane_offset": (0, 128, 255, 0)}, "plane outside the data"),
            ({"plane_stride": (2, 64, 64, 0)}, "plane rows out of range"),
            ({"plane_stride": (1 << 31, 64, 64, 0)}, "plane outside the data"),
            ({"data_size": 1 << 20}, "data larger than the slot"),
            ({"data_size": 100}, "plane outside the data"),
        )
        for sequence, (fields, reason) in enumerate(lies, start=1):
            self.ring.publish(sequence, 10)
            slot = self.ring.slot_table + (sequence - 1) % self.ring.SLOTS * streamrecv.SLOT_SIZE
            self.ring.put(streamrecv.SLOT, slot, **fields)
            with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
                with self.assertRaises(streamrecv.RingError, msg=str(fields)) as caught:
                    reader.read(sequence)
                self.assertIn(reason, str(caught.exception), str(fields))
        # And the same ring with a true slot reads.
        self.ring.publish(len(lies) + 1, 10)
        with streamrecv.FrameRing(shm_name=self.ring.name) as reader:
            frame = reader.read(len(lies) + 1)
            self.assertEqual((frame.width, frame.height, frame.plane(0)), (4, 2, bytes([10] * 8)))

    def test_expected_planes_of_every_format(self):
        self.assertEqual(streamrecv.expected_planes(1, 5, 3), [(5, 3), (3, 2), (3, 2)])
        self.assertEqual(streamrecv.expected_planes(2, 5, 3), [(5, 3), (6, 2)])
        self.assertEqual(streamrecv.expected_planes(3, 4, 2), [(8, 2), (8, 1)])
        self.assertEqual(streamrecv.expected_planes(8, 4, 2), [(8, 2), (4, 2), (4, 2)])
        self.assertEqual(streamrecv.expected_planes(10, 4, 2), [(8, 2)])
        self.assertEqual(streamrecv.expected_planes(14, 4, 2), [(4, 2)] * 3)
        self.assertEqual(sorted(streamrecv.PIXEL_LAYOUTS), sorted(streamrecv.PIXEL_FORMATS))

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


class WaitingTest(unittest.TestCase):
    """Consumers often start before the daemon has made the ring (socket activation)."""

    def test_a_ring_that_appears_later_is_waited_for(self):
        holder = {}

        def create():
            time.sleep(0.3)
            holder["ring"] = HandMadeRing(suffix="-late")
            holder["ring"].publish(1, 10)

        creator = threading.Thread(target=create)
        told = []
        creator.start()
        try:
            with streamrecv.FrameRing.wait_for(shm_name="streamrecv-pytest-%d-late" % os.getpid(), timeout=10,
                                               waiting=lambda: told.append(1)) as reader:
                self.assertEqual(reader.read(1).plane(0)[0], 10)
            self.assertEqual(told, [1], "told once that it waits")
        finally:
            creator.join()
            holder["ring"].close()

    def test_a_ring_that_never_appears_times_out_and_a_non_ring_fails_at_once(self):
        started = time.monotonic()
        with self.assertRaises(TimeoutError):
            streamrecv.FrameRing.wait_for(shm_name="streamrecv-pytest-%d-never" % os.getpid(), timeout=0.2)
        self.assertGreaterEqual(time.monotonic() - started, 0.2)
        path = "/dev/shm/streamrecv-pytest-%d-junk" % os.getpid()
        with open(path, "wb") as handle:
            handle.write(b"junk" * 2048)
        try:
            started = time.monotonic()
            with self.assertRaises(streamrecv.RingError) as caught:
                streamrecv.FrameRing.wait_for(shm_name=os.path.basename(path), timeout=30)
            self.assertNotIsInstance(caught.exception, streamrecv.RingMissing)
            self.assertLess(time.monotonic() - started, 5, "not waited for: waiting cannot make it a ring")
        finally:
            os.unlink(path)

    def test_the_command_line_waits_and_exits_2_on_timeout(self):
        result = subprocess.run([sys.executable, "-m", "streamrecv", "pytest-absent-%d" % os.getpid(), "--timeout", "0.3"],
                                capture_output=True, text=True, cwd=HERE)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("waiting for /dev/shm/streamrecv-pytest-absent", result.stderr)
        self.assertIn("did not appear within 0.3 s", result.stderr)


    def test_the_command_line_borrows_when_asked_where_it_may(self):
        # Copied by default (a truncation by anyone is then never SIGBUS); with --borrow, packed from the slot where
        # the ring may be borrowed from, copied with the reason elsewhere. Either way the frame published after it
        # attached, packed.
        for mode, arguments, note in ((0o640, [], None), (0o640, ["--borrow"], None), (0o660, ["--borrow"], "copying: ")):
            ring = HandMadeRing("-cli%o%d" % (mode, len(arguments)))
            try:
                ring.publish(1, 10)
                os.chmod(ring.path, mode)
                name = ring.name[len("streamrecv-"):]
                process = subprocess.Popen([sys.executable, "-m", "streamrecv", name, "--frames", "1", "--timeout", "10"]
                                           + arguments, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=HERE)
                said = process.stderr.readline().decode()
                self.assertIn("attached to %s" % ring.name, said)
                self.assertEqual("copying: " in said, note is not None, said)
                ring.publish(2, 40)
                output, errors = process.communicate(timeout=20)
                self.assertEqual(process.returncode, 0, errors)
                self.assertEqual(output, bytes([40] * 8 + [41] * 2 + [42] * 2))
            finally:
                ring.close()

class FakeFrame:
    """A decoded picture as `Frame` presents it, from planes FFmpeg wrote (no ring needed)."""

    def __init__(self, pixel_format, planes, color_range=1, color_matrix=2):
        self.pixel_format, self.bits_per_sample = pixel_format, 8
        self.color_range, self.color_matrix = color_range, color_matrix
        self._planes = planes
        self.visible = (0, 0, planes[0].shape[1], planes[0].shape[0])

    def numpy_planes(self):
        return self._planes


@unittest.skipUnless(shutil.which("ffmpeg"), "ffmpeg is needed for the reference conversion")
class ColorTest(unittest.TestCase):
    """`to_rgb`/`to_bgr` against libswscale's conversion of the same decoded pictures (`ffmpeg -pix_fmt bgr24`)."""

    WIDTH, HEIGHT = 320, 240

    def compare(self, frame_format, reference_args, color_range, color_matrix):
        """Two pictures in yuv420p (what libavcodec's H.264 decoder gives FFmpeg's CLI), converted to BGR by
        libswscale as `ffmpeg -i STREAM -pix_fmt bgr24` does, against `to_bgr` of the same samples laid out as
        `frame_format` (nv12: the same chroma, interleaved, as the daemon publishes it)."""
        import numpy
        width, height = self.WIDTH, self.HEIGHT
        raw = subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=%dx%d:rate=25" % (width, height),
                              "-frames:v", "2", "-pix_fmt", "yuv420p", "-f", "rawvideo", "-"],
                             check=True, capture_output=True).stdout
        converted = subprocess.run(["ffmpeg", "-v", "error", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-s",
                                    "%dx%d" % (width, height), "-i", "-", *reference_args, "-pix_fmt", "bgr24",
                                    "-f", "rawvideo", "-"], input=raw, check=True, capture_output=True).stdout
        reference = numpy.frombuffer(converted, dtype=numpy.uint8).reshape(2, height, width, 3)
        pictures = numpy.frombuffer(raw, dtype=numpy.uint8).reshape(2, -1)
        worst = 0
        for index in range(2):
            luma = pictures[index][:width * height].reshape(height, width)
            quarter = width * height // 4
            u = pictures[index][width * height:width * height + quarter].reshape(height // 2, width // 2)
            v = pictures[index][width * height + quarter:].reshape(height // 2, width // 2)
            planes = [luma, numpy.stack([u, v], axis=-1)] if frame_format == "nv12" else [luma, u, v]
            frame = FakeFrame(frame_format, planes, color_range, color_matrix)
            bgr = streamrecv.to_bgr(frame)
            self.assertEqual(bgr.shape, (height, width, 3))
            self.assertTrue((streamrecv.to_rgb(frame) == bgr[:, :, ::-1]).all())
            difference = numpy.abs(bgr.astype(int) - reference[index].astype(int))
            worst = max(worst, int(difference.max()))
            # Rounding differs (libswscale works in fixed point): a step or two, on average well under one.
            self.assertLess(float(difference.mean()), 1.0, "%s: mean difference %.2f" % (frame_format, difference.mean()))
        self.assertLessEqual(worst, 3, "%s %s: largest difference %d" % (frame_format, reference_args, worst))
        print("%s %s: largest difference from libswscale %d" % (frame_format, " ".join(reference_args) or "bt601", worst),
              file=sys.stderr)

    def test_bt601_limited_nv12_and_yuv420p(self):
        self.compare("nv12", [], color_range=1, color_matrix=2)
        self.compare("yuv420p", [], color_range=1, color_matrix=6)

    def test_bt709_limited(self):
        self.compare("yuv420p", ["-vf", "scale=in_color_matrix=bt709"], color_range=1, color_matrix=1)

    def test_opencv_converts_bt601_limited_4_2_0(self):
        """With OpenCV (python3-opencv, which `make test` installs) BT.601 limited-range NV12 and yuv420p go through
        `cv2.cvtColor`, and still match libswscale."""
        import cv2  # noqa: F401  (an ImportError here means make test's packages are missing)
        import streamrecv.color as color
        original, used = color._with_opencv, []

        def spy(*arguments):
            converted = original(*arguments)
            used.append(converted is not None)
            return converted
        color._with_opencv = spy
        try:
            self.compare("nv12", [], color_range=1, color_matrix=2)
            self.compare("yuv420p", [], color_range=1, color_matrix=5)
        finally:
            color._with_opencv = original
        self.assertEqual(used, [True] * 8, "every conversion (to_bgr and to_rgb of 4 pictures) through cv2.cvtColor")

    def test_numpy_converts_when_opencv_is_absent(self):
        """Without OpenCV the same pictures are converted with numpy, as closely."""
        import streamrecv.color as color
        original = color._with_opencv
        color._with_opencv = lambda *arguments: None
        try:
            self.compare("nv12", [], color_range=1, color_matrix=2)
        finally:
            color._with_opencv = original


class PackageTest(unittest.TestCase):
    """`pip install` into a fresh virtual environment: the package, `python -m streamrecv`, the script."""

    def test_pip_install_into_a_fresh_venv(self):
        with tempfile.TemporaryDirectory() as directory:
            # Built from a copy: setuptools writes build/ and *.egg-info beside the sources it builds.
            source = os.path.join(directory, "source")
            shutil.copytree(HERE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
            environment = os.path.join(directory, "venv")
            subprocess.run([sys.executable, "-m", "venv", environment], check=True)
            python = os.path.join(environment, "bin", "python")
            install = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", source],
                                     capture_output=True, text=True, cwd=directory)
            self.assertEqual(install.returncode, 0, install.stdout + install.stderr)
            imported = subprocess.run([python, "-c", "import streamrecv, streamrecv.color; print(streamrecv.__file__)"],
                                      check=True, capture_output=True, text=True, cwd=directory).stdout
            self.assertTrue(imported.startswith(environment), "imported from the venv: " + imported)
            usage = subprocess.run([python, "-m", "streamrecv", "--help"], capture_output=True, text=True, cwd=directory)
            self.assertEqual(usage.returncode, 0, usage.stderr)
            self.assertIn("--frames", usage.stdout)
            script = subprocess.run([os.path.join(environment, "bin", "streamrecv-cat"), "absent", "--timeout", "0"],
                                    capture_output=True, text=True, cwd=directory)
            self.assertEqual(script.returncode, 2, script.stderr)


if __name__ == "__main__":
    unittest.main()
