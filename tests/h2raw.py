"""A gRPC call over a bare socket that never reads its answer: the slow-reading client.

It speaks just enough HTTP/2 to send one unary call: the preface, SETTINGS with an initial
flow-control window of 0 (the server may not send the response's body), an ACK of the
server's SETTINGS, a HEADERS frame (HPACK literals, no Huffman, no table) and the request in
one DATA frame. It then reads nothing at all, so the server's writes pile up in its own
buffers until the call's `grpc-timeout` passes or the socket is closed.
"""

from __future__ import annotations

import socket
import struct

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _SETTINGS = 0x0, 0x1, 0x4
_END_STREAM, _ACK, _END_HEADERS = 0x1, 0x1, 0x4
_INITIAL_WINDOW_SIZE = 0x4


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))[1:]
        + bytes([kind, flags])
        + struct.pack(">I", stream)
        + payload
    )


def _integer(value: int) -> bytes:
    """HPACK's integer with a 7-bit prefix (the H bit, no Huffman, left 0)."""
    if value < 127:
        return bytes([value])
    out, value = bytearray([127]), value - 127
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def _header(name: str, value: str) -> bytes:
    """A literal header field without indexing, new name."""
    raw_name, raw_value = name.encode(), value.encode()
    return b"\x00" + _integer(len(raw_name)) + raw_name + _integer(len(raw_value)) + raw_value


def stuck_call(port: int, method: str, request: bytes, timeout_s: float) -> socket.socket:
    """Start a call to /`method` on 127.0.0.1:`port` that will never read its response; the
    returned socket stays open until the caller closes it."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    headers = b"".join(
        _header(name, value)
        for name, value in (
            (":method", "POST"),
            (":scheme", "http"),
            (":path", f"/{method}"),
            (":authority", f"127.0.0.1:{port}"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("grpc-timeout", f"{int(timeout_s * 1000)}m"),
        )
    )
    body = b"\x00" + struct.pack(">I", len(request)) + request
    settings = struct.pack(">HI", _INITIAL_WINDOW_SIZE, 0)
    sock.sendall(
        _PREFACE
        + _frame(_SETTINGS, 0, 0, settings)
        + _frame(_SETTINGS, _ACK, 0, b"")
        + _frame(_HEADERS, _END_HEADERS, 1, headers)
        + _frame(_DATA, _END_STREAM, 1, body)
    )
    return sock
