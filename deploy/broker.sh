#!/usr/bin/env sh
# Start, stop or inspect the local single-node Kafka broker (KRaft) that kstream
# uses when no cluster is given:
#
#     deploy/broker.sh start [--port 23092]
#     deploy/broker.sh status
#     deploy/broker.sh stop
#
# Same as `kstream broker ...`: one implementation (kstream/infra/broker.py) serves both,
# so the script and the CLI can never disagree. Needs java 17+ and mvn on PATH, and a
# Python with kstream's dependencies: $PYTHON if set (only it), else the checkout's
# .venv (python3 -m venv .venv && .venv/bin/pip install -e .), else python3 on PATH;
# the first that can load kstream runs it, whatever PATH holds. Without one it says
# so in one line (exit 2).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
# Loading the command line loads every dependency the broker commands need.
probe='import kstream.tools.cli'

# run PYTHON ARGS...: run the broker command with PYTHON if it can load kstream.
run() {
    py=$1
    shift
    if command -v "$py" >/dev/null 2>&1 && "$py" -c "$probe" >/dev/null 2>&1; then
        exec "$py" -m kstream broker "$@"
    fi
}

if [ -n "${PYTHON:-}" ]; then
    run "$PYTHON" "$@"
    last=$PYTHON
else
    run "$here/.venv/bin/python" "$@"
    run python3 "$@"
    last=python3
fi
if command -v "$last" >/dev/null 2>&1; then
    why=$("$last" -c "$probe" 2>&1 | tail -n 1) || true
else
    why="not found"
fi
echo "kstream: error: no Python with kstream's dependencies ($last: $why); create the" \
    "checkout's venv: python3 -m venv $here/.venv && $here/.venv/bin/pip install -e $here," \
    "or set PYTHON to a Python that has them" >&2
exit 2
