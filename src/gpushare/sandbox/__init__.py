"""Running a learner's untrusted script: time limits, caps, bubblewrap, nothing left."""
