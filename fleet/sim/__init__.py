"""A fleet simulator: the real placement and failover code over simulated workers and an in-memory
directory, at a scale no test box can run (`python -m fleet.sim`)."""
