"""Local store: models, migrations and the durable job queue."""
