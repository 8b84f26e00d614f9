"""The server database: tables, schema steps, the store, and idempotent requests."""
