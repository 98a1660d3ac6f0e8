"""Where relational plans run (DuckDB, Spark, a pure-Python reference). Engines never add noise."""
