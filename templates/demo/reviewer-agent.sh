#!/bin/sh
# The demo's flaky reviewer: its first attempt fails (exit 1, the reason on stderr), so the task
# is retried after a backoff; the next attempt approves. Exit 100 would mean "do not retry".
cat >/dev/null
if [ "$COORD_ATTEMPT" = 1 ]; then
    echo "scanner timed out" >&2
    exit 1
fi
echo "verdict: approved"
echo "by: $COORD_AGENT"
