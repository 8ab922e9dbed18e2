"""The lab cluster's lifecycle: its pinned binaries, up, down, reset, many labs at once, solve."""
