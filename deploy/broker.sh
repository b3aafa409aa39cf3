#!/usr/bin/env sh
# Start, stop or inspect the local single-node Kafka broker (KRaft) that kstream
# uses when no cluster is given:
#
#     deploy/broker.sh start [--port 23092]
#     deploy/broker.sh status
#     deploy/broker.sh stop
#
# Same as `kstream broker ...`: one implementation (kstream/infra/broker.py) serves both,
# so the script and the CLI can never disagree. Needs python3 with kstream's
# dependencies (pip install -e .), java 17+ and mvn on PATH.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" exec "${PYTHON:-python3}" -m kstream broker "$@"
