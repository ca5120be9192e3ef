#!/usr/bin/env bash
# Run the demo: the main job end to end against a nats-server started just for it.
set -euo pipefail

# The demo writes and reads through Spark, so it needs the spark extra too.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh" server,spark

python -m jetstream_arrow demo "$@"
