"""Attachment bytes: tus uploads' life in the database and their files on disk."""
