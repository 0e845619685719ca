"""Session protocol v1 (PROTOCOL.md): messages, codec, validation, client."""
