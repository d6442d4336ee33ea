#!/usr/bin/env bash
# `make test-systemd`: the packaged units under a real systemd as PID 1. Builds a Debian 12 root (debootstrap
# minbase, then systemd, udev, Debian's kernel and initramfs, and dist/streamrecvd_*.deb through apt), makes it an
# ext4 disk image (mkfs.ext4 -d, no loop device), and boots it with qemu-system-x86_64 (KVM when asked
# or software emulation). Inside, scripts/vm/vmcheck.sh runs as a unit and exercises Type=notify
# readiness, a stream through the service, `systemctl reload` with a changed and with a broken configuration,
# socket activation, the watchdog restarting a stalled daemon, and `systemd-analyze security`; its report comes
# back on the serial console, the socket-activated stream's frames on a second disk, checked against FFmpeg.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /var/tmp/streamrecvd-vm.XXXXXX)
say() { echo "systemd VM test: $*" >&2; }
source scripts/debian-root.sh
trap 'umount "$root/proc" 2>/dev/null || true; rm -rf "$work"' EXIT
make_debian_root || exit 0
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    systemd systemd-sysv udev dbus linux-image-amd64 initramfs-tools "./tmp/$(basename "$deb")" \
    >"$work/apt.log" 2>&1 || { tail -30 "$work/apt.log" >&2; exit 1; }
say "root with systemd $(in_root dpkg-query -W -f '${Version}' systemd) and $(ls "$root"/boot | grep vmlinuz)"

# The check, as a unit of its own, and its material: a clip and nothing else of the host.
mkdir -p "$root/var/lib/vmcheck"
ffmpeg -v error -f lavfi -i testsrc2=size=640x360:rate=30 -frames:v 60 -c:v libx264 -preset veryfast \
    -x264-params aud=1:bframes=2 -f h264 "$root/var/lib/vmcheck/clip.h264"
install -m 0755 scripts/vm/vmcheck.sh "$root/usr/local/sbin/vmcheck"
cat >"$root/etc/systemd/system/vmcheck.service" <<UNIT
[Unit]
Description=exercise the streamrecvd units
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/vmcheck
UNIT
mkdir -p "$root/etc/systemd/system/default.target.wants"
ln -sf /etc/systemd/system/vmcheck.service "$root/etc/systemd/system/default.target.wants/vmcheck.service"
# The report is written to the serial console: no login prompt there (a getty's vhangup would cut the report off).
ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"
echo "/dev/vda / ext4 defaults 0 1" >"$root/etc/fstab"
echo vmcheck >"$root/etc/hostname"
kernel=$(ls "$root"/boot/vmlinuz-* | head -1)
initrd=$(ls "$root"/boot/initrd.img-* | head -1)
cp "$kernel" "$initrd" "$work/"
mkfs.ext4 -q -F -L root -d "$root" "$work/disk.img" 3G
truncate -s 64M "$work/frames.img"

boot() { # boot ACCELERATION…: the VM until it powers itself off (or 15 minutes pass)
    timeout 900 qemu-system-x86_64 "$@" -m 1536 -smp 2 -nic none -display none -monitor none \
        -serial file:"$work/console.log" -no-reboot \
        -kernel "$work/$(basename "$kernel")" -initrd "$work/$(basename "$initrd")" \
        -append "console=ttyS0 root=/dev/vda rw systemd.show_status=0" \
        -drive file="$work/disk.img",format=raw,if=virtio -drive file="$work/frames.img",format=raw,if=virtio
}
started=$(date +%s)
# Software emulation by default: on this project's machines (themselves VMs) nested KVM either refuses the guest's
# CPU set-up (-cpu host) or boots nothing visible. STREAMRECVD_VM_ACCEL=kvm tries KVM.
if [ "${STREAMRECVD_VM_ACCEL:-tcg}" = kvm ]; then
    boot -enable-kvm || say "qemu exited with $?"
else
    boot -machine accel=tcg || say "qemu exited with $?"
fi
cp "$work/console.log" .build/test-systemd-console.log 2>/dev/null || true
say "the VM ran $(( $(date +%s) - started )) s"
grep -a '^VMCHECK' "$work/console.log" | tr -d '\r' | tee "$work/report.txt"
grep -q '^VMCHECK done' "$work/report.txt" || { say "FAILED: the check did not finish"; tail -40 "$work/console.log" >&2; exit 1; }

# The socket-activated stream's frames, back from the second disk, against FFmpeg's decode of the clip.
bytes=$(sed -n 's/.* frames, \([0-9]*\) bytes.*/\1/p' "$work/report.txt" | head -1)
head -c "${bytes:-0}" "$work/frames.img" >"$work/activated.y4m"
ffmpeg -v error -i "$root/var/lib/vmcheck/clip.h264" -f framemd5 - | grep -v '^#' | awk -F, '{ print $NF }' >"$work/reference.md5"
ffmpeg -v error -i "$work/activated.y4m" -f framemd5 - | grep -v '^#' | awk -F, '{ print $NF }' >"$work/ours.md5" || true
failures=0
check() { if grep -q "$1" "$work/report.txt"; then say "ok: $2"; else say "FAILED: $2"; failures=$((failures + 1)); fi; }
check '^VMCHECK boot: PID 1 is systemd' "systemd is PID 1"
check '^VMCHECK notify: .* active; ring exists: yes' "Type=notify: active once ready, the ring made"
check '^VMCHECK stream: 60 frames' "60 frames through the service"
check '^VMCHECK reload: active, same PID: yes, ring lab: yes' "reload with a new stream, same process"
check '^VMCHECK broken reload: refused, service active, same PID: yes' "a broken configuration refused by reload"
check '^VMCHECK socket activation: service active .* 60 frames' "socket activation started the service"
check '^VMCHECK watchdog: NRestarts=[1-9]' "the watchdog restarted a stalled daemon"
if cmp -s "$work/reference.md5" "$work/ours.md5"; then say "ok: socket-activated frames bit-exact (60)"; else say "FAILED: socket-activated frames differ from FFmpeg's"; failures=$((failures + 1)); fi
[ "$failures" = 0 ] || exit 1
say "passed"
