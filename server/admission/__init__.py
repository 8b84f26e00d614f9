"""Admission control: a bound on the device requests one server process works on at once."""
