"""What a learner hands in: the work dir read without trust, and the snapshot file."""
