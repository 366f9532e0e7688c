#!/usr/bin/env python3
# QoS 1 publisher (MQTT 3.1.1): N messages of SIZE bytes on TOPIC, at most
# WINDOW unacknowledged; waits for every PUBACK. (mosquitto_pub -l -q 1
# stops at the end of its input with messages still queued: 4 478 of 70 000
# arrived.)
# usage: pub.py HOST PORT TOPIC N SIZE [WINDOW [CLIENT_ID]]
import socket, struct, sys, threading, time
host, port, topic, n, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
window = int(sys.argv[6]) if len(sys.argv) > 6 else 100
cid = sys.argv[7] if len(sys.argv) > 7 else "pub"
def s16(b): return struct.pack(">H", len(b)) + b
def rl(n):
    out = b""
    while True:
        d = n % 128; n //= 128
        if n: d |= 0x80
        out += bytes([d])
        if not n: return out
s = socket.socket(); s.connect((host, port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
body = s16(b"MQTT") + bytes([4, 2]) + struct.pack(">H", 600) + s16(cid.encode())
s.sendall(bytes([0x10]) + rl(len(body)) + body)
assert s.recv(4)[3] == 0
sem = threading.Semaphore(window)
acked = [0]
done = threading.Event()
def reader():
    buf = b""
    while acked[0] < n:
        d = s.recv(65536)
        if not d: break
        buf += d
        while len(buf) >= 4:
            assert buf[0] == 0x40, buf[:4].hex()
            buf = buf[4:]; acked[0] += 1; sem.release()
    done.set()
threading.Thread(target=reader, daemon=True).start()
t = s16(topic.encode())
t0 = time.time()
out = []
for i in range(1, n + 1):
    sem.acquire()
    pid = (i - 1) % 65535 + 1
    payload = (b"%0*d" % (size, i))[:size]
    body = t + struct.pack(">H", pid) + payload
    s.sendall(bytes([0x32]) + rl(len(body)) + body)
done.wait(300)
dt = time.time() - t0
print("published %d acked %d in %.2f s (%.0f msg/s)" % (n, acked[0], dt, acked[0] / dt), flush=True)
s.sendall(bytes([0xe0, 0]))
s.close()
