"""The office console under `/console/`: server-rendered pages (Jinja2 + htmx) for the office."""
