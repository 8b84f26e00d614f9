"""The HTTP layer: one router per resource, each a thin door onto the domain packages."""
