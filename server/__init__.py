"""Fieldsync reference sync server."""
