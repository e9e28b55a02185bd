"""@stomp/stompjs over TCP (@stomp/tcp-wrapper, run by node) against a real mqrd: the
cases are in stompjs_client.cjs. The npm packages are in .deps/npm of the source tree
(scripts/deps.sh test puts them there).

usage: test_stompjs.py MQRD SOURCE_DIR"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import run_node_client  # noqa: E402

CONFIG = """
security: {allow-anonymous: true}
listeners:
  - name: main
    port: 0
    protocols: [stomp]
    anycast-prefix: /queue/
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true}
"""

if __name__ == "__main__":
    run_node_client(sys.argv[1], CONFIG, sys.argv[2], "@stomp/stompjs", "stompjs_client.cjs")
