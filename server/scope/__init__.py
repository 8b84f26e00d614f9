"""Who holds which work order: scope keys, the scoped feed, pins, legacy devices, pruning."""
