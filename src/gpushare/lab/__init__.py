"""The lab cluster: pinned binaries, its lifecycle, and how a command reaches a cluster."""
