"""Across protocols, on one listener of all four: a message sent by each head (the
native protocol through `mqr send`, STOMP through stomp.py, MQTT through paho, AMQP
through python3-qpid-proton) is received by each head with its body, properties and
headers mapped as docs/protocols.md says.

usage: test_across.py MQRD MQR"""

import json
import os
import subprocess
import sys
import time
import unittest

import paho.mqtt.client as mqtt
import stomp
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from proton import Data, Message, symbol
from proton.reactor import LinkOption
from proton.utils import BlockingConnection

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import run_suite, wait_for  # noqa: E402

CONFIG = """
security: {allow-anonymous: true}
listeners:
  - name: all
    port: 0
    protocols: [mqr, mqtt, stomp, amqp]
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true}
"""

BROKER, MQR = None, None
HEADS = ("mqr", "stomp", "mqtt", "amqp")
BODY = "caf\u00e9 body"


def url():
    return "tcp://127.0.0.1:%d" % BROKER.port


class Topic(LinkOption):
    """An AMQP link's capability `topic`: the address as MULTICAST."""

    def apply(self, link):
        t = link.source if link.is_receiver else link.target
        t.capabilities.put_array(False, Data.SYMBOL)
        t.capabilities.enter()
        t.capabilities.put_symbol(symbol("topic"))
        t.capabilities.exit()


class Receiver:
    """A MULTICAST subscription to address x.<from>.<to> through one head."""

    def __init__(self, head, address):
        self.head, self.got = head, []
        if head == "mqr":
            self.proc = subprocess.Popen([MQR, "recv", "--url", url(), "--routing-type", "multicast", "--count", "1",
                                          "--json", "--timeout", "10", address], stdout=subprocess.PIPE, text=True)
            time.sleep(0.6)
        elif head == "stomp":
            self.c = stomp.Connection12([("127.0.0.1", BROKER.port)])
            outer = self

            class L(stomp.ConnectionListener):
                def on_message(self, frame):
                    outer.got.append((frame.headers, frame.body))

            self.c.set_listener("", L())
            self.c.connect(wait=True)
            self.c.subscribe(destination=address, id="1", ack="auto", headers={"subscription-type": "MULTICAST"})
            time.sleep(0.3)
        elif head == "amqp":
            self.c = BlockingConnection(url().replace("tcp://", "amqp://"), timeout=10)
            self.r = self.c.create_receiver(address, options=Topic())
        else:
            self.c = mqtt.Client(client_id="across-" + address, protocol=mqtt.MQTTv5)
            self.c.on_message = lambda c, u, m: self.got.append(m)
            self.c.connect("127.0.0.1", BROKER.port)
            self.c.loop_start()
            self.c.subscribe(address.replace(".", "/"), 1)
            time.sleep(0.4)

    def result(self):
        """(body, {property: text}) of the one message received."""
        if self.head == "mqr":
            out, _ = self.proc.communicate(timeout=15)
            m = json.loads(out.splitlines()[0])
            return m["body"], {k: str(v) for k, v in m["properties"].items()}
        if self.head == "amqp":
            m = self.r.receive(timeout=5)
            self.r.accept()
            self.c.close()
            props = {k: str(v) for k, v in (m.properties or {}).items()}
            if m.content_type:
                props["content-type"] = m.content_type
            return (m.body.decode() if isinstance(m.body, bytes) else m.body), props
        assert wait_for(lambda: self.got, 5), "nothing received by " + self.head
        if self.head == "stomp":
            self.c.disconnect()
            headers, body = self.got[0]
            return body, headers
        self.c.disconnect()
        self.c.loop_stop()
        m = self.got[0]
        props = dict(getattr(m.properties, "UserProperty", []))
        if hasattr(m.properties, "ContentType"):
            props["content-type"] = m.properties.ContentType
        return m.payload.decode(), props


def send(head, address):
    if head == "mqr":
        subprocess.run([MQR, "send", "--url", url(), "--routing-type", "multicast", "--property", "color=red",
                        "--property", "content-type=text/plain", "--body", BODY, address], check=True, timeout=10,
                       stdout=subprocess.DEVNULL)
    elif head == "stomp":
        c = stomp.Connection12([("127.0.0.1", BROKER.port)])
        c.connect(wait=True)
        c.send(destination=address, body=BODY, content_type="text/plain",
               headers={"color": "red", "destination-type": "MULTICAST"}, receipt="r")
        c.disconnect()
    elif head == "amqp":
        c = BlockingConnection(url().replace("tcp://", "amqp://"), timeout=10)
        c.create_sender(address, options=Topic()).send(Message(body=BODY, properties={"color": "red"},
                                                               content_type="text/plain"))
        c.close()
    else:
        c = mqtt.Client(client_id="across-pub", protocol=mqtt.MQTTv5)
        c.connect("127.0.0.1", BROKER.port)
        c.loop_start()
        p = Properties(PacketTypes.PUBLISH)
        p.UserProperty = [("color", "red")]
        p.ContentType = "text/plain"
        c.publish(address.replace(".", "/"), BODY.encode(), qos=1, properties=p).wait_for_publish(5)
        c.disconnect()
        c.loop_stop()


class Across(unittest.TestCase):
    def test_each_head_to_each_head(self):
        for src in HEADS:
            for dst in HEADS:
                with self.subTest(src=src, dst=dst):
                    address = "x.%s.%s" % (src, dst)
                    r = Receiver(dst, address)
                    send(src, address)
                    body, props = r.result()
                    self.assertEqual(body, BODY)
                    self.assertEqual(props.get("color"), "red")
                    self.assertEqual(props.get("content-type"), "text/plain")


if __name__ == "__main__":
    MQR = sys.argv[2]
    run_suite(CONFIG, sys.modules[__name__])
