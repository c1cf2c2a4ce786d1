"""uvicorn's httptools HTTP/1.1 protocol with bounded header reads and pause-proof timers.

uvicorn (0.54) has no header read timeout and no header size limit with httptools: a client
that connects and sends nothing, or sends headers a byte at a time, holds a connection (and the
headers buffered so far) for as long as it likes. And its keep-alive timer closes an idle
connection even when the next request is already waiting in the socket: after a pause of the
process (SIGSTOP, CPU throttling) longer than the keep-alive timeout, the event loop (uvloop:
libuv runs due timers before it polls sockets; an epoll_wait interrupted by SIGCONT returns no
events) fires the timer first, and a request the kernel had already received is dropped
without an answer.

:func:`protocol_class` builds a subclass of uvicorn's ``HttpToolsProtocol`` that

- bounds the time from a connection's start, or a request's first byte, to the end of its
  headers (``header_timeout`` seconds): past it the connection is closed, with ``408 Request
  Timeout`` when part of a request came;
- bounds the headers' size (``max_header_bytes``): past it ``431`` and close;
- gives every timer that would close a connection (keep-alive, header read) a short grace
  (:data:`GRACE_SECONDS`) when it fires: the loop polls the sockets once more, so data that
  arrived during a pause is read (which cancels the timer) before anything is closed;
- while the server drains (``server_state.draining`` set by ``runner.WebhookServer``), answers
  every request with ``Connection: close`` and then closes the connection, so a client drops
  its pooled connection after a complete answer instead of losing a request to a close.

The request body is bounded by the app (``create_app(body_timeout=)``), which answers 408.
"""

from __future__ import annotations

import asyncio

__all__ = ["protocol_class", "GRACE_SECONDS", "DEFAULT_HEADER_TIMEOUT", "DEFAULT_MAX_HEADER_BYTES"]

#: Seconds a firing close timer waits for the loop to read what already arrived.
GRACE_SECONDS = 0.1
#: Seconds from a connection's start (after TLS) or a request's first byte to its last header
#: byte. The API server gives up on the whole call after the webhook's timeoutSeconds (5 s).
DEFAULT_HEADER_TIMEOUT = 5.0
#: Request line plus headers, bytes (Go's net/http server default is 1 MiB; the API server
#: sends well under 1 KiB).
DEFAULT_MAX_HEADER_BYTES = 64 * 1024

_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
_431 = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"


def _reply(template: bytes, text: str) -> bytes:
    body = (text + "\n").encode("ascii")
    return template % (len(body), body)


def protocol_class(*, header_timeout: float = DEFAULT_HEADER_TIMEOUT,
                   max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
                   grace: float = GRACE_SECONDS) -> type[asyncio.Protocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` with these bounds (see module docstring).

    Args:
        header_timeout: seconds from a connection's start or a request's first byte to the end
            of its headers.
        max_header_bytes: request line + headers, bytes.
        grace: seconds a firing close timer leaves the loop to read data that already arrived.
    """
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol  # uvicorn only where a server runs

    class _BoundedHttpToolsProtocol(HttpToolsProtocol):
        header_timeout: float = DEFAULT_HEADER_TIMEOUT
        max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
        grace: float = GRACE_SECONDS

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self._header_timer: asyncio.TimerHandle | None = None
            self._in_headers = False  # between a request's first byte (or the connection's start) and its headers' end
            self._header_bytes = 0
            self._started = False  # a byte of the current request arrived

        # -- header read bound

        def _arm_header_timer(self, delay: float | None = None) -> None:
            self._cancel_header_timer()
            self._header_timer = self.loop.call_later(self.header_timeout if delay is None else delay,
                                                      self._header_timeout_fired, delay is not None)

        def _cancel_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _header_timeout_fired(self, in_grace: bool) -> None:
            self._header_timer = None
            if self.transport is None or self.transport.is_closing() or not self._in_headers:
                return
            if not in_grace:  # let the loop read what a pause left in the socket first
                self._arm_header_timer(self.grace)
                return
            if self._responding():  # a pipelined request's head: never write into a response in progress
                self._arm_header_timer()
                return
            if self._started:
                self.transport.write(_reply(_408, f"request headers not received within {self.header_timeout:g}s"))
            self.transport.close()

        def _responding(self) -> bool:
            return self.cycle is not None and not self.cycle.response_complete

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._in_headers, self._header_bytes, self._started = True, 0, False
            self._arm_header_timer()

        def connection_lost(self, exc) -> None:
            self._cancel_header_timer()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            counting = self._in_headers
            if counting:
                self._header_bytes += len(data)
            super().data_received(data)
            # Still inside the headers after this chunk and over the limit: refuse (the chunk
            # that completes the headers may carry body bytes, so only an unfinished head counts).
            if counting and self._in_headers and self._header_bytes > self.max_header_bytes:
                if self.transport is not None and not self.transport.is_closing():
                    if not self._responding():
                        self.transport.write(_reply(_431, f"request headers exceed {self.max_header_bytes} bytes"))
                    self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._in_headers:  # the connection's first request: bounded from the connection's start
                self._started = True
                return
            # A keep-alive connection's next request: its headers get a bound of their own.
            self._in_headers, self._started, self._header_bytes = True, True, 0
            self._arm_header_timer()

        def on_headers_complete(self) -> None:
            self._in_headers, self._started, self._header_bytes = False, False, 0
            self._cancel_header_timer()
            super().on_headers_complete()
            if getattr(self.server_state, "draining", False) and self.cycle is not None:
                self.cycle.keep_alive = False  # uvicorn then sends `connection: close` and closes after it

        # -- keep-alive: close only when nothing is waiting

        def timeout_keep_alive_handler(self) -> None:
            # Fired: give the loop one more poll; data already in the socket cancels this
            # (data_received → _unset_keepalive_if_required) before the close below.
            self.timeout_keep_alive_task = self.loop.call_later(self.grace, self._keep_alive_expired)

        def _keep_alive_expired(self) -> None:
            self.timeout_keep_alive_task = None
            super().timeout_keep_alive_handler()

    return type("GangcheckHttpProtocol", (_BoundedHttpToolsProtocol,), {
        "header_timeout": float(header_timeout), "max_header_bytes": int(max_header_bytes), "grace": float(grace),
    })
