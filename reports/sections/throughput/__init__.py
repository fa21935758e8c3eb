"""The Throughput section and the run's timings (``timings``)."""
