"""``python -m jetstream_arrow.spark``: exit 1 with one line when Spark could not
start a JVM here (no Java 17+), else print the Java and pyspark found; the set-up
scripts run it before any Spark step."""

import sys

from .preflight import main

if __name__ == "__main__":
    sys.exit(main())
