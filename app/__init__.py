"""Fieldsync core: store, queue, sync engine and command line. Never imports Qt."""
