"""The session daemon: sessions, scheduler, admission, stores, the app and the CLI."""
