"""The built-in task sources: our JSON-lines Task records and verl's parquet rows."""
