import Bitstream

/// WHIP offers as the common senders write them (structure, attribute order and values as those stacks produce;
/// addresses, ids and keys made up). `crlf` gives the wire form: every sender here ends lines with CRLF.
enum WebRTCOfferFixtures {
    static let fingerprint = "7B:8B:F0:65:5F:78:E2:51:3B:AC:6F:F3:3F:46:1B:35:DC:B8:5F:64:1A:24:C2:43:F0:A1:58:D0:A1:2C:19:08"

    static func crlf(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\r\n")
    }

    /// `count` bytes as an SDP fingerprint ("0A:1B:...").
    static func hexFingerprint(_ count: Int, seed: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return (0..<count).map { index in
            let byte = UInt8(truncatingIfNeeded: index &* 37 &+ Int(seed))
            return String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
        }.joined(separator: ":")
    }

    /// Chromium 12x sharing a screen (sendonly transceivers, video first): VP8, H.264 in four profiles and both
    /// packetization modes, AV1, VP9, each with RTX, then red and ulpfec; an FID group; audio with opus.
    static let chromium = crlf("""
        v=0
        o=- 4611731400430051336 2 IN IP4 127.0.0.1
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        a=extmap-allow-mixed
        a=msid-semantic: WMS 3f1c0d9e-8a57-4c2f-9b1e-6d2a7c3e4f50
        m=video 9 UDP/TLS/RTP/SAVPF 96 97 104 105 102 103 106 107 108 109 127 125 39 40 45 46 98 99 100 101 112 113 116 117 118
        c=IN IP4 0.0.0.0
        a=rtcp:9 IN IP4 0.0.0.0
        a=candidate:2999745851 1 udp 2122260223 192.168.1.20 56143 typ host generation 0 network-id 1
        a=candidate:1467250027 1 udp 1686052607 203.0.113.7 56143 typ srflx raddr 192.168.1.20 rport 56143 generation 0
        a=ice-ufrag:Gx4j
        a=ice-pwd:9JzVQ0QyR4wB5nQ2s3mC7LkE
        a=ice-options:trickle
        a=fingerprint:sha-256 \(fingerprint)
        a=setup:actpass
        a=mid:0
        a=extmap:1 urn:ietf:params:rtp-hdrext:toffset
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:3 urn:3gpp:video-orientation
        a=extmap:4 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:5 http://www.webrtc.org/experiments/rtp-hdrext/playout-delay
        a=extmap:6 http://www.webrtc.org/experiments/rtp-hdrext/video-content-type
        a=extmap:7 http://www.webrtc.org/experiments/rtp-hdrext/video-timing
        a=extmap:8 http://www.webrtc.org/experiments/rtp-hdrext/color-space
        a=extmap:9 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:10 urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id
        a=extmap:11 urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id
        a=sendonly
        a=msid:3f1c0d9e-8a57-4c2f-9b1e-6d2a7c3e4f50 b7e2a1c4-5d6f-4e3a-8c9b-0a1b2c3d4e5f
        a=rtcp-mux
        a=rtcp-rsize
        a=rtpmap:96 VP8/90000
        a=rtcp-fb:96 goog-remb
        a=rtcp-fb:96 transport-cc
        a=rtcp-fb:96 ccm fir
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtpmap:97 rtx/90000
        a=fmtp:97 apt=96
        a=rtpmap:104 H264/90000
        a=rtcp-fb:104 goog-remb
        a=rtcp-fb:104 transport-cc
        a=rtcp-fb:104 ccm fir
        a=rtcp-fb:104 nack
        a=rtcp-fb:104 nack pli
        a=fmtp:104 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42001f
        a=rtpmap:105 rtx/90000
        a=fmtp:105 apt=104
        a=rtpmap:102 H264/90000
        a=rtcp-fb:102 goog-remb
        a=rtcp-fb:102 transport-cc
        a=rtcp-fb:102 ccm fir
        a=rtcp-fb:102 nack
        a=rtcp-fb:102 nack pli
        a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f
        a=rtpmap:103 rtx/90000
        a=fmtp:103 apt=102
        a=rtpmap:106 H264/90000
        a=rtcp-fb:106 nack
        a=fmtp:106 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f
        a=rtpmap:107 rtx/90000
        a=fmtp:107 apt=106
        a=rtpmap:108 H264/90000
        a=fmtp:108 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42e01f
        a=rtpmap:109 rtx/90000
        a=fmtp:109 apt=108
        a=rtpmap:127 H264/90000
        a=fmtp:127 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=4d001f
        a=rtpmap:125 rtx/90000
        a=fmtp:125 apt=127
        a=rtpmap:39 H264/90000
        a=fmtp:39 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=4d001f
        a=rtpmap:40 rtx/90000
        a=fmtp:40 apt=39
        a=rtpmap:45 AV1/90000
        a=rtcp-fb:45 nack
        a=fmtp:45 level-idx=5;profile=0;tier=0
        a=rtpmap:46 rtx/90000
        a=fmtp:46 apt=45
        a=rtpmap:98 VP9/90000
        a=fmtp:98 profile-id=0
        a=rtpmap:99 rtx/90000
        a=fmtp:99 apt=98
        a=rtpmap:100 VP9/90000
        a=fmtp:100 profile-id=2
        a=rtpmap:101 rtx/90000
        a=fmtp:101 apt=100
        a=rtpmap:112 H264/90000
        a=fmtp:112 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=64001f
        a=rtpmap:113 rtx/90000
        a=fmtp:113 apt=112
        a=rtpmap:116 red/90000
        a=rtpmap:117 rtx/90000
        a=fmtp:117 apt=116
        a=rtpmap:118 ulpfec/90000
        a=ssrc-group:FID 2231627014 632943048
        a=ssrc:2231627014 cname:4TOk42mSjXCkVIa6
        a=ssrc:2231627014 msid:3f1c0d9e-8a57-4c2f-9b1e-6d2a7c3e4f50 b7e2a1c4-5d6f-4e3a-8c9b-0a1b2c3d4e5f
        a=ssrc:632943048 cname:4TOk42mSjXCkVIa6
        a=ssrc:632943048 msid:3f1c0d9e-8a57-4c2f-9b1e-6d2a7c3e4f50 b7e2a1c4-5d6f-4e3a-8c9b-0a1b2c3d4e5f
        m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126
        c=IN IP4 0.0.0.0
        a=rtcp:9 IN IP4 0.0.0.0
        a=ice-ufrag:Gx4j
        a=ice-pwd:9JzVQ0QyR4wB5nQ2s3mC7LkE
        a=ice-options:trickle
        a=fingerprint:sha-256 \(fingerprint)
        a=setup:actpass
        a=mid:1
        a=extmap:14 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:4 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:9 urn:ietf:params:rtp-hdrext:sdes:mid
        a=sendonly
        a=msid:3f1c0d9e-8a57-4c2f-9b1e-6d2a7c3e4f50 0c9d8e7f-6a5b-4c3d-2e1f-0a9b8c7d6e5f
        a=rtcp-mux
        a=rtpmap:111 opus/48000/2
        a=rtcp-fb:111 transport-cc
        a=fmtp:111 minptime=10;useinbandfec=1
        a=rtpmap:63 red/48000/2
        a=fmtp:63 111/111
        a=rtpmap:9 G722/8000
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=rtpmap:13 CN/8000
        a=rtpmap:110 telephone-event/48000
        a=rtpmap:126 telephone-event/8000
        a=ssrc:3735928559 cname:4TOk42mSjXCkVIa6
        a=ssrc:3735928559 msid:3f1c0d9e-8a57-4c2f-9b1e-6d2a7c3e4f50 0c9d8e7f-6a5b-4c3d-2e1f-0a9b8c7d6e5f

        """)

