"""What the service tells its operators: logs, metrics, traces, per-call telemetry and the probes."""
