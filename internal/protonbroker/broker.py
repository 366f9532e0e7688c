#!/usr/bin/env python3
"""A small AMQP 1.0 broker on Apache Qpid Proton (Proton-C through its Python binding), for tests.

iotq tests its AMQP client against two independent AMQP 1.0 stacks: ActiveMQ Artemis (Java,
internal/artemis) and this broker (Proton-C's engine, the one Qpid Dispatch Router and the Qpid
C++ broker are built on). Started by internal/protonbroker (Go), which embeds this file.

  broker.py [--host H] [--port N] [--tls-port N --cert F --key F] [--mechs "ANONYMOUS PLAIN"]
            [--user NAME:PASSWORD]... [--credit N] [--backlog N] [--reject-prefix P]
            [--stop-on-eof] [--verbose]

Prints "ready PORT [TLS-PORT]" on standard output once it listens (port 0 = a free port chosen
by the kernel). Stops on SIGTERM/SIGINT, and with --stop-on-eof when standard input closes.

Features:
- SASL: the mechanisms of --mechs (default "ANONYMOUS PLAIN"); a client may also skip SASL
  (AMQP header straight away). Proton-C built without Cyrus SASL (Debian's) has no server side
  PLAIN, so when --mechs has PLAIN the plain TCP listener runs the SASL layer itself (SaslFront:
  mechanisms, init, outcome; PLAIN checked against the --user list, none given: any user name
  and password) and hands the connection to Proton-C after the outcome, with what the client
  already pipelined behind its sasl-init. Otherwise, and on the TLS listener, Proton-C's own
  SASL layer serves ANONYMOUS.
- Addresses are created on first use. A message to an address goes to every receiver link
  attached to it at that moment (each has its own queue: like Artemis's multicast addresses);
  a message that finds no receiver waits in the address's backlog (at most --backlog, the
  oldest dropped) for the first receiver that attaches.
- A sending client gets --credit link credit (topped up as messages arrive); unsettled
  transfers get an accepted disposition once queued, or rejected for an address starting with
  --reject-prefix (to test a client's rejected outcome). Pre-settled transfers are queued.
- A receiving client gets messages while it has credit; a message it releases or modifies is
  queued again for it, one it accepts or rejects is done. A pre-settled (at-most-once)
  receiver link gets settled transfers.
- Proton-C enforces the protocol: for example a transfer sent before the session's begin was
  answered exceeds the incoming window and the connection is closed with
  amqp:session:window-violation (docs/amqp.md).
"""
import argparse
import collections
import os
import signal
import socket
import struct
import sys
import threading
import time

from proton import Condition, Data, Delivery, Endpoint, Link, SSLDomain, Transport
from proton.handlers import MessagingHandler
from proton.reactor import Container

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_MECHANISMS, SASL_INIT, SASL_OUTCOME = 0x40, 0x41, 0x44
MAX_SASL_FRAME = 4096
SASL_TIMEOUT = 30.0


def sasl_frame(code, fields):
    """A SASL frame (type 1, channel 0) of the performative code with fields."""
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(code)
    d.put_list()
    d.enter()
    for f in fields:
        f(d)
    d.exit()
    d.exit()
    body = d.encode()
    return struct.pack(">IBBH", 8 + len(body), 2, 1, 0) + body


def parse_sasl_init(frame):
    """Mechanism and initial response of a sasl-init frame, or raises ValueError."""
    doff = frame[4] * 4
    if frame[5] != 1 or doff < 8 or doff > len(frame):
        raise ValueError("not a SASL frame")
    d = Data()
    d.decode(frame[doff:])
    d.rewind()
    if not d.next() or d.type() != Data.DESCRIBED:
        raise ValueError("no performative")
    d.enter()
    d.next()
    if d.get_object() != SASL_INIT:
        raise ValueError("not sasl-init")
    d.next()
    fields = d.get_object()
    mech = str(fields[0]) if len(fields) > 0 else ""
    resp = bytes(fields[1]) if len(fields) > 1 and fields[1] is not None else b""
    return mech, resp


