"""Processes tribunal starts for somebody else: an actuator's copies, a shard task's runs, a dispatcher job.

One mechanism (`proc`): each process leads a session of its own, is known by its pid and its start time (so a
reused pid is never taken for it), and is stopped with its whole process group, SIGTERM then SIGKILL after a
grace. Each caller keeps its own policy: an actuator's copies outlive the actuator and are adopted again from
their pid files; a task's processes are bound to their node through its `guardian`, and end when it ends.
"""
