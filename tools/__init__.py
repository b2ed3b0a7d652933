"""What the agents can do. Each role gets only its own tools (see ``tools.registry``); every tool
call is timed and written to the store's job_events, whether an LLM or autopilot made it."""
