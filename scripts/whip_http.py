"""The WHIP exchange (RFC 9725) of the tests' clients, scripts/whip-client.py and scripts/aiortc-whip-client.py:
POST an offer, DELETE the session. urllib, so https:// trusts Python's default store (SSL_CERT_FILE names another).
"""
import time
import urllib.error
import urllib.request


class WHIPFailure(Exception):
    """The POST failed: `HTTP 401 <body>`, or the connection's error."""


def _headers(token, content_type=None):
    headers = {"Content-Type": content_type} if content_type else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def post_offer(url, token, offer, say):
    """The answer and the session's Location; raises WHIPFailure."""
    request = urllib.request.Request(url, data=offer.encode(), headers=_headers(token, "application/sdp"), method="POST")
    say(f"posting (CLOCK_MONOTONIC {time.monotonic_ns()} ns)")  # scripts/bench-webrtc.py: POST → first frame
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = response.read().decode()
            location = response.headers.get("Location")
            say(f"answered {response.status}, session {location}")
            return answer, location
    except urllib.error.HTTPError as error:
        raise WHIPFailure(f"HTTP {error.code} {error.read().decode().strip()}") from None
    except OSError as error:
        raise WHIPFailure(str(error)) from None


def delete_session(url, token, location, say):
    """DELETE of the session `location` (a path) on the server of `url`; a failure is said, not raised."""
    request = urllib.request.Request(url.split("/whip/")[0] + location, headers=_headers(token), method="DELETE")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            say(f"DELETE answered {response.status}")
    except (urllib.error.HTTPError, OSError) as error:
        say(f"DELETE failed: {error}")
