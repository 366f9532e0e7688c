#!/usr/bin/env python3
"""Independent AMQP 1.0 peer for iotq's interop tests (Apache Qpid Proton).

  proton_peer.py send URL ADDRESS N     send N messages "p0".."pN-1" (at least once: waits for
                                        each accepted disposition), print "sent N"
  proton_peer.py recv URL ADDRESS N T   attach a receiver, print "ready", then print each
                                        message body (UTF-8) on its own line, accepting it;
                                        exit 1 if fewer than N arrive within T seconds
"""
import sys

from proton import Message
from proton.utils import BlockingConnection


def main():
    mode, url, address, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    conn = BlockingConnection(url, timeout=20, allowed_mechs="ANONYMOUS")
    try:
        if mode == "send":
            snd = conn.create_sender(address)
            for i in range(n):
                snd.send(Message(body=("p%d" % i).encode()))
            print("sent %d" % n, flush=True)
        elif mode == "recv":
            timeout = float(sys.argv[5])
            rcv = conn.create_receiver(address, credit=n)
            print("ready", flush=True)
            for _ in range(n):
                msg = rcv.receive(timeout=timeout)
                body = msg.body
                if isinstance(body, memoryview):
                    body = body.tobytes()
                if isinstance(body, bytes):
                    body = body.decode()
                print(body, flush=True)
                rcv.accept()
        else:
            print("unknown mode %r" % mode, file=sys.stderr)
            sys.exit(2)
    finally:
        conn.close()


if __name__ == "__main__":
    main()
