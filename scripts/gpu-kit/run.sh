#!/usr/bin/env bash
# The GPU kit's runner (docs/gpu-kit.md): bash and coreutils, nothing installed.
#
#   run.sh [--software] [--quick] [--no-software] [--only SECTIONS] [--clips A,B] OUT
#
# On a GPU machine: every clip through the daemon with hwaccel = "cuda" (strict) and "auto", over TCP and RTP,
# read back with `streamrecvctl cat` and compared against the software decode's framemd5; recreation at a size and
# a bit-depth change; the fallback when the device fails mid-stream (injected); then side by side with software:
# decode-only fps (the kit's ffmpeg, -hwaccel cuda vs software), end-to-end fps and CPU time per frame, the write
# (GPU download) into the slot, last byte → readable, and how many 1080p30 streams one daemon sustains.
# --software: the same with hwaccel = "none" (what `make test` runs, to prove the kit before a GPU sees it).
# --no-software: on a GPU machine, measure the hardware path only (a second call whose software figures the first
# already has). --only: exact (= exact,fallback), measure (= decode,e2e,latency,capacity), or a comma list of
# exact, fallback, decode, e2e, latency, capacity.
# Writes OUT/report.md, OUT/results.tsv and OUT/logs/. Exits 1 when a clip is not bit-exact in a mode that must be.
set -uo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
software=0 quick=0 hardware_only=0 only=all clips_wanted=
usage="usage: run.sh [--software] [--quick] [--no-software] [--only SECTIONS] [--clips A,B] OUT"
while [ $# -gt 1 ]; do
    case $1 in
        --software) software=1 ;;
        --quick) quick=1 ;;
        --no-software) hardware_only=1 ;;
        --only) only=$2; shift ;;
        --clips) clips_wanted=,$2,; shift ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
    shift
done
[ $# -eq 1 ] || { echo "$usage" >&2; exit 2; }
case $only in
    all) sections=exact,fallback,decode,e2e,latency,capacity ;;
    exact) sections=exact,fallback ;;
    measure) sections=decode,e2e,latency,capacity ;;
    *) sections=$only ;;
esac
for section in ${sections//,/ }; do
    case $section in
        exact|fallback|decode|e2e|latency|capacity) ;;
        *) echo "run.sh: no section '$section' (exact, fallback, decode, e2e, latency, capacity)" >&2; exit 2 ;;
    esac
done
want() { case ",$sections," in *",$1,"*) return 0 ;; esac; return 1; }
out=$1
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/streamrecvd-kit.XXXXXX")
report=$out/report.md
results=$out/results.tsv
failures=0
say() { echo "kit: $*" >&2; }
md() { echo "$*" >>"$report"; }

# The kit's binaries need glibc 2.36; an older system runs them through the kit's own loader.
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')
if [ -n "$glibc" ] && [ "$(printf '%s\n2.36\n' "$glibc" | sort -V | head -1)" = 2.36 ]; then
    launcher=()
    loader="the system's (glibc $glibc)"
else
    launcher=("$kit/glibc/ld-linux-x86-64.so.2" --library-path "$kit/lib:$kit/glibc")
    loader="the kit's (the system has glibc ${glibc:-unknown})"
fi
launch() { "${launcher[@]}" "$@"; }
streamrecvd() { launch "$kit/bin/streamrecvd" "$@"; }
ctl() { launch "$kit/bin/streamrecvctl" "$@"; }
ff() { launch "$kit/bin/ffmpeg" -nostdin "$@"; }

daemon_pid=
stop_daemon() {
    [ -n "$daemon_pid" ] || return 0
    kill -TERM "$daemon_pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$daemon_pid" 2>/dev/null
    wait "$daemon_pid" 2>/dev/null
    daemon_pid=
}
cleanup() {
    stop_daemon
    for ring in /dev/shm/streamrecv-kit-*; do [ -e "$ring" ] && rm -f "$ring"; done
    rm -rf "$work"
    # One file for the logs: the device tool brings back a limited number of files (the first run lost its logs).
    tar -czf "$out/logs.tar.gz" -C "$out" logs 2>/dev/null && rm -rf "$out/logs"
}
trap cleanup EXIT

