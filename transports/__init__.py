"""Adapters between a session and the wire. Never imports engine."""
