"""Create the word count's input topic once the broker answers (compose's `topics` service).

Environment: KSTREAM_BOOTSTRAP, INPUT_TOPIC, PARTITIONS. Waits up to 240 s for
the broker (it starts alongside), then creates the topic (an existing one is kept).
"""

import os
import sys
import time

from kstream.errors import KStreamError
from kstream.infra.admin import Admin

bootstrap = os.environ["KSTREAM_BOOTSTRAP"]
admin = Admin(bootstrap)
deadline = time.monotonic() + 240
while True:
    try:
        admin.check_reachable(timeout=5.0)
        break
    except KStreamError as exc:
        if time.monotonic() > deadline:
            sys.exit(f"topics: {exc}")
        time.sleep(1)  # the broker is starting: ask again, up to the deadline
admin.create_topics({os.environ["INPUT_TOPIC"]: int(os.environ["PARTITIONS"])})
print(f"topics: {os.environ['INPUT_TOPIC']} ready on {bootstrap}")
