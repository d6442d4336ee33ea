/// The share page served at `/` of the WHIP port (see SharePageRoutes): one self-contained document, shipped inside
/// the daemon, that fetches nothing from anywhere else (no CDN: it must work on an offline network, and the page
/// that captures a screen must not run anyone else's script). It sends a screen or a camera to a stream over WHIP
/// with the token the person types, and shows beside it the picture the daemon decoded from the stream's ring.
enum SharePage {
    // A raw string: the script's backslashes and `${…}` stay as they are.
    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>streamrecvd: share</title>
<style>
:root { color-scheme: light dark; --bad: #c62828; --good: #2e7d32; --line: #8884; }
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; padding: 1rem; max-width: 1200px; }
h1 { font-size: 1.3rem; margin: 0 0 .8rem; }
h2 { font-size: 1rem; margin: 0 0 .5rem; }
form { display: flex; flex-wrap: wrap; gap: .6rem; align-items: end; margin-bottom: 1rem; }
label { display: flex; flex-direction: column; font-size: .85rem; gap: .2rem; }
select, input, button { font: inherit; padding: .35rem .6rem; }
button { cursor: pointer; }
button:disabled { cursor: default; opacity: .5; }
.panels { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 1rem; }
section { border: 1px solid var(--line); border-radius: 6px; padding: .8rem; }
video, img { width: 100%; aspect-ratio: 16 / 9; object-fit: contain; background: #000; display: block; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .1rem .8rem; margin: .6rem 0 0; font-size: .9rem; }
dt { opacity: .7; }
dd { margin: 0; font-variant-numeric: tabular-nums; }
.bad { color: var(--bad); font-weight: 600; }
.good { color: var(--good); }
#status { min-height: 1.4em; }
</style>
</head>
<body>
<h1>Share to streamrecvd</h1>
<p id="insecure" class="bad" hidden>This browser only shares a screen or a camera with a secure page: open this page as
localhost on the daemon's machine (for example through an SSH tunnel to the WHIP port) or behind an HTTPS proxy.</p>
<form id="form" autocomplete="off">
  <label>Stream <select id="stream" required></select></label>
  <label>Token <input id="token" type="password" size="28" spellcheck="false" required></label>
  <button type="button" id="screen">Share screen</button>
  <button type="button" id="camera">Share camera</button>
  <button type="button" id="stop" disabled>Stop</button>
</form>
<p id="status" role="status"></p>
<div class="panels">
  <section>
    <h2>What this browser sends</h2>
    <video id="local" muted autoplay playsinline></video>
    <dl>
      <dt>Connection</dt><dd id="sendState">not connected</dd>
      <dt>Codec</dt><dd id="sendCodec">–</dd>
      <dt>Bitrate</dt><dd id="sendRate">–</dd>
      <dt>Allowed</dt><dd id="sendAllowed">–</dd>
      <dt>Frame rate</dt><dd id="sendFps">–</dd>
      <dt>Resolution</dt><dd id="sendSize">–</dd>
      <dt>Limited by</dt><dd id="sendLimit">–</dd>
    </dl>
  </section>
  <section>
    <h2>What the daemon decoded</h2>
    <img id="picture" alt="The newest frame the daemon decoded">
    <dl>
      <dt>Frame rate</dt><dd id="recvFps">–</dd>
      <dt>Resolution</dt><dd id="recvSize">–</dd>
      <dt>Latency</dt><dd id="recvAge">–</dd>
      <dt>Frame</dt><dd id="recvSequence">–</dd>
      <dt>Flags</dt><dd id="recvFlags">–</dd>
    </dl>
    <p id="pictureNote"></p>
  </section>
</div>
<script>
'use strict';
const $ = id => document.getElementById(id);
const tokenKey = 'streamrecvd-share-token';
// The session being sent; `run` changes at every start and stop, so that loops of an old session end.
let session = { run: 0 };

function say(text, bad) { $('status').textContent = text; $('status').className = bad ? 'bad' : ''; }
function set(id, text, bad) { $(id).textContent = text; $(id).className = bad ? 'bad' : ''; }
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
// The token lives in this tab only: sessionStorage, never localStorage or a cookie.
function token() { return $('token').value.trim(); }
function authorization() { return { Authorization: 'Bearer ' + token() }; }

async function loadStreams() {
  try {
    const response = await fetch('/streams.json', { cache: 'no-store' });
    const streams = await response.json();
    for (const stream of streams) {
      const option = document.createElement('option');
      option.value = stream.whip;
      option.textContent = stream.name;
      option.dataset.maxBitrate = String(stream.maxBitrate || 0);
      $('stream').append(option);
    }
    if (streams.length === 0) say('No stream takes WebRTC: give one listen = "whip" in the daemon\'s configuration.', true);
  } catch (error) {
    say('Cannot list the streams: ' + error.message, true);
  }
}

// The daemon decodes H.264 and H.265 only: offer H.264 first (every browser encodes it), then H.265, then the rest
// (retransmission and FEC entries stay, so that the browser keeps its own pairing of them).
function preferH264(transceiver) {
  if (!transceiver.setCodecPreferences || !RTCRtpSender.getCapabilities) return;
  const rank = codec => {
    const type = codec.mimeType.toLowerCase();
    if (type === 'video/h264') return /packetization-mode=1/.test(codec.sdpFmtpLine || '') ? 0 : 1;
    return type === 'video/h265' ? 2 : 3;
  };
  const codecs = RTCRtpSender.getCapabilities('video').codecs.slice().sort((a, b) => rank(a) - rank(b));
  if (codecs.length === 0 || rank(codecs[0]) > 2) return say('This browser offers no H.264: the daemon will refuse it.', true);
  try { transceiver.setCodecPreferences(codecs); } catch (error) { console.warn('setCodecPreferences', error); }
}

// WHIP sends every candidate in the offer (the daemon does not take trickled ones): wait for gathering to end, or
// at most 2 s (a host candidate is enough on a LAN; a missing STUN answer must not hold the offer back).
function gathered(pc) {
  return new Promise(resolve => {
    if (pc.iceGatheringState === 'complete') return resolve();
    pc.addEventListener('icegatheringstatechange', () => { if (pc.iceGatheringState === 'complete') resolve(); });
    setTimeout(resolve, 2000);
  });
}

async function share(kind) {
  await stop(true);
  const whip = $('stream').value;
  if (!whip || !token()) return say('Choose a stream and type its token.', true);
  let media;
  try {
    media = kind === 'screen'
      ? await navigator.mediaDevices.getDisplayMedia({ video: { frameRate: 30 }, audio: false })
      : await navigator.mediaDevices.getUserMedia({ video: { frameRate: 30, width: { ideal: 1280 }, height: { ideal: 720 } }, audio: false });
  } catch (error) {
    return say('Nothing to share: ' + error.message, true);
  }
  const track = media.getVideoTracks()[0];
  // A screen's text stays sharp at a lower frame rate; a camera keeps its motion at a lower resolution.
  track.contentHint = kind === 'screen' ? 'detail' : 'motion';
  const pc = new RTCPeerConnection({ bundlePolicy: 'max-bundle' });
  const run = session.run + 1;
  session = { run, pc, media, whip, location: null, last: null, history: [] };
  window.shareHistory = session.history;
  // The browser's own "Stop sharing" bar ends the track: end the session with it.
  track.addEventListener('ended', () => { if (session.run === run) stop(); });
  $('local').srcObject = media;
  buttons(true);
  pc.addEventListener('connectionstatechange', () => {
    const state = pc.connectionState;
    set('sendState', state, state === 'failed' || state === 'disconnected');
    if (state === 'connected' && session.run === run) {
      $('sendState').className = 'good';
      say(`Sharing to ${$('stream').selectedOptions[0].textContent}.`);
    }
    if (state === 'failed' && session.run === run) {
      say('The connection failed (ICE or DTLS): is the media port reachable from here?', true);
      stop(true);
    }
  });
  // The encoder may use what the stream allows (max_bitrate): Chromium otherwise holds a 1080p screen to about
  // 2.5 Mbit/s whatever the link carries. A screen keeps its resolution when the encoder must give way.
  const maxBitrate = Number($('stream').selectedOptions[0].dataset.maxBitrate) || undefined;
  const transceiver = pc.addTransceiver(track, { direction: 'sendonly', streams: [media], sendEncodings: [{ maxBitrate }] });
  preferH264(transceiver);
  try {
    const parameters = transceiver.sender.getParameters();
    parameters.degradationPreference = kind === 'screen' ? 'maintain-resolution' : 'balanced';
    await transceiver.sender.setParameters(parameters);
  } catch (error) {
    console.warn('setParameters', error);
  }
  try {
    await pc.setLocalDescription(await pc.createOffer());
    await gathered(pc);
    say('Sending the offer…');
    const response = await fetch(whip, {
      method: 'POST', body: pc.localDescription.sdp,
      headers: { ...authorization(), 'Content-Type': 'application/sdp' },
    });
    const text = await response.text();
    if (response.status !== 201) throw new Error(`the daemon refused the offer (${response.status}): ${text}`);
    if (session.run !== run) return;
    const location = response.headers.get('Location');
    session.location = location ? new URL(location, document.baseURI).href : null;
    await pc.setRemoteDescription({ type: 'answer', sdp: text });
    say('Offer answered: connecting…');
    statistics(run);
    watch(run);
  } catch (error) {
    if (session.run === run) { say(error.message, true); stop(true); }
  }
}

// Stop: DELETE the WHIP session first (closing the connection first would end it on the daemon's side as a
// vanished client, and the DELETE would then find no session), then close.
async function stop(quiet) {
  const { pc, media, location } = session;
  session = { run: session.run + 1 };
  buttons(false);
  let outcome = 'Stopped.', bad = false;
  if (location) {
    try {
      const response = await fetch(location, { method: 'DELETE', headers: authorization() });
      if (!response.ok) [outcome, bad] = [`Stopped; the daemon answered DELETE with ${response.status}.`, true];
    } catch (error) {
      [outcome, bad] = ['Stopped; DELETE failed: ' + error.message, true];
    }
  }
  if (media) media.getTracks().forEach(track => track.stop());
  if (pc) pc.close();
  $('local').srcObject = null;
  set('sendState', 'not connected');
  if (!quiet && pc) say(outcome, bad);
}

function buttons(sharing) {
  $('stop').disabled = !sharing;
  $('stream').disabled = sharing;
}

// Once a second: what the browser's encoder does (bitrate from bytesSent between two reports).
async function statistics(run) {
  while (session.run === run) {
    try {
      const report = await session.pc.getStats();
      let out, pair;
      report.forEach(entry => {
        if (entry.type === 'outbound-rtp' && entry.kind === 'video') out = entry;
        if (entry.type === 'transport' && entry.selectedCandidatePairId) pair = report.get(entry.selectedCandidatePairId);
      });
      // What the browser's congestion control allows itself on this connection (the daemon's feedback drives it).
      const allowed = pair && pair.availableOutgoingBitrate;
      if (allowed) set('sendAllowed', `${Math.round(allowed / 1000)} kbit/s`);
      if (out && session.run === run) {
        const last = session.last;
        let rate;
        if (last && out.timestamp > last.timestamp) {
          rate = Math.round((out.bytesSent - last.bytesSent) * 8 / (out.timestamp - last.timestamp));
          set('sendRate', `${rate} kbit/s`);
        }
        session.last = { bytesSent: out.bytesSent, timestamp: out.timestamp };
        // Ten minutes of seconds, for whoever looks (and for the tests, through window.shareHistory).
        session.history.push({ time: out.timestamp, sentKbps: rate, allowedKbps: allowed && Math.round(allowed / 1000),
                               fps: out.framesPerSecond, width: out.frameWidth, height: out.frameHeight,
                               framesEncoded: out.framesEncoded, limit: out.qualityLimitationReason });
        if (session.history.length > 600) session.history.shift();
        const codec = out.codecId && report.get(out.codecId);
        set('sendCodec', codec ? codec.mimeType.replace('video/', '') + (codec.sdpFmtpLine ? ` (${codec.sdpFmtpLine})` : '') : '–');
        set('sendFps', out.framesPerSecond !== undefined ? String(out.framesPerSecond) : '–');
        set('sendSize', out.frameWidth ? `${out.frameWidth} × ${out.frameHeight}` : '–');
        // Bandwidth is the encoder's ramp-up at every start; only a CPU limit is worth a warning.
        set('sendLimit', out.qualityLimitationReason || '–', out.qualityLimitationReason === 'cpu');
      }
    } catch (error) {
      console.warn('getStats', error);
    }
    await sleep(1000);
  }
}

// About 5 times a second: the newest frame the daemon decoded. An <img> cannot send the token, so the picture is
// fetched with it and shown from a blob: URL. The frame rate is the daemon's, from how far its frame numbers moved
// over the last two seconds, not how often this page asked.
async function watch(run) {
  const seen = [];
  while (session.run === run) {
    const began = performance.now();
    try {
      const response = await fetch(`${session.whip}/frame.png?t=${Date.now()}`, { headers: authorization(), cache: 'no-store' });
      if (response.ok) {
        const blob = await response.blob();
        if (session.run === run) show(blob, response.headers, seen);
      } else {
        $('pictureNote').textContent = `${response.status}: ${await response.text()}`;
      }
    } catch (error) {
      $('pictureNote').textContent = 'No picture: ' + error.message;
    }
    await sleep(Math.max(50, 200 - (performance.now() - began)));
  }
}

function show(blob, headers, seen) {
  const previous = $('picture').src;
  $('picture').src = URL.createObjectURL(blob);
  if (previous.startsWith('blob:')) URL.revokeObjectURL(previous);
  $('pictureNote').textContent = '';
  const field = name => headers.get('X-Frame-' + name);
  const sequence = Number(field('Sequence'));
  const now = performance.now();
  // A smaller number: the stream restarted; count again from here.
  if (seen.length && sequence < seen[seen.length - 1][1]) seen.length = 0;
  seen.push([now, sequence]);
  while (seen.length > 2 && now - seen[0][0] > 2000) seen.shift();
  const [then, first] = seen[0];
  set('recvFps', now - then > 400 ? ((sequence - first) * 1000 / (now - then)).toFixed(1) : '…');
  set('recvSize', `${field('Width')} × ${field('Height')} (${field('Format')})`);
  const age = Number(field('Age-Ms'));
  const pipeline = field('Pipeline-Ms');
  set('recvAge', `${age} ms since decoded` + (pipeline !== null ? `, ${pipeline} ms from first byte to decoded` : ''), age > 2000);
  set('recvSequence', String(sequence));
  const flags = (field('Flags') || 'none').split(',');
  set('recvFlags', flags.join(', '), flags.includes('corrupt') || flags.includes('discontinuity'));
}

$('token').value = sessionStorage.getItem(tokenKey) || '';
$('token').addEventListener('input', () => sessionStorage.setItem(tokenKey, $('token').value));
$('screen').addEventListener('click', () => share('screen'));
$('camera').addEventListener('click', () => share('camera'));
$('stop').addEventListener('click', () => stop());
// Leaving the page ends the session too (keepalive: the request outlives the page).
window.addEventListener('pagehide', () => {
  if (session.location) fetch(session.location, { method: 'DELETE', headers: authorization(), keepalive: true });
});
if (!window.isSecureContext || !navigator.mediaDevices) {
  $('insecure').hidden = false;
  $('screen').disabled = $('camera').disabled = true;
} else if (!navigator.mediaDevices.getDisplayMedia) {
  $('screen').disabled = true;
}
loadStreams();
</script>
</body>
</html>
"""#
}
