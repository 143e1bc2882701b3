"""The `netbench` command line: parses and validates, then hands off to the orchestrator."""
