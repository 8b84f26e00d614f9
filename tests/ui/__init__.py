"""Tests of the Qt app (ui/)."""
