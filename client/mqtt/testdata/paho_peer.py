"""Independent MQTT peer for iotq's client tests (Python paho-mqtt 2.x).

usage: paho_peer.py HOST PORT PROTOCOL(3|5) MODE
  MODE pub: publish "py-0".."py-4" on topic py/in with QoS 1, retained last
  MODE sub: subscribe to py/out with QoS 2, print each payload on a line,
            exit after 3 messages; prints "ready" once subscribed.
"""
import sys

import paho.mqtt.client as mqtt

host, port, proto, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
version = mqtt.MQTTv5 if proto == "5" else mqtt.MQTTv311
c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=version)
got = []


def on_message(client, userdata, msg):
    got.append(msg.payload.decode())
    print(msg.payload.decode(), flush=True)
    if len(got) == 3:
        client.disconnect()


def on_subscribe(client, userdata, mid, reason_codes, properties):
    print("ready", flush=True)


c.on_message = on_message
c.on_subscribe = on_subscribe
c.connect(host, port, keepalive=30)
if mode == "pub":
    c.loop_start()
    for i in range(5):
        c.publish("py/in", "py-%d" % i, qos=1).wait_for_publish(10)
    c.disconnect()
    c.loop_stop()
else:
    c.subscribe("py/out", qos=2)
    c.loop_forever(timeout=1.0)
