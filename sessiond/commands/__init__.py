"""The command-line shells of `sessiond <command>` (registered in `sessiond.cli`): each parses its
arguments and hands off to the runtime, the fleet or the tools; heavy imports happen lazily."""
