"""How a daemon joins a fleet: the adapter that implements `fleet.daemon_port.FleetDaemon` over
the daemon, and `serve --fleet`. The only modules of sessiond (with the fleet commands) that import
the fleet; the single daemon never imports them."""
