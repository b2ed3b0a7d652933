"""Configuration: where the home folder is (settings), what the user saved (user_settings), which
environment variables are secret and which reach a child process (secrets), the process set-up each
entry point calls (bootstrap, launch) and every training default (training_defaults).

May import: the standard library and third-party packages only. Nothing else in core.
"""
