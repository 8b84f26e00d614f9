"""Sync engine: delivery worker, transport, classification, reconciliation, conflicts."""
