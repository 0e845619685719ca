"""`sessiond replay`: drive a trace against a daemon and report what each user saw
(runner -> one session_runner per trace session -> its meter; report and plots from the
outcome); `sessiond replay-compare`: the same trace under each admission policy (compare)."""
