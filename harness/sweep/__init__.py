"""The sweep: its runner, exporter, claims table and checks; each script runs as python3 -m harness.sweep.NAME from the repo root."""
