#!/usr/bin/env bash
# `make bundle`: dist/streamrecvd-VERSION-linux-ARCH.tar.xz, a self-contained tree for Linux systems that are not
# Debian (or lack FFmpeg): the release binaries, stripped, with a relative RUNPATH ($ORIGIN/../lib) into a lib/
# that holds a minimal FFmpeg (scripts/build-ffmpeg-minimal.sh) and every other library they need except glibc's.
# It runs from wherever it is unpacked; the units in it assume /opt/streamrecvd. Fails above 60 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "bundle: $*" >&2; }
version=$(cat VERSION)
arch=$(uname -m)
name=streamrecvd-$version-linux-$arch
tree=.build/bundle/$name
limit=$((60 * 1024 * 1024))

ffmpeg=$(scripts/build-ffmpeg-minimal.sh)
# The daemon uses FoundationEssentials only; all of Foundation would bring ICU's 34 MB of data with it.
# grep -c reads to the end: -q stops early, and pipefail would count nm's SIGPIPE as "not found".
if nm .build/release/streamrecvd | grep -c -e icudt -e 's10Foundation' >/dev/null; then
    say "FAILED: streamrecvd links Foundation (and ICU): see MemberImportVisibility in Package.swift"; exit 1
fi
rm -rf "$tree"
mkdir -p "$tree"/{bin,lib,etc/streamrecvd,systemd,include,python} "$tree"/share/man/{man1,man5,man8} \
    "$tree/share/doc/streamrecvd/examples" dist
install -m 0755 .build/release/streamrecvd .build/release/streamrecvctl "$tree/bin/"
strip --strip-unneeded "$tree"/bin/*
cp -P "$ffmpeg"/lib/lib{avcodec,avformat,avutil,swscale}.so.* "$tree/lib/"

# glibc's own libraries come from the system: they are the one thing a Linux system always has, and must match
# its loader. Everything else the binaries and the libraries above load is copied, found the way the loader
# finds it (LD_LIBRARY_PATH puts the minimal FFmpeg first).
glibc='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libresolv|libutil)\.so'
copy_needed() {
    LD_LIBRARY_PATH=$tree/lib ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
        while read -r soname path; do
            [[ $soname =~ $glibc ]] && continue
            [ -e "$tree/lib/$soname" ] || cp -L "$path" "$tree/lib/$soname"
        done
}
copy_needed "$tree"/bin/* "$tree"/lib/*.so.*
if LD_LIBRARY_PATH=$tree/lib ldd "$tree"/bin/* "$tree"/lib/*.so.* | grep 'not found'; then
    say "FAILED: libraries not found"; exit 1
fi
for library in "$tree"/lib/*; do
    [ -L "$library" ] && continue
    chmod u+w "$library"
    strip --strip-unneeded "$library"
    patchelf --set-rpath '$ORIGIN' "$library"
done
for binary in "$tree"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$binary"; done

install -m 0644 etc/streamrecvd/streamrecvd.toml "$tree/etc/streamrecvd/"
for unit in streamrecvd.service streamrecvd@.service streamrecvd.socket streamrecvd-whip.socket streamrecvd-whip-media.socket; do
    sed -e 's|/usr/bin/streamrecvd|/opt/streamrecvd/bin/streamrecvd|g' systemd/$unit >"$tree/systemd/$unit"
done
install -m 0644 systemd/streamrecvd.sysusers "$tree/systemd/"
install -m 0644 Sources/CFrameRing/include/streamrecv_shm.h "$tree/include/"
install -m 0644 man/streamrecvctl.1 "$tree/share/man/man1/"
install -m 0644 man/streamrecvd.toml.5 "$tree/share/man/man5/"
install -m 0644 man/streamrecvd.8 "$tree/share/man/man8/"
install -m 0644 docs/examples/consumer.c "$tree/share/doc/streamrecvd/examples/"
install -m 0644 "$ffmpeg/COPYING.LGPLv2.1" "$tree/share/doc/streamrecvd/FFmpeg-COPYING.LGPLv2.1"
cp -a python/pyproject.toml python/README.md python/streamrecv "$tree/python/"
find "$tree/python" -name __pycache__ -prune -exec rm -rf {} +
glibc_needed=$(objdump -T "$tree"/bin/* "$tree"/lib/*.so.* | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
cat >"$tree/README" <<README
streamrecvd $version for Linux on $arch: receives H.264/H.265 over TCP, UDP or RTP, decodes it, and publishes
every frame in POSIX shared memory. Needs glibc ${glibc_needed#GLIBC_} or newer and nothing else; it runs from
wherever it is unpacked.

  bin/streamrecvd --config etc/streamrecvd/streamrecvd.toml       # run the default configuration
  bin/streamrecvctl cat desk --frames 100 > out.y4m               # read frames (another terminal)
  bin/streamrecvctl send clip.mp4 tcp://127.0.0.1:5000            # send a file as a live sender would

As a service: unpack to /opt/streamrecvd, copy etc/streamrecvd to /etc, systemd/*.service and *.socket to
/etc/systemd/system, systemd/streamrecvd.sysusers to /etc/sysusers.d/streamrecvd.conf, run systemd-sysusers,
then systemctl enable --now streamrecvd. lib/ holds FFmpeg $(basename "$ffmpeg" | cut -d- -f2) built with only
the H.264 and H.265 decoders (VA-API and NVDEC included), and the other libraries the binaries need.
include/ has the C header of the ring; python/ the reader (pip install ./python).
README

tar -C .build/bundle --owner=0 --group=0 --sort=name -cJf "dist/$name.tar.xz.part" "$name"
mv "dist/$name.tar.xz.part" "dist/$name.tar.xz"
size=$(stat -c %s "dist/$name.tar.xz")
say "dist/$name.tar.xz: $((size / 1024 / 1024)) MiB packed ($size bytes)," \
    "$(du -sh --apparent-size "$tree" | cut -f1) unpacked; lib/: $(ls "$tree/lib" | wc -l) entries; needs $glibc_needed"
if [ "$size" -gt "$limit" ]; then say "FAILED: larger than 60 MiB"; exit 1; fi
