"""Frames as RGB or BGR arrays, for OpenCV and numpy users.

    import cv2, streamrecv
    with streamrecv.FrameRing("desk") as ring:
        for frame in ring.frames():
            cv2.imshow("desk", streamrecv.to_bgr(frame))

8-bit 4:2:0 (nv12, yuv420p), 4:2:2, 4:4:4 and gray frames; 10-bit ones are shifted to 8 bits first. The matrix
and range are the frame's own (BT.601 when unspecified, as libswscale assumes). With OpenCV installed, BT.601
limited-range 4:2:0 frames go through `cv2.cvtColor` (its only YUV matrix); everything else is converted with
numpy (chroma repeated to full size, as libswscale's unscaled converters do). numpy is needed either way.
"""

# Kr and Kb of each matrix code point (ISO/IEC 23091-2).
_MATRICES = {1: (0.2126, 0.0722), 5: (0.299, 0.114), 6: (0.299, 0.114), 9: (0.2627, 0.0593)}
_BT601 = _MATRICES[6]
_FULL_RANGE = 2


def to_rgb(frame):
    """The frame's visible picture as an height × width × 3 uint8 array in R, G, B order."""
    return _convert(frame, bgr=False)


def to_bgr(frame):
    """The frame's visible picture as an height × width × 3 uint8 array in B, G, R order (OpenCV's)."""
    return _convert(frame, bgr=True)


def _planes(frame):
    """Y, U, V as 2-D uint8 arrays (chroma at its own size), and the horizontal and vertical chroma factors."""
    import numpy

    planes = frame.numpy_planes()
    if frame.bits_per_sample > 8:
        planes = [(plane >> (frame.bits_per_sample - 8) if plane.dtype != numpy.uint8 else plane).astype(numpy.uint8)
                  for plane in planes]
    name = frame.pixel_format
    if name in ("nv12", "p010"):
        luma, chroma = planes[0], planes[1]
        return luma, chroma[:, :, 0], chroma[:, :, 1]
    if name in ("gray", "gray10le"):
        neutral = numpy.full((1, 1), 128, dtype=numpy.uint8)
        return planes[0], neutral, neutral
    if name.startswith(("yuv420p", "yuv422p", "yuv444p")):
        return planes[0], planes[1], planes[2]
    raise ValueError("cannot convert %s frames to RGB" % name)


def _full_size(plane, height, width):
    """`plane` with each sample repeated to cover height × width (ceil: odd sizes have a last half sample)."""
    import numpy

    rows, columns = -(-height // plane.shape[0]), -(-width // plane.shape[1])
    return numpy.repeat(numpy.repeat(plane, rows, axis=0), columns, axis=1)[:height, :width]


def _convert(frame, bgr):
    import numpy

    luma, u, v = _planes(frame)
    height, width = luma.shape
    kr, kb = _MATRICES.get(frame.color_matrix, _BT601)
    full = frame.color_range == _FULL_RANGE
    converted = None
    if frame.pixel_format in ("nv12", "yuv420p") and (kr, kb) == _BT601 and not full:
        converted = _with_opencv(luma, u, v, bgr)
    if converted is None:
        # Chroma repeated to the luma's size (nearest sample), as libswscale's unscaled YUV to RGB converters do.
        u, v = _full_size(u, height, width), _full_size(v, height, width)
        y = luma.astype(numpy.float32)
        cb = u.astype(numpy.float32) - 128
        cr = v.astype(numpy.float32) - 128
        if full:
            scale, chroma_scale = 1.0, 1.0
        else:
            y = y - 16
            scale, chroma_scale = 255 / 219, 255 / 224
        kg = 1 - kr - kb
        red = scale * y + chroma_scale * 2 * (1 - kr) * cr
        blue = scale * y + chroma_scale * 2 * (1 - kb) * cb
        green = scale * y - chroma_scale * (2 * kb * (1 - kb) / kg * cb + 2 * kr * (1 - kr) / kg * cr)
        channels = (blue, green, red) if bgr else (red, green, blue)
        converted = numpy.clip(numpy.rint(numpy.stack(channels, axis=-1)), 0, 255).astype(numpy.uint8)
    x, y0, visible_width, visible_height = frame.visible
    if visible_width and visible_height:
        converted = converted[y0:y0 + visible_height, x:x + visible_width]
    return converted


def _with_opencv(luma, u, v, bgr):
    """OpenCV's conversion of a BT.601 limited-range 4:2:0 picture (I420 layout), or None without OpenCV."""
    try:
        import cv2
        import numpy
    except ImportError:
        return None
    height, width = luma.shape
    if height % 2 or width % 2:
        return None
    i420 = numpy.concatenate([luma.reshape(-1), numpy.ascontiguousarray(u).reshape(-1),
                              numpy.ascontiguousarray(v).reshape(-1)]).reshape(height * 3 // 2, width)
    return cv2.cvtColor(i420, cv2.COLOR_YUV2BGR_I420 if bgr else cv2.COLOR_YUV2RGB_I420)