class SaslFront:
    """The SASL layer of one accepted connection (see the module's doc), then Proton-C."""

    def __init__(self, broker, container, acceptor, sock):
        self.broker, self.container, self.acceptor, self.sock = broker, container, acceptor, sock
        self.buf = b""
        self.sasl = False
        self.sel = container.selectable(handler=self, delegate=sock)
        self.sel.reading = True
        self.sel._transport = None
        self.sel.deadline = time.time() + SASL_TIMEOUT
        container.update(self.sel)

    def close(self):
        self.sel.terminate()
        self.container.update(self.sel)

    def on_selectable_expired(self, event):
        self.broker.log("SASL: no outcome within %ss: closed" % SASL_TIMEOUT)
        self.close()

    def on_selectable_readable(self, event):
        try:
            b = self.sock.recv(MAX_SASL_FRAME)
        except BlockingIOError:
            return
        except OSError as e:
            self.broker.log("SASL: recv:", e)
            self.close()
            return
        if not b:
            self.close()
            return
        self.buf += b
        try:
            self.step()
        except ValueError as e:
            self.broker.log("SASL:", e)
            self.close()

    def step(self):
        if not self.sasl:
            if len(self.buf) < 8:
                return
            head, self.buf = self.buf[:8], self.buf[8:]
            if head == AMQP_HEADER:  # no SASL
                self.hand_over(head + self.buf)
                return
            if head != SASL_HEADER:
                raise ValueError("protocol header %r" % head)
            self.sasl = True
            mechs = self.broker.args.mechs.split()
            self.sock.sendall(SASL_HEADER + sasl_frame(SASL_MECHANISMS, [
                lambda d: (d.put_array(False, Data.SYMBOL), d.enter(), [d.put_symbol(m) for m in mechs], d.exit())]))
        if len(self.buf) < 8:
            return
        size = struct.unpack(">I", self.buf[:4])[0]
        if size < 8 or size > MAX_SASL_FRAME:
            raise ValueError("SASL frame of %d bytes" % size)
        if len(self.buf) < size:
            return
        frame, rest = self.buf[:size], self.buf[size:]
        mech, resp = parse_sasl_init(frame)
        ok = self.broker.authenticate(mech, resp)
        self.sock.sendall(sasl_frame(SASL_OUTCOME, [lambda d: d.put_ubyte(0 if ok else 1)]))
        if not ok:
            self.broker.log("SASL %s: authentication failed" % mech)
            self.close()
            return
        self.hand_over(rest)

    def hand_over(self, data):
        """Proton-C takes the connection over, with data already read from it."""
        self.sel.release()
        self.close()
        r = self.container
        c = r.connection(self.broker)
        c.front = True
        c._acceptor = self.acceptor  # the reactor then connects nothing (see proton.handlers.IOHandler)
        t = Transport(Transport.SERVER)
        t.bind(c)
        s = r.selectable(delegate=self.sock)
        s._transport = t
        t._selectable = s
        if data:
            t.push(data)
        from proton.handlers import IOHandler
        IOHandler.update(t, s, r.now)


class FrontAcceptor:
    """A listener whose connections start in SaslFront."""

    def __init__(self, broker, container, host, port):
        self.broker, self.container = broker, container
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(128)
        self.sock.setblocking(False)
        self.sel = container.selectable(handler=self, delegate=self.sock)
        self.sel.reading = True
        self.sel._transport = None
        container.update(self.sel)

    def port(self):
        return self.sock.getsockname()[1]

    def on_selectable_readable(self, event):
        try:
            sock, _ = self.sock.accept()
        except BlockingIOError:
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        SaslFront(self.broker, self.container, self, sock)


class Address:
    """Receivers attached to one address, and the messages that found none."""

    def __init__(self, name, backlog):
        self.name = name
        self.consumers = []
        self.backlog = collections.deque(maxlen=backlog)


class Consumer:
    """One receiver link of a client: the broker's sender and its queue."""

    def __init__(self, link):
        self.link = link
        self.queue = collections.deque()
        self.unsettled = {}  # delivery tag -> message
        self.tags = 0