base_port=$((20000 + RANDOM % 20000))
metrics_port=$((base_port - 1))
# start_daemon LABEL CONFIG [ENV...]: runs the daemon until the next start_daemon or the end; waits for READY
# (every ring exists).
start_daemon() {
    local label=$1 config=$2
    shift 2
    stop_daemon
    env "$@" "${launcher[@]}" "$kit/bin/streamrecvd" --config "$config" >"$out/logs/daemon-$label.log" 2>&1 &
    daemon_pid=$!
    for _ in $(seq 300); do
        grep -q "ready:" "$out/logs/daemon-$label.log" && return 0
        kill -0 "$daemon_pid" 2>/dev/null || break
        sleep 0.1
    done
    say "the daemon did not start ($label): $(tail -5 "$out/logs/daemon-$label.log")"
    return 1
}

metric() {  # metric NAME STREAM: the sample's value from the daemon's endpoint (bash's /dev/tcp: no curl needed)
    local body
    exec 3<>"/dev/tcp/127.0.0.1/$metrics_port" || { echo 0; return; }
    printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    body=$(cat <&3)
    exec 3<&-
    echo "$body" | awk -v name="$1" -v stream="stream=\"$2\"" '$1 ~ "^"name"[{]" && index($1, stream) { value = $2 } END { print value + 0 }'
}
histogram_quantile() {  # histogram_quantile NAME STREAM Q: seconds, interpolated within the bucket
    local body
    exec 3<>"/dev/tcp/127.0.0.1/$metrics_port" || { echo nan; return; }
    printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    body=$(cat <&3)
    exec 3<&-
    echo "$body" | awk -v name="$1_bucket" -v stream="stream=\"$2\"" -v q="$3" '
        $1 ~ "^"name"[{]" && index($1, stream) {
            match($1, /le="[^"]*"/); le = substr($1, RSTART + 4, RLENGTH - 5)
            n++; bound[n] = (le == "+Inf") ? 1e9 : le + 0; count[n] = $2 + 0
        }
        END {
            if (n == 0 || count[n] == 0) { print "nan"; exit }
            target = q * count[n]; lower = 0; below = 0
            for (i = 1; i <= n; i++) {
                if (count[i] >= target) {
                    inside = count[i] - below
                    print (inside > 0 ? lower + (bound[i] - lower) * (target - below) / inside : bound[i]); exit
                }
                lower = bound[i]; below = count[i]
            }
        }'
}
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.${2:-1}f\", $1 }"; }

# ---------------------------------------------------------------------------------------------------------------
: >"$report"
printf 'section\tclip\ttransport\tmode\tresult\tdetail\n' >"$results"
md "# streamrecvd GPU kit report"
md ""
md "Run $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname): $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r); loader: $loader; mode: $([ $software = 1 ] && echo software || echo device); sections: $sections; daemon environment: $(env | grep -E '^STREAMRECVD_' | tr '\n' ' ' || true)."
md ""
md "## The device"
md '```'
{
    if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv 2>&1; else echo "no nvidia-smi"; fi
    ls -l /dev/nvidia* /dev/dri 2>&1 | head -20
    ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libnvcuvid' || echo "no libcuda/libnvcuvid in ldconfig"
} >>"$report" 2>&1
md '```'

modes=(cuda auto)
[ $software = 1 ] && modes=(none)
check=$work/check.toml
printf '[[stream]]\nname = "kit-check"\nlisten = "tcp://127.0.0.1:%d"\nhwaccel = "%s"\n' "$base_port" "${modes[0]}" >"$check"
md ""
md "\`streamrecvd --check-config\` with hwaccel = \"${modes[0]}\":"
md '```'
streamrecvd --check-config "$check" >>"$report" 2>&1
md '```'

