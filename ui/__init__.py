"""Fieldsync Qt app (PySide6, QML)."""
