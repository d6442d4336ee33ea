#!/usr/bin/env bash
# `make deb`: Debian packages built with Debian's own tools (debhelper, dpkg-shlibdeps through dh_shlibdeps, lintian)
# from the release binaries `make deb` has just built. Writes dist/streamrecvd_VERSION_ARCH.deb, and beside it
# streamrecvd-dev (the C header and example), python3-streamrecv, gstreamer1.0-streamrecv (streamrecvsrc) and
# streamrecvd-camera (the PipeWire camera) and streamrecvd-viewer (the viewer window).
# packaging/debian/ is the debian/ folder; the build runs in a copy under .build/deb, so the tree and its parent
# stay clean.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(cat VERSION)
stage=.build/deb/streamrecvd-$version
rm -rf .build/deb
mkdir -p "$stage/.build/release" "$stage/Sources/CFrameRing/include" "$stage/docs" dist
cp -a Makefile VERSION systemd etc man python "$stage/"
cp -a docs/examples "$stage/docs/"
cp Sources/CFrameRing/include/streamrecv_shm.h "$stage/Sources/CFrameRing/include/"
cp .build/release/streamrecvd .build/release/streamrecvctl "$stage/.build/release/"
mkdir -p "$stage/.build/gstreamer" && cp .build/gstreamer/libgststreamrecv.so "$stage/.build/gstreamer/"
mkdir -p "$stage/.build/pipewire" && cp .build/pipewire/streamrecv-camera "$stage/.build/pipewire/"
mkdir -p "$stage/.build/viewer" && cp .build/viewer/streamrecv-view "$stage/.build/viewer/"
rm -rf "$stage/python/build" "$stage/python/"*.egg-info
find "$stage/python" -name __pycache__ -prune -exec rm -rf {} +
cp -a packaging/debian "$stage/debian"
cat > "$stage/debian/changelog" <<CHANGELOG
streamrecvd ($version) unstable; urgency=medium

  * Built from $(git describe --always --dirty 2>/dev/null || echo "a source tree").

 -- streamrecvd developers <streamrecvd@example.org>  $(date -R)
CHANGELOG
# -d: the build dependency on the Swift toolchain cannot be stated (it is not a Debian package).
(cd "$stage" && dpkg-buildpackage -b -us -uc -d >../build.log 2>&1) || { tail -40 .build/deb/build.log >&2; exit 1; }
rm -f dist/streamrecvd_*.deb dist/streamrecvd-dev_*.deb dist/python3-streamrecv_*.deb dist/gstreamer1.0-streamrecv_*.deb dist/streamrecvd-camera_*.deb \
    dist/streamrecvd-viewer_*.deb
mv .build/deb/*.deb dist/
echo "lintian:" >&2
lintian --info --display-info dist/*_"$version"_*.deb .build/deb/*.changes 2>&1 | tee .build/deb/lintian.txt >&2 || true
for package in dist/*_"$version"_*.deb; do
    echo "$package: $(du -h "$package" | cut -f1), $(dpkg-deb -f "$package" Depends)"
done
