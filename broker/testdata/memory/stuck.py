#!/usr/bin/env python3
# A stuck QoS 1 subscriber: CONNECT (MQTT 3.1.1), SUBSCRIBE QoS 1, then it
# never reads again (receive buffer 4 KiB).
# usage: stuck.py HOST PORT [TOPIC [CLEAN(1|0) [CLIENT_ID [SECONDS]]]]
import socket, struct, sys, time
host, port = sys.argv[1], int(sys.argv[2])
topic = sys.argv[3] if len(sys.argv) > 3 else "t"
clean = (sys.argv[4] == "1") if len(sys.argv) > 4 else True
cid = sys.argv[5] if len(sys.argv) > 5 else "stuck"
def s16(b): return struct.pack(">H", len(b)) + b
def rl(n):
    out = b""
    while True:
        d = n % 128; n //= 128
        if n: d |= 0x80
        out += bytes([d])
        if not n: return out
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect((host, port))
vh = s16(b"MQTT") + bytes([4, 0x02 if clean else 0x00]) + struct.pack(">H", 600)
body = vh + s16(cid.encode())
s.sendall(bytes([0x10]) + rl(len(body)) + body)
print("connack", s.recv(4).hex(), flush=True)
body = struct.pack(">H", 1) + s16(topic.encode()) + bytes([1])
s.sendall(bytes([0x82]) + rl(len(body)) + body)
print("suback", s.recv(5).hex(), flush=True)
time.sleep(float(sys.argv[6]) if len(sys.argv) > 6 else 3600)
