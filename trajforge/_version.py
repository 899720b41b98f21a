"""The trajforge version, stamped on every record it writes (``Trajectory.trajforge_version``)."""

__version__ = "0.2.0"
