"""The commands, one module each, named for the command: app.py registers them from one table."""
