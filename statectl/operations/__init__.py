"""What statectl does to savepoints: inspect, verify, diff, export, migrate, rescale."""
