"""Runtime: child processes (process: launch with an allow-listed environment, bounded,
stoppable, the whole tree killed) and their confinement (landlock, sandbox policy).

Used by crew, tools and pages; imports core only.
"""
