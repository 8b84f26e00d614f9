"""How routes are served: the handlers FastAPI builds for them, made cheaper."""
