"""Reading run directories for analysis: records into columns, the server's metrics and
the telemetry per step, the features a run had on, and whether runs can be compared at all."""
