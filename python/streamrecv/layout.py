"""The ring's layout as docs/shm-abi.md and streamrecv_shm.h give it, and the checks a reader makes of what it reads:
nothing in the object is trusted (anyone can create one under /dev/shm)."""

import functools
import operator
import struct

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


def _unpack(fields, buffer, base, name):
    offset, fmt = fields[name]
    values = struct.unpack_from("<" + fmt, buffer, base + offset)
    return values if len(values) > 1 else values[0]


def _compile(fields):
    """One struct.Struct reading every field of `fields` at its offset (padding between), and how to regroup its
    values into fields: one unpack_from call a slot instead of one a field, its scalars picked out in C."""
    fmt, position, scalars, arrays, index = "<", 0, [], [], 0
    for name, (offset, code) in sorted(fields.items(), key=lambda item: item[1][0]):
        fmt += "%dx" % (offset - position) if offset > position else ""
        fmt += code
        size = struct.calcsize("<" + code)
        position = offset + size
        count = len(struct.unpack("<" + code, bytes(size)))
        if count == 1:
            scalars.append((name, index))
        else:
            arrays.append((name, index, index + count))
        index += count
    return struct.Struct(fmt), [name for name, _ in scalars], operator.itemgetter(*[at for _, at in scalars]), arrays


_COMPILED = {}


def _unpack_all(fields, buffer, base):
    """Every field of `fields` (HEADER or SLOT) at `base` of `buffer`, as a dict (arrays as tuples)."""
    key = id(fields)
    if key not in _COMPILED:
        _COMPILED[key] = _compile(fields)
    compiled, names, pick, arrays = _COMPILED[key]
    values = compiled.unpack_from(buffer, base)
    result = dict(zip(names, pick(values)))
    for name, first, end in arrays:
        result[name] = values[first:end]
    return result


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
            "slot_data_capacity": capacity, "total_size": total}, None


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
    # numpy views take their sample type from bits_per_sample: it must be the format's.
    if slot["bits_per_sample"] not in ((8,) if PIXEL_LAYOUTS[slot["pixel_format"]][0] == 1 else (10, 12, 16)):
        return "%d bits per sample in %s" % (slot["bits_per_sample"], PIXEL_FORMATS[slot["pixel_format"]])
    # The planes must be the picture's: a slot claiming 65535x65535 with 64x48 planes is not a frame.
    expected = _expected_planes(slot["pixel_format"], slot["width"], slot["height"])
    actual = [(slot["plane_width"][plane], slot["plane_height"][plane]) for plane in range(count)]
    if actual != expected:
        return "planes do not match the picture size (%dx%d %s)" % (
            slot["width"], slot["height"], PIXEL_FORMATS[slot["pixel_format"]])
    return None


@functools.lru_cache(maxsize=64)
def _expected_planes(pixel_format, width, height):
    """expected_planes, remembered (a stream keeps its format for many frames)."""
    return expected_planes(pixel_format, width, height)


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
