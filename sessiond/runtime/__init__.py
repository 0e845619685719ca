"""The runtime: the `Daemon` (owner of the engine host, the scheduler, the sessions, admission),
the scheduler, the engine host and its thread, the directory of sessions (create, find, resume,
delete) and the hand-off of sessions to another daemon."""