    /// GStreamer's webrtcbin as whipclientsink drives it (bundle-policy max-bundle): one sendrecv H.264 transceiver,
    /// ICE options at session level, the rest in the m-section, candidates gathered before the offer went out.
    static let webrtcbin = crlf("""
        v=0
        o=- 1406163566592421573 0 IN IP4 0.0.0.0
        s=-
        t=0 0
        a=ice-options:trickle
        a=group:BUNDLE video0
        m=video 9 UDP/TLS/RTP/SAVPF 96
        c=IN IP4 0.0.0.0
        a=setup:actpass
        a=ice-ufrag:WdFyYDJ8WnTn1pkwOTmqz8kQhM1A+Yvl
        a=ice-pwd:5dm6JDWyNhC5Fq8X9xqiEDZk/wD5bRfa
        a=rtcp-mux
        a=rtcp-rsize
        a=sendrecv
        a=rtpmap:96 H264/90000
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtcp-fb:96 ccm fir
        a=rtcp-fb:96 goog-remb
        a=fmtp:96 packetization-mode=1;profile-level-id=42c01f;level-asymmetry-allowed=1
        a=ssrc:3484078950 msid:user1266519624@host-e7a6d0fa webrtctransceiver0
        a=ssrc:3484078950 cname:user1266519624@host-e7a6d0fa
        a=mid:video0
        a=fingerprint:sha-256 \(fingerprint)
        a=candidate:1 1 UDP 2015363327 192.168.1.20 46789 typ host
        a=candidate:2 1 TCP 1015021823 192.168.1.20 9 typ host tcptype active

        """)

