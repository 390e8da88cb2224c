"""Writing files so that a crash never leaves half of one: temporary name, fsync, rename."""

from ipuflow.storage.atomic import link_atomically, write_atomically, write_json_atomically

__all__ = ["link_atomically", "write_atomically", "write_json_atomically"]