# ---------------------------------------------------------------------------------------------------------------
# Every clip, every transport, every mode: bit-exact against the software decode of the same FFmpeg build.
# config_for MODE: one stream per clip and transport.
config_for() {
    local mode=$1 port=$base_port
    printf '[daemon]\nlog_level = "info"\nmetrics = "127.0.0.1:%d"\n' "$metrics_port"
    while read -r clip codec transports width height frames parts delivery; do
        for transport in ${transports//,/ }; do
            printf '\n[[stream]]\nname = "kit-%s-%s"\nlisten = "%s://127.0.0.1:%d"\nhwaccel = "%s"\n' "$clip" "$transport" "$transport" "$port" "$mode"
            # idle_timeout: RTP has no end of stream; the frames the decoder holds back come out when the sender is
            # taken for gone (not so soon that the ring's first sizing, 200 MiB for 4K P010, is taken for silence).
            # slots: room for the reader to fall behind, within reason for 4K.
            printf 'max_width = 3840\nmax_height = 2160\nslots = %d\nidle_timeout = 5\n' "$([ "$width" -ge 3840 ] && echo 16 || echo 32)"
            [ "$transport" = rtp ] && printf 'codec = "%s"\nreceive_buffer = "64M"\nrtp_reorder_window = 64\n' "$codec"
            port=$((port + 2))
        done
    done <"$kit/media/clips.txt"
}
port_of() {  # port_of CLIP TRANSPORT
    local port=$base_port
    while read -r clip codec transports _; do
        for transport in ${transports//,/ }; do
            [ "$clip-$transport" = "$1-$2" ] && { echo "$port"; return; }
            port=$((port + 2))
        done
    done <"$kit/media/clips.txt"
}
media_of() {  # media_of CLIP: the clip's file (named as libavformat's raw demuxers know them)
    ls "$kit/media/$1".h264 "$kit/media/$1".h265 2>/dev/null | head -1
}
# Paced for exactness: the ring never waits for its reader (a reader piping 4K y4m into ffmpeg can fall behind),
# and RTP has no back-pressure at all (paced below what the path decodes; software on a small machine is slowest).
exact_rate() {  # exact_rate TRANSPORT WIDTH
    local large=0
    [ "$2" -ge 3840 ] && large=1
    case $software$1$large in
        1tcp0) echo 30 ;; 1tcp1) echo 4 ;; 1rtp0) echo 25 ;; 1rtp1) echo 2 ;;
        # 4K: the reader's md5 of a 25 MB P010 frame takes ~40 ms; at 30 fps the H200's reader fell behind (lapped).
        *0) echo 60 ;; *) echo 10 ;;
    esac
}
selected() { [ -z "$clips_wanted" ] || [[ $clips_wanted == *,$1,* ]]; }
# `auto` takes the same path as `cuda` on an NVIDIA machine (VA-API is tried first and is absent): it runs the clips
# where the two may differ (High 10, which auto decodes in software; a codec switch) and one common case.
runs_in() {  # runs_in MODE CLIP
    selected "$2" && { [ "$1" != auto ] || [[ " h264-1080p h264-720p-10bit codec-switch " == *" $2 "* ]]; }
}

exact_run() {  # exact_run MODE CLIP TRANSPORT FRAMES PARTS WIDTH DELIVERY
    local mode=$1 clip=$2 transport=$3 frames=$4 parts=$5 width=$6 delivery=$7
    local stream=kit-$clip-$transport port dir=$work/$mode-$clip-$transport got verdict detail rate
    port=$(port_of "$clip" "$transport")
    mkdir -p "$dir"
    # A stream that changes format comes out as one y4m file per format; the others are piped straight to ffmpeg.
    if [ "$parts" -gt 1 ]; then
        ctl cat "$stream" --frames "$frames" --timeout 15 --output "$dir/seg%d.y4m" 2>"$dir/cat.log" &
    else
        (ctl cat "$stream" --frames "$frames" --timeout 15 2>"$dir/cat.log" | ff -v error -f yuv4mpegpipe -i - -f framemd5 - >"$dir/framemd5" 2>"$dir/ffmpeg.log") &
    fi
    local reader=$!
    for _ in $(seq 100); do grep -q "reading" "$dir/cat.log" 2>/dev/null && break; sleep 0.05; done
    rate=$(exact_rate "$transport" "$width")
    if [ "$delivery" = connections ]; then
        # Each part by a sender of its own, one after the other.
        for part in $(ls "$kit/media/$clip".part* | sort -V); do
            ctl send "$part" "tcp://127.0.0.1:$port" --rate "$rate" >>"$dir/send.log" 2>&1
        done
    else
        # One sender; a clip whose format changes does so in band.
        ctl send "$(media_of "$clip")" "$transport://127.0.0.1:$port" --rate "$rate" >"$dir/send.log" 2>&1
    fi
    wait "$reader"
    if [ "$parts" -gt 1 ]; then
        : >"$dir/framemd5"
        for segment in $(ls "$dir"/seg*.y4m 2>/dev/null | sort -V); do
            ff -v error -f yuv4mpegpipe -i "$segment" -f framemd5 - >>"$dir/framemd5" 2>>"$dir/ffmpeg.log"
            rm -f "$segment"
        done
    fi
    grep -v '^#' "$dir/framemd5" | awk -F, '{ print $NF }' | tr -d ' ' >"$dir/ours.md5"
    got=$(wc -l <"$dir/ours.md5")
    if cmp -s "$dir/ours.md5" "$kit/reference/$clip.md5"; then
        verdict=exact detail="$got/$frames frames"
    else
        local first
        first=$(diff <(cat -n "$dir/ours.md5") <(cat -n "$kit/reference/$clip.md5") | awk '/^[<>]/ { print $2; exit }')
        verdict=DIFFERS detail="$got/$frames frames, first difference at frame ${first:-?}"
        grep -q lapped "$dir/cat.log" && detail+="; the reader fell behind (lapped): a pace too fast for this machine, not the decoder"
    fi
    printf 'exact\t%s\t%s\t%s\t%s\t%s\n' "$clip" "$transport" "$mode" "$verdict" "$detail" >>"$results"
    cp "$dir/cat.log" "$out/logs/cat-$mode-$clip-$transport.log" 2>/dev/null
    echo "$verdict"
}

