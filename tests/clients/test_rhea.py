"""rhea, the AMQP 1.0 client for node, against a real mqrd over TCP and over a WebSocket:
the cases are in rhea_client.cjs. The npm packages are in .deps/npm of the source tree
(scripts/deps.sh test puts them there).

usage: test_rhea.py MQRD SOURCE_DIR"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import run_node_client  # noqa: E402

CONFIG = """
security: {allow-anonymous: true}
listeners:
  - name: main
    port: 0
    protocols: [amqp, http]
address-settings:
  '#': {auto-create-addresses: true, auto-create-queues: true}
  'full.#': {max-size-bytes: 1KiB, address-full-policy: FAIL}
  'blk.#': {max-size-bytes: 64KiB, address-full-policy: BLOCK}
"""

if __name__ == "__main__":
    run_node_client(sys.argv[1], CONFIG, sys.argv[2], "rhea", "rhea_client.cjs")