    /// GStreamer 1.22's webrtcbin (bundle-policy max-bundle) with an audio and a video transceiver, as it wrote it
    /// on this machine: the video is bundle-only (port 0), the audio is the BUNDLE group's tagged m-section.
    static let webrtcbinAudioVideo = crlf("""
        v=0
        o=- 3468995770655150749 0 IN IP4 0.0.0.0
        s=-
        t=0 0
        a=ice-options:trickle
        a=group:BUNDLE audio0 video1
        m=audio 9 UDP/TLS/RTP/SAVPF 111
        c=IN IP4 0.0.0.0
        a=setup:actpass
        a=ice-ufrag:5/sYI7dvZ7fO5nKXnn2obkDcSnqdpFNg
        a=ice-pwd:g1mP6AfWA0oaYmhoZYvEzEhUaasCUHm+
        a=rtcp-mux
        a=rtcp-rsize
        a=sendrecv
        a=rtpmap:111 OPUS/48000/2
        a=rtcp-fb:111 transport-cc
        a=fmtp:111 sprop-stereo=0;sprop-maxcapturerate=48000
        a=ssrc:2013309344 msid:user2923957817@host-f080c86e webrtctransceiver0
        a=ssrc:2013309344 cname:user2923957817@host-f080c86e
        a=mid:audio0
        a=fingerprint:sha-256 06:5A:D9:47:DD:5D:A6:CB:5F:7D:CC:C4:05:83:3A:56:60:2D:86:B0:3F:94:F5:BD:08:B2:22:97:68:A9:C7:6D
        a=rtcp-mux-only
        m=video 0 UDP/TLS/RTP/SAVPF 96
        c=IN IP4 0.0.0.0
        a=setup:actpass
        a=ice-ufrag:5/sYI7dvZ7fO5nKXnn2obkDcSnqdpFNg
        a=ice-pwd:g1mP6AfWA0oaYmhoZYvEzEhUaasCUHm+
        a=bundle-only
        a=rtcp-mux
        a=rtcp-rsize
        a=sendrecv
        a=rtpmap:96 H264/90000
        a=rtcp-fb:96 nack pli
        a=rtcp-fb:96 ccm fir
        a=rtcp-fb:96 transport-cc
        a=framerate:30
        a=fmtp:96 packetization-mode=1;sprop-parameter-sets=Z0LAFdkBQfsBagwMDUoAAAMAAgAAAwB5HixckA==,aMuMsg==;profile-level-id=42c015;level-asymmetry-allowed=1
        a=ssrc:1807518368 msid:user2923957817@host-f080c86e webrtctransceiver1
        a=ssrc:1807518368 cname:user2923957817@host-f080c86e
        a=mid:video1
        a=fingerprint:sha-256 06:5A:D9:47:DD:5D:A6:CB:5F:7D:CC:C4:05:83:3A:56:60:2D:86:B0:3F:94:F5:BD:08:B2:22:97:68:A9:C7:6D
        a=rtcp-mux-only

        """)

