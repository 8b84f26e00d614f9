"""Smoke runs of every benchmark."""
