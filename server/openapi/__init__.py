"""What `/openapi.json` documents: the answers, the exact inputs, the tus routes."""
