"""statectl: inspect and rewrite Apache Flink savepoints without a JVM."""

__version__ = "0.1.0"
