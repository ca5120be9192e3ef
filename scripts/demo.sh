#!/usr/bin/env bash
# Run the demo: the main job end to end against a nats-server started just for it.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/setup.sh" server

python -m jetstream_arrow demo "$@"
