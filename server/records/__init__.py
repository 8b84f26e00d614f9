"""Work orders: mutations (one and in batches), the review queue, and search."""