exactness() {
    md ""
    md "## Bit-exact against the software decode"
    md ""
    md "Every frame read back with \`streamrecvctl cat\`, its framemd5 compared with the kit's ffmpeg decoding the same file in software."
    md ""
    md "| clip | transport | $(IFS='|'; echo "${modes[*]}" | sed 's/|/ | /g') | path taken |"
    md "|---|---|$(printf -- '---|%.0s' "${modes[@]}")---|"
    local -A cell=()
    local -A path=()
    for mode in "${modes[@]}"; do
        config_for "$mode" >"$work/$mode.toml"
        start_daemon "exact-$mode" "$work/$mode.toml" || { failures=$((failures + 1)); continue; }
        while read -r clip codec transports width height frames parts delivery; do
            runs_in "$mode" "$clip" || continue
            for transport in ${transports//,/ }; do
                local verdict
                verdict=$(exact_run "$mode" "$clip" "$transport" "$frames" "$parts" "$width" "$delivery")
                cell[$clip-$transport-$mode]=$verdict
                [ "$verdict" = exact ] || failures=$((failures + 1))
                local used
                used=$(grep "kit-$clip-$transport" "$out/logs/daemon-exact-$mode.log" | grep -oE 'path (cuda|vaapi|software)|falling back to software' | sort -u | paste -sd, -)
                path[$clip-$transport]="${path[$clip-$transport]:-}${path[$clip-$transport]:+; }$mode: ${used:-?}"
            done
        done <"$kit/media/clips.txt"
        recreations_note "$mode"
        stop_daemon
    done
    while read -r clip codec transports _; do
        selected "$clip" || continue
        for transport in ${transports//,/ }; do
            local row="| $clip | $transport |"
            for mode in "${modes[@]}"; do
                local cell
                cell=$(awk -F'\t' -v c="$clip" -v t="$transport" -v m="$mode" '$1 == "exact" && $2 == c && $3 == t && $4 == m { print $5 " (" $6 ")" }' "$results")
                row+=" ${cell:-–} |"
            done
            md "$row ${path[$clip-$transport]:-} |"
        done
    done <"$kit/media/clips.txt"
    md ""
    md "$recreations"
}
recreations=""
recreations_note() {  # the format changes must have recreated the decoder (and its hardware frames context)
    local mode=$1 text="" clip count
    for clip in h264-size-change h265-depth-change codec-switch; do
        runs_in "$mode" "$clip" || continue
        count=$(metric streamrecvd_decoder_recreations_total "kit-$clip-tcp")
        text+="$clip $count, "
        [ "$count" -ge 1 ] || failures=$((failures + 1))
    done
    [ -n "$text" ] && recreations+="Decoder recreations with hwaccel = \"$mode\" (each must be ≥ 1): ${text%, }. "
}

# The device lost mid-stream (injected after 20 frames): the stream goes on in software from its GOP, bit-exact.
fallback() {
    [ $software = 1 ] && { md ""; md "## Fallback: not run in software mode (no hardware decoder to lose)."; return; }
    config_for cuda >"$work/fallback.toml"
    start_daemon fallback "$work/fallback.toml" STREAMRECVD_INJECT_HARDWARE_FAILURE_AFTER_FRAMES=20 || return
    local verdict fallbacks
    verdict=$(exact_run fallback h264-1080p tcp "$(awk '$1 == "h264-1080p" { print $6 }' "$kit/media/clips.txt")" 1 1920 one)
    fallbacks=$(metric streamrecvd_decoder_hardware_fallbacks_total kit-h264-1080p-tcp)
    stop_daemon
    [ "$verdict" = exact ] && [ "$fallbacks" -ge 1 ] || failures=$((failures + 1))
    md ""
    md "## Fallback when the device fails mid-stream"
    md ""
    md "hwaccel = \"cuda\", STREAMRECVD_INJECT_HARDWARE_FAILURE_AFTER_FRAMES=20, h264-1080p over TCP: $verdict; fallbacks counted: $fallbacks; the log says: \`$(grep -m1 'falling back to software' "$out/logs/daemon-fallback.log" | cut -c1-200)\`"
}

# ---------------------------------------------------------------------------------------------------------------
# Side by side: the paths to compare, as (label, hwaccel, ffmpeg options).
paths=("software|none|-threads 1")
[ $software = 1 ] || paths=("NVDEC|cuda|-hwaccel cuda" "software|none|-threads 1")
[ $software = 0 ] && [ $hardware_only = 1 ] && paths=("NVDEC|cuda|-hwaccel cuda")
# The capacity also with a CUDA stream per decoder (STREAMRECVD_CUDA_STREAM_PER_DECODER=1; off by default: every
# decoder shares the device's default stream), in the same call: the A/B of that candidate. Its exactness: run the
# exact section with the variable set (docs/gpu-kit.md).
capacity_paths=("${paths[@]}")
[ $software = 1 ] || capacity_paths=("NVDEC|cuda||STREAMRECVD_CUDA_STREAM_PER_DECODER=0"
    "NVDEC, a CUDA stream per decoder|cuda||STREAMRECVD_CUDA_STREAM_PER_DECODER=1" "${paths[@]:1}")
measured_clips=(h264-1080p h265-1080p h264-4k h265-4k-10bit)
[ $quick = 1 ] && measured_clips=(h264-1080p)

decode_only() {
    md ""
    md "## Decode only: the kit's ffmpeg, \`-f null\`"
    md ""
    md "| clip | path | frames | fps | CPU ms/frame |"
    md "|---|---|---|---|---|"
    for clip in "${measured_clips[@]}"; do
        local frames width loops
        read -r _ _ _ width _ frames _ < <(grep "^$clip " "$kit/media/clips.txt")
        loops=$(( ($([ "$width" -ge 3840 ] && echo 240 || echo 720) + frames - 1) / frames ))
        [ $quick = 1 ] && loops=1
        # The clip repeated into one file: the raw demuxers cannot seek, so -stream_loop decoded it only once, and
        # on the H200 CUDA's start-up then made NVDEC look slower than one software thread. Each copy starts with
        # its parameter sets and an IDR picture.
        local looped
        looped=$work/looped-$(basename "$(media_of "$clip")")
        for _ in $(seq "$loops"); do cat "$(media_of "$clip")"; done >"$looped"
        local variants=("${paths[@]}")
        [ $software = 1 ] || variants+=("software, threads auto|none|")
        for entry in "${variants[@]}"; do
            IFS='|' read -r label _ options <<<"$entry"
            local log=$out/logs/ffmpeg-$clip-${label// /_}.log
            # shellcheck disable=SC2086
            ff -hide_banner -benchmark $options -i "$looped" -f null - >"$log" 2>&1
            local count rtime cpu
            count=$(tr '\r' '\n' <"$log" | grep -oE 'frame= *[0-9]+' | tail -1 | grep -oE '[0-9]+')
            count=${count:-$(( loops * frames ))}
            rtime=$(grep -oE 'rtime=[0-9.]+' "$log" | tail -1 | cut -d= -f2)
            cpu=$(grep -oE 'utime=[0-9.]+s stime=[0-9.]+' "$log" | tail -1 | awk -F'[=s ]+' '{ print $2 + $4 }')
            if [ -n "$rtime" ]; then
                md "| $clip | ffmpeg $options | $count | $(calc "$count / $rtime") | $(calc "1000 * ${cpu:-0} / $count" 2) |"
                printf 'decode\t%s\t-\t%s\t%s\t%s fps\n' "$clip" "$label" "$(calc "$count / $rtime")" "$count frames" >>"$results"
            else
                md "| $clip | ffmpeg $options | failed: $(grep -m1 -iE 'error|failed' "$log" | cut -c1-120) | | |"
            fi
        done
    done
}

end_to_end() {
    md ""
    md "## End to end: \`streamrecvctl send --rate max --loop\` over TCP into the daemon, frames published"
    md ""
    md "| clip | path | frames | fps | vs ffmpeg decode-only | daemon CPU ms/frame | write into slot p50 / p90 (ms) |"
    md "|---|---|---|---|---|---|---|"
    local seconds=5
    [ $quick = 1 ] && seconds=1
    for entry in "${paths[@]}"; do
        IFS='|' read -r label mode options <<<"$entry"
        config_for "$mode" >"$work/e2e-$mode.toml"
        start_daemon "e2e-$mode" "$work/e2e-$mode.toml" || continue
        for clip in "${measured_clips[@]}"; do
            local stream=kit-$clip-tcp before after start end ticks_before ticks_after frames fps anchor ratio
            before=$(metric streamrecvd_frames_published_total "$stream")
            ticks_before=$(cpu_ticks "$daemon_pid")
            start=$(now)
            ctl send "$(media_of "$clip")" "tcp://127.0.0.1:$(port_of "$clip" tcp)" --rate max --loop --duration "$seconds" >"$out/logs/send-e2e-$mode-$clip.log" 2>&1
            # The frames still in flight when the sender stops are published within a moment.
            sleep 0.5
            after=$(metric streamrecvd_frames_published_total "$stream")
            end=$(now)
            ticks_after=$(cpu_ticks "$daemon_pid")
            frames=$(calc "$after - $before" 0)
            fps=$(calc "$frames / ($end - $start - 0.5)")
            anchor=$(awk -F'\t' -v c="$clip" -v l="$label" '$1 == "decode" && $2 == c && $4 == l { print $5; exit }' "$results")
            ratio=$([ -n "$anchor" ] && calc "$fps / $anchor" 2 || echo "–")
            md "| $clip | $label | $frames | $fps | $ratio | $(calc "1000 * ($ticks_after - $ticks_before) / $(getconf CLK_TCK) / ($frames + 0.0001)" 2) | $(calc "1000 * $(histogram_quantile streamrecvd_frame_write_seconds "$stream" 0.5)" 3) / $(calc "1000 * $(histogram_quantile streamrecvd_frame_write_seconds "$stream" 0.9)" 3) |"
            printf 'e2e\t%s\ttcp\t%s\t%s\t%s frames, ratio %s\n' "$clip" "$label" "$fps" "$frames" "$ratio" >>"$results"
        done
        stop_daemon
    done
}

latency() {
    md ""
    md "## Last byte → readable: paced at 30 fps (\`send\` marks each frame's end), access unit complete → published"
    md ""
    md "h264-1080p-lowdelay has no B-frames: decode and write into the slot only. h265-4k-10bit has 3: its figures include the reorder delay (a frame waits for the ones it is shown after)."
    md ""
    md "| clip | path | frames | p50 ms | p90 ms | p99 ms |"
    md "|---|---|---|---|---|---|"
    local seconds=5 clips=(h264-1080p-lowdelay h265-4k-10bit)
    [ $quick = 1 ] && seconds=2 clips=(h264-1080p-lowdelay)
    for entry in "${paths[@]}"; do
        IFS='|' read -r label mode options <<<"$entry"
        config_for "$mode" >"$work/latency-$mode.toml"
        start_daemon "latency-$mode" "$work/latency-$mode.toml" || continue
        for clip in "${clips[@]}"; do
            local stream=kit-$clip-tcp
            ctl send "$(media_of "$clip")" "tcp://127.0.0.1:$(port_of "$clip" tcp)" --rate 30 --loop --duration "$seconds" >/dev/null 2>&1
            sleep 0.3
            md "| $clip | $label | $(metric streamrecvd_publish_latency_seconds_count "$stream") | $(calc "1000 * $(histogram_quantile streamrecvd_publish_latency_seconds "$stream" 0.5)" 2) | $(calc "1000 * $(histogram_quantile streamrecvd_publish_latency_seconds "$stream" 0.9)" 2) | $(calc "1000 * $(histogram_quantile streamrecvd_publish_latency_seconds "$stream" 0.99)" 2) |"
        done
        stop_daemon
    done
}

capacity() {
    md ""
    md "## How many 1080p30 H.264 streams one daemon sustains"
    md ""
    md "Each stream fed by its own \`send --rate 30 --loop\`; sustained when every stream published at least 95 % of what was sent."
    md ""
    md "| path | streams | slowest stream fps | daemon CPU % | sustained |"
    md "|---|---|---|---|---|"
    local counts=(1 2 4 8 16 24 32 48 64) seconds=5
    [ $quick = 1 ] && counts=(1 2) seconds=3
    [ $software = 1 ] && [ $quick = 0 ] && counts=(1 2 4 8)
    local largest=${counts[-1]} run=0
    for entry in "${capacity_paths[@]}"; do
        IFS='|' read -r label mode options environment <<<"$entry"
        run=$((run + 1))
        local config=$work/capacity-$mode.toml
        printf '[daemon]\nlog_level = "info"\nmetrics = "127.0.0.1:%d"\n' "$metrics_port" >"$config"
        for index in $(seq 1 "$largest"); do
            printf '\n[[stream]]\nname = "kit-load-%d"\nlisten = "tcp://127.0.0.1:%d"\nhwaccel = "%s"\nslots = 4\nmax_width = 1920\nmax_height = 1088\n' \
                "$index" $((base_port + 1000 + index)) "$mode" >>"$config"
        done
        local -a settings=()
        [ -n "$environment" ] && settings=("$environment")
        start_daemon "capacity-$run-$mode" "$config" "${settings[@]}" || continue
        local best=0
        for count in "${counts[@]}"; do
            local -a before=() senders=()
            for index in $(seq 1 "$count"); do before[$index]=$(metric streamrecvd_frames_published_total "kit-load-$index"); done
            local ticks_before start
            ticks_before=$(cpu_ticks "$daemon_pid")
            start=$(now)
            for index in $(seq 1 "$count"); do
                ctl send "$(media_of h264-1080p)" "tcp://127.0.0.1:$((base_port + 1000 + index))" --rate 30 --loop --duration "$seconds" >/dev/null 2>&1 &
                senders+=($!)
            done
            wait "${senders[@]}"
            sleep 0.5
            local elapsed slowest=999999 ticks_after cpu
            elapsed=$(calc "$(now) - $start - 0.5" 3)
            ticks_after=$(cpu_ticks "$daemon_pid")
            for index in $(seq 1 "$count"); do
                local published fps
                published=$(metric streamrecvd_frames_published_total "kit-load-$index")
                fps=$(calc "($published - ${before[$index]}) / $elapsed")
                slowest=$(calc "($fps < $slowest) ? $fps : $slowest")
            done
            cpu=$(calc "100 * ($ticks_after - $ticks_before) / $(getconf CLK_TCK) / $elapsed" 0)
            local sustained=no
            [ "$(calc "($slowest >= 28.5) ? 1 : 0" 0)" = 1 ] && sustained=yes && best=$count
            md "| $label | $count | $slowest | $cpu | $sustained |"
            [ $sustained = yes ] || break
        done
        printf 'capacity\th264-1080p\ttcp\t%s\t%s\tstreams sustained\n' "$label" "$best" >>"$results"
        stop_daemon
    done
}

# With a CUDA stream per decoder asked for, a decoder that silently kept the shared device would make the check
# prove nothing: the logs of the daemons that had it (all of them when the runner's environment sets it; the
# capacity section's second NVDEC run always) must be free of the fallback's warning.
own_stream_check() {
    local -a logs=()
    if [ "${STREAMRECVD_CUDA_STREAM_PER_DECODER:-}" = 1 ]; then
        logs=("$out"/logs/daemon-*.log)
    elif [ -e "$out/logs/daemon-capacity-2-cuda.log" ]; then
        logs=("$out/logs/daemon-capacity-2-cuda.log")
    fi
    [ ${#logs[@]} -gt 0 ] || return 0
    local said
    said=$(grep -h -m1 "no CUDA stream of its own" "${logs[@]}" 2>/dev/null | head -1 || true)
    [ -z "$said" ] && return 0
    failures=$((failures + 1))
    md ""
    md "**A CUDA stream per decoder was asked for but not in effect:** $(cut -c1-200 <<<"$said")"
}

want exact && exactness
want fallback && fallback
want decode && decode_only
want e2e && end_to_end
want latency && latency
want capacity && capacity
own_stream_check
md ""
md "Failures: $failures. Raw figures: results.tsv; logs: logs.tar.gz."
say "report: $report ($failures failure(s))"
[ "$failures" = 0 ]