    /// OBS Studio's WHIP output (libdatachannel): transport attributes at session level, audio first, then video.
    static let obs = crlf("""
        v=0
        o=rtc 2514409745 0 IN IP4 127.0.0.1
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        a=group:LS 0 1
        a=msid-semantic:WMS *
        a=setup:actpass
        a=ice-ufrag:kZB3
        a=ice-pwd:+3tA7S8XazuKs+j2mu4rfU
        a=ice-options:ice2,trickle
        a=fingerprint:sha-256 \(fingerprint)
        m=audio 58125 UDP/TLS/RTP/SAVPF 111
        c=IN IP4 192.168.1.50
        a=mid:0
        a=sendonly
        a=ssrc:3339016934 cname:pTqIZQnYKkI8i1lY
        a=ssrc:3339016934 msid:obs-audio obs-audio
        a=msid:obs-audio obs-audio
        a=rtcp-mux
        a=rtpmap:111 opus/48000/2
        a=fmtp:111 minptime=10;maxaveragebitrate=96000;stereo=1;sprop-stereo=1;useinbandfec=1
        a=candidate:1 1 UDP 2122317823 192.168.1.50 58125 typ host
        a=candidate:2 1 UDP 1686109951 203.0.113.9 58125 typ srflx raddr 0.0.0.0 rport 0
        a=end-of-candidates
        m=video 58125 UDP/TLS/RTP/SAVPF 96
        c=IN IP4 192.168.1.50
        a=mid:1
        a=sendonly
        a=ssrc:3339016935 cname:pTqIZQnYKkI8i1lY
        a=ssrc:3339016935 msid:obs-video obs-video
        a=msid:obs-video obs-video
        a=rtcp-mux
        a=rtpmap:96 H264/90000
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtcp-fb:96 goog-remb
        a=fmtp:96 profile-level-id=42e01f;packetization-mode=1;level-asymmetry-allowed=1

        """)

    /// aiortc 1.x with a sendonly video track: VP8 first, two H.264, RTX for each, three fingerprints.
    static let aiortc = crlf("""
        v=0
        o=- 3918329468 3918329468 IN IP4 0.0.0.0
        s=-
        t=0 0
        a=group:BUNDLE 0
        a=msid-semantic:WMS *
        m=video 50505 UDP/TLS/RTP/SAVPF 97 98 99 100 101 102
        c=IN IP4 192.168.1.7
        a=sendonly
        a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=mid:0
        a=msid:b6d1c2a3-1111-4a2b-9c3d-4e5f6a7b8c9d 3e2a1b0c-2222-4d3e-8f9a-0b1c2d3e4f5a
        a=rtcp:9 IN IP4 0.0.0.0
        a=rtcp-mux
        a=ssrc-group:FID 1828893402 2930127346
        a=ssrc:1828893402 cname:5c0e4b0f-7f5e-4d8a-9a7b-3c2d1e0f9a8b
        a=ssrc:2930127346 cname:5c0e4b0f-7f5e-4d8a-9a7b-3c2d1e0f9a8b
        a=rtpmap:97 VP8/90000
        a=rtcp-fb:97 nack
        a=rtcp-fb:97 nack pli
        a=rtcp-fb:97 goog-remb
        a=rtpmap:98 rtx/90000
        a=fmtp:98 apt=97
        a=rtpmap:99 H264/90000
        a=rtcp-fb:99 nack
        a=rtcp-fb:99 nack pli
        a=rtcp-fb:99 goog-remb
        a=fmtp:99 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f
        a=rtpmap:100 rtx/90000
        a=fmtp:100 apt=99
        a=rtpmap:101 H264/90000
        a=rtcp-fb:101 nack
        a=rtcp-fb:101 nack pli
        a=rtcp-fb:101 goog-remb
        a=fmtp:101 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f
        a=rtpmap:102 rtx/90000
        a=fmtp:102 apt=101
        a=candidate:3c2bc3e8a2c1c5d8b3d1f7e0a5b8c9d0 1 udp 2130706431 192.168.1.7 50505 typ host
        a=candidate:9f8e7d6c5b4a39281706f5e4d3c2b1a0 1 udp 1694498815 203.0.113.5 50505 typ srflx raddr 192.168.1.7 rport 50505
        a=end-of-candidates
        a=ice-ufrag:Wn5f
        a=ice-pwd:hS7Tl8jZyJ8wUv1k8dVJ3H
        a=fingerprint:sha-256 \(fingerprint)
        a=fingerprint:sha-384 \(hexFingerprint(48, seed: 3))
        a=fingerprint:sha-512 \(hexFingerprint(64, seed: 5))
        a=setup:actpass

        """)

    static let all = [
        ("Chromium", chromium), ("webrtcbin", webrtcbin), ("webrtcbin 1.22", webrtcbinAudioVideo), ("OBS", obs),
        ("aiortc", aiortc),
    ]

    /// This server's side in the tests.
    static let local = WebRTCAnswer.LocalParameters(
        iceUsernameFragment: "srv1", icePassword: "0123456789abcdefABCDEF+/",
        fingerprintSHA256: (0..<32).map { UInt8($0 * 7) }, candidates: [("192.0.2.10", 8189), ("2001:db8::10", 8189)],
        sessionID: 7_301_234_567_890)

    static let bothCodecs: Set<VideoCodec> = [.h264, .h265]
}