class Broker(MessagingHandler):
    def __init__(self, args):
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.args = args
        self.users = dict(u.split(":", 1) for u in args.user)
        self.addresses = {}
        self.consumers = {}  # sender link -> Consumer

    def log(self, *what):
        if self.args.verbose:
            print("broker:", *what, file=sys.stderr, flush=True)

    def address(self, name):
        a = self.addresses.get(name)
        if a is None:
            a = self.addresses[name] = Address(name, self.args.backlog)
        return a

    # Listening and SASL.

    def on_start(self, event):
        ports = []
        if "PLAIN" in self.args.mechs.split():
            ports.append(FrontAcceptor(self, event.container, self.args.host, self.args.port).port())
        else:
            acc = event.container.acceptor(self.args.host, self.args.port)
            ports.append(acc._selectable._delegate.getsockname()[1])
        if self.args.tls_port is not None:
            domain = SSLDomain(SSLDomain.MODE_SERVER)
            domain.set_credentials(self.args.cert, self.args.key, None)
            domain.set_peer_authentication(SSLDomain.ANONYMOUS_PEER)
            tls = event.container.acceptor(self.args.host, self.args.tls_port)
            tls.set_ssl_domain(domain)
            ports.append(tls._selectable._delegate.getsockname()[1])
        print("ready", *ports, flush=True)

    def on_connection_bound(self, event):
        if getattr(event.connection, "front", False):
            return  # SaslFront did SASL
        mechs = " ".join(m for m in self.args.mechs.split() if m != "PLAIN") or "ANONYMOUS"
        sasl = event.transport.sasl()
        sasl.allow_insecure_mechs = True
        sasl.allowed_mechs(mechs)

    def authenticate(self, mech, resp):
        if mech not in self.args.mechs.split():
            return False
        if mech == "ANONYMOUS":
            return True
        if mech == "PLAIN":
            parts = resp.split(b"\x00")
            if len(parts) != 3:
                return False
            user, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
            return not self.users or self.users.get(user) == password
        return False

    def on_transport_error(self, event):
        c = event.transport.condition
        self.log("transport error:", c.name if c else "", c.description if c else "")

    # Endpoints.

    def on_link_opening(self, event):
        link = event.link
        if link.is_sender:  # the client receives
            addr = link.remote_source.address
            if not addr:
                link.condition = _condition("amqp:invalid-field", "a receiver needs a source address")
                link.close()
                return
            link.source.address = addr
            link.target.copy(link.remote_target)
            if link.remote_snd_settle_mode == Link.SND_SETTLED:
                link.snd_settle_mode = Link.SND_SETTLED
            c = Consumer(link)
            self.consumers[link] = c
            a = self.address(addr)
            a.consumers.append(c)
            c.queue.extend(a.backlog)
            a.backlog.clear()
            self.log("receiver attached to", addr)
        else:  # the client sends
            link.target.address = link.remote_target.address
            link.source.copy(link.remote_source)
            self.log("sender attached to", link.remote_target.address)

    def on_link_opened(self, event):
        if event.link.is_receiver:
            self.top_up(event.link)
        else:
            self.pump(event.link)

    def forget(self, link):
        c = self.consumers.pop(link, None)
        if c is None:
            return
        a = self.addresses.get(link.source.address)
        if a is not None and c in a.consumers:
            a.consumers.remove(c)

    def on_link_closing(self, event):
        self.forget(event.link)

    def on_link_error(self, event):
        self.forget(event.link)

    def on_link_closed(self, event):
        self.forget(event.link)

    def on_disconnected(self, event):
        conn = event.connection
        if conn is None:
            return
        for link in [l for l in self.consumers if l.connection == conn]:
            self.forget(link)

    def on_connection_closing(self, event):
        for link in [l for l in self.consumers if l.connection == event.connection]:
            self.forget(link)

    # Messages in.

    def top_up(self, link):
        if link.credit < self.args.credit:
            link.flow(self.args.credit - link.credit)

    def on_message(self, event):
        dlv, link, msg = event.delivery, event.link, event.message
        addr = link.target.address or msg.address
        if not addr:
            self.settle(dlv, Delivery.REJECTED, "amqp:invalid-field", "no address (link target or message to)")
            return
        if self.args.reject_prefix and addr.startswith(self.args.reject_prefix):
            self.settle(dlv, Delivery.REJECTED, "amqp:not-allowed", "address %s rejects messages" % addr)
            return
        a = self.address(addr)
        if a.consumers:
            for c in a.consumers:
                c.queue.append(msg)
                self.pump(c.link)
        else:
            a.backlog.append(msg)
        self.settle(dlv, Delivery.ACCEPTED)
        self.top_up(link)

    def settle(self, dlv, outcome, name=None, description=None):
        if not dlv.remote_state and not dlv.settled and not _remote_settled(dlv):
            if name:
                dlv.local.condition = _condition(name, description)
            dlv.update(outcome)
        dlv.settle()

    # Messages out.

    def on_sendable(self, event):
        self.pump(event.link)

    def pump(self, link):
        c = self.consumers.get(link)
        if c is None or not (link.state & Endpoint.LOCAL_ACTIVE):
            return
        while link.credit > 0 and c.queue:
            msg = c.queue.popleft()
            c.tags += 1
            tag = str(c.tags)
            dlv = link.send(msg, tag=tag)
            if link.snd_settle_mode == Link.SND_SETTLED:
                dlv.settle()
            else:
                c.unsettled[tag] = msg

    def outcome(self, event, again):
        dlv = event.delivery
        c = self.consumers.get(dlv.link)
        if c is None:
            return
        msg = c.unsettled.pop(dlv.tag, None)
        if again and msg is not None:
            c.queue.appendleft(msg)
            self.pump(dlv.link)
        dlv.settle()

    def on_accepted(self, event):
        self.outcome(event, False)

    def on_rejected(self, event):
        self.outcome(event, False)

    def on_released(self, event):  # released and modified
        self.outcome(event, True)

    def on_settled(self, event):
        c = self.consumers.get(event.delivery.link)
        if c is not None:
            c.unsettled.pop(event.delivery.tag, None)


def _remote_settled(dlv):
    try:
        return dlv.remote.settled
    except AttributeError:
        return False


def _condition(name, description):
    return Condition(name, description)


def main():
    p = argparse.ArgumentParser(description="small AMQP 1.0 broker on Qpid Proton, for tests")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--tls-port", type=int)
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--mechs", default="ANONYMOUS PLAIN")
    p.add_argument("--user", action="append", default=[], help="NAME:PASSWORD for SASL PLAIN")
    p.add_argument("--credit", type=int, default=100)
    p.add_argument("--backlog", type=int, default=10000)
    p.add_argument("--reject-prefix", default="")
    p.add_argument("--stop-on-eof", action="store_true")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    if args.tls_port is not None and not (args.cert and args.key):
        p.error("--tls-port needs --cert and --key")
    for u in args.user:
        if ":" not in u:
            p.error("--user %r: want NAME:PASSWORD" % u)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, lambda *_: os._exit(0))
    if args.stop_on_eof:
        def watch():
            while sys.stdin.buffer.read(4096):
                pass
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
    Container(Broker(args)).run()


if __name__ == "__main__":
    main()
