"""Per device, beyond its token: the status it reports and its request budget."""
