#!/bin/sh
# Runs inside the VM that scripts/test-systemd-vm.sh boots, as a unit started by systemd (PID 1): exercises the
# packaged units for real and reports each result on the serial console as "VMCHECK name: …", then powers off.
exec >/dev/ttyS0 2>&1
say() { echo "VMCHECK $*"; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }
frames() { grep -a -o 'FRAME' "$1" | wc -l; }  # y4m frame headers (pixel rows follow them without a newline)
clip=/var/lib/vmcheck/clip.h264
config=/etc/streamrecvd/streamrecvd.toml
wait_for() { # wait_for SECONDS COMMAND…: until COMMAND succeeds
    limit=$1; shift
    for _ in $(seq $((limit * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    return 1
}
send_and_cat() { # send_and_cat OUTPUT: the clip through the daemon, read by the installed cat
    streamrecvctl cat desk --frames 60 --timeout 30 >"$1" 2>/tmp/cat.log &
    reader=$!
    wait_for 10 grep -q reading /tmp/cat.log
    streamrecvctl send "$clip" tcp://127.0.0.1:5000 --rate 60 >/tmp/send.log 2>&1
    wait $reader
}

say "boot: PID 1 is $(cat /proc/1/comm), $(systemctl --version | head -1), kernel $(uname -r)"
say "installed: $(dpkg-query -W -f '${Package} ${Version}' streamrecvd), enabled: $(systemctl is-enabled streamrecvd.service streamrecvd.socket | tr '\n' ' ')"

# 1. Type=notify: `systemctl start` returns once the daemon said READY=1 (every listener bound, every ring made).
before=$(ms)
systemctl start streamrecvd.service
after=$(ms)
say "notify: start returned after $((after - before)) ms, $(systemctl is-active streamrecvd.service); ring exists: $(test -e /dev/shm/streamrecv-desk && echo yes || echo no); $(systemctl show -p Type -p NotifyAccess -p StatusText streamrecvd.service | tr '\n' ' ')"
send_and_cat /tmp/first.y4m
say "stream: $(frames /tmp/first.y4m) frames through the service"
pid=$(systemctl show -p MainPID --value streamrecvd.service)

# 2. systemctl reload with a changed stream: a second stream appears, the first keeps its process and ring.
cp "$config" /tmp/config.orig
printf '\n[[stream]]\nname = "lab"\nlisten = "tcp://127.0.0.1:5001"\nhwaccel = "none"\n' >>"$config"
systemctl reload streamrecvd.service
wait_for 30 test -e /dev/shm/streamrecv-lab
say "reload: $(systemctl is-active streamrecvd.service), same PID: $([ "$pid" = "$(systemctl show -p MainPID --value streamrecvd.service)" ] && echo yes || echo no), ring lab: $(test -e /dev/shm/streamrecv-lab && echo yes || echo no)"
journalctl -b -u streamrecvd.service -o cat --no-pager | grep -i -E 'reload|lab|stream' | tail -8 | sed 's/^/VMCHECK reload-journal: /'
echo 'this is = not toml [' >>"$config"
if systemctl reload streamrecvd.service 2>/tmp/reload.err; then result="accepted"; else result="refused"; fi
say "broken reload: $result, service $(systemctl is-active streamrecvd.service), same PID: $([ "$pid" = "$(systemctl show -p MainPID --value streamrecvd.service)" ] && echo yes || echo no)"
cp /tmp/config.orig "$config"
systemctl reload streamrecvd.service

# 3. Socket activation: with the service stopped and the socket listening, the first connection starts it.
systemctl stop streamrecvd.service
systemctl start streamrecvd.socket
say "socket: service $(systemctl is-active streamrecvd.service), socket $(systemctl is-active streamrecvd.socket)"
streamrecvctl cat desk --frames 60 --timeout 60 >/tmp/activated.y4m 2>/tmp/cat.log &
reader=$!
sleep 0.5
streamrecvctl send "$clip" tcp://127.0.0.1:5000 --rate 30 >/tmp/send.log 2>&1
wait $reader
say "socket activation: service $(systemctl is-active streamrecvd.service) (triggered by $(systemctl show -p TriggeredBy --value streamrecvd.service)), $(frames /tmp/activated.y4m) frames, $(stat -c %s /tmp/activated.y4m) bytes, cat: $(tail -1 /tmp/cat.log)"
dd if=/tmp/activated.y4m of=/dev/vdb bs=1M conv=fsync status=none

# 4. The watchdog: a decode thread that stalls (the fault-injection variable) stops the watchdog pings; systemd
# kills the daemon and Restart=on-failure starts it again.
systemctl stop streamrecvd.socket streamrecvd.service
mkdir -p /etc/systemd/system/streamrecvd.service.d
printf '[Service]\nEnvironment=STREAMRECVD_FAULT_STALL_DECODE_SECONDS=60\nWatchdogSec=3s\n' \
    >/etc/systemd/system/streamrecvd.service.d/fault.conf
systemctl daemon-reload
systemctl start streamrecvd.service
first=$(systemctl show -p MainPID --value streamrecvd.service)
streamrecvctl send "$clip" tcp://127.0.0.1:5000 --rate 30 >/dev/null 2>&1 &
wait_for 30 sh -c '[ "$(systemctl show -p NRestarts --value streamrecvd.service)" -ge 1 ]'
wait_for 10 systemctl is-active streamrecvd.service
say "watchdog: NRestarts=$(systemctl show -p NRestarts --value streamrecvd.service), PID $first -> $(systemctl show -p MainPID --value streamrecvd.service), $(systemctl is-active streamrecvd.service); journal: $(journalctl -b -u streamrecvd.service -o cat | grep -m1 -i 'watchdog timeout' || echo 'no watchdog line')"
rm -r /etc/systemd/system/streamrecvd.service.d
systemctl daemon-reload
systemctl restart streamrecvd.service

# 5. What systemd thinks of the unit's sandboxing.
say "security: $(systemd-analyze security streamrecvd.service 2>/dev/null | tail -1)"
systemd-analyze security --no-pager streamrecvd.service 2>/dev/null | grep -E '^✗' | head -12 | sed 's/^/VMCHECK security-open: /'
journalctl -b -u streamrecvd.service -o short-monotonic --no-pager | tail -25 | sed 's/^/VMCHECK journal: /'
say "done"
systemctl poweroff --no-block
