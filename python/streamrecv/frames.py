"""Frames as readers hand them out: copied out of the ring (Frame), or borrowed where they lie (BorrowedFrame)."""

import struct

from .layout import FLAG_CORRUPT, FLAG_DISCONTINUITY, FLAG_KEYFRAME, PIXEL_FORMATS


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

    def still_valid(self):
        """A copied frame was checked whole when it was copied: always True (see BorrowedFrame)."""
        return True

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


class BorrowedFrame(Frame):
    """A frame read where it lies: `data` is a read-only view of its slot in the ring, nothing was copied. The
    writer may reuse the slot at any moment: whatever was computed from the planes is the frame's only if
    `still_valid()` is True afterwards. Copy what you keep (`packed()`, or `.copy()` of a numpy plane)."""

    def __init__(self, slot, data, mapping, seqlock_offset, begin):
        super().__init__(slot, data)
        self._mapping, self._seqlock_offset, self._begin = mapping, seqlock_offset, begin

    def still_valid(self):
        """Whether the writer has left the slot alone since the frame was borrowed (its seqlock unchanged)."""
        return struct.unpack_from("<Q", self._mapping, self._seqlock_offset)[0] == self._begin
