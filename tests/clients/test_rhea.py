"""rhea, the AMQP 1.0 client for node, against a real mqrd over TCP and over a WebSocket:
the cases are in rhea_client.cjs. The npm packages are in .deps/npm of the source tree
(scripts/deps.sh test puts them there).

usage: test_rhea.py MQRD SOURCE_DIR"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mqrd import Mqrd  # noqa: E402

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
    modules = os.path.join(sys.argv[2], ".deps", "npm", "node_modules")
    if not os.path.isdir(os.path.join(modules, "rhea")):
        print("no rhea in %s: run scripts/deps.sh test" % modules)
        sys.exit(1)
    broker = Mqrd(sys.argv[1], CONFIG)
    try:
        env = dict(os.environ, NODE_PATH=modules)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rhea_client.cjs")
        run = subprocess.run(["node", script, str(broker.port)], env=env, timeout=120)
    finally:
        code = broker.stop()
    if code != 0:
        print("mqrd exited with %s:\n%s" % (code, broker.log_text()[-4000:]))
        sys.exit(1)
    sys.exit(run.returncode)
