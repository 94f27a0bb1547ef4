"""Where tasks run: in this process or as a Spark job (no savepoint logic here)."""
